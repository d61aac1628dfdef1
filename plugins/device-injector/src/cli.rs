//! Command line: the flags of every sample plugin ([`nri_plugin_util::CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::PluginInfo;

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-device-injector",
    about: "Injects devices, mounts and more into containers, as pod annotations ask",
    name: "device-injector",
    index: "10",
    annotations: &[
        (
            "devices.noderesource.dev/container.NAME",
            "device nodes (YAML list)",
        ),
        (
            "cdi-devices.noderesource.dev/container.NAME",
            "CDI device names (YAML list)",
        ),
        (
            "mounts.noderesource.dev/container.NAME",
            "mounts (YAML list)",
        ),
        (
            "network-devices.noderesource.dev/container.NAME",
            "network devices (YAML list)",
        ),
        (
            "sysctl.noderesource.dev/container.NAME",
            "sysctls (YAML map)",
        ),
        (
            "io-priority.noderesource.dev/container.NAME",
            "I/O priority class and level",
        ),
        (
            "scheduling-policy.noderesource.dev/container.NAME",
            "scheduling policy",
        ),
        (
            "memory-policy.noderesource.dev/container.NAME",
            "memory policy",
        ),
        ("KEY/pod", "any key above, for every container of the pod"),
        (
            "devices.nri.io/...",
            "older *.nri.io keys, the same (see the README)",
        ),
    ],
};

/// Flags of the device injector (those of the Go plugin, plus `-name` and `-no-reconnect`).
pub type Args = nri_plugin_util::PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn socket_path_and_its_alias() {
        for flag in ["-socket-path=/s", "-socket=/s"] {
            assert_eq!(
                try_parse_flags::<Args>(&INFO, &[flag])
                    .unwrap()
                    .common
                    .socket_path
                    .to_str(),
                Some("/s")
            );
        }
    }
}
