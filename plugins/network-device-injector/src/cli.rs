//! Command line: the flags of every sample plugin ([`nri_plugin_util::CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::PluginInfo;

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-network-device-injector",
    about: "NRI plugin: moves host network devices into pods from annotations",
    name: "network-device-injector",
    index: "10",
    annotations: &[
        (
            "netdevice.noderesource.dev[/pod]",
            "YAML list of host network devices to move into the pod",
        ),
        ("netdevices.noderesource.dev[/pod]", "the same"),
        ("netdevices.nri.containerd.io[/pod]", "older key, the same"),
    ],
};

/// Flags of the network device injector (those of the Go plugin, plus `-name` and `-no-reconnect`).
pub type Args = nri_plugin_util::PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn socket_has_both_go_spellings() {
        for flag in ["-socket=/run/x.sock", "-socket-path=/run/x.sock"] {
            let a = try_parse_flags::<Args>(&INFO, &[flag]).unwrap();
            assert_eq!(a.common.socket_path.to_str(), Some("/run/x.sock"));
        }
    }
}
