//! Command line: the flags of every sample plugin ([`nri_plugin_util::CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::PluginInfo;

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-ulimit-adjuster",
    about: "NRI plugin: sets container rlimits from pod annotations",
    name: "ulimit-adjuster",
    index: "10",
    annotations: &[
        (
            "ulimits.noderesource.dev/container.NAME",
            "YAML list of {type, hard, soft} rlimits for container NAME",
        ),
        (
            "ulimits.nri.containerd.io/container.NAME",
            "older key, same content",
        ),
    ],
};

/// Flags of the ulimit adjuster (those of the Go plugin, plus `-no-reconnect`).
pub type Args = nri_plugin_util::PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn go_flags_and_the_socket_alias() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &["-name", "ulimits", "-idx", "10", "-socket=/run/x.sock"],
        )
        .unwrap();
        assert_eq!(a.common.name.as_deref(), Some("ulimits"));
        assert_eq!(a.common.idx.as_deref(), Some("10"));
        assert_eq!(a.common.socket_path.to_str(), Some("/run/x.sock"));
        assert!(try_parse_flags::<Args>(&INFO, &["-bogus", "1"]).is_err());
    }
}
