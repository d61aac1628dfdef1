//! Command line: the flags of every sample plugin ([`CommonArgs`](nri_plugin_util::CommonArgs): `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), in Go's single-dash
//! style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::{PluginArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-network-logger",
    about: "NRI plugin that logs the network namespace and IP addresses of pods",
    name: "network-logger",
    index: "10",
    annotations: &[],
};

/// Flags of the network-logger plugin (those of the Go sample, plus `-verbose` and
/// `-no-reconnect`): the flags every sample plugin takes, no others.
pub type Args = PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn takes_the_go_sample_flags() {
        let a = try_parse_flags::<Args>(&INFO, &["-idx", "20", "-socket", "/s"]).unwrap();
        assert_eq!(a.common.socket_path.to_str(), Some("/s"));
        assert!(try_parse_flags::<Args>(&INFO, &["-events", "x"]).is_err());
    }
}
