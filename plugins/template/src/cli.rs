//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and `-events`, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use clap::Parser;
use nri_plugin_util::{CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-template",
    about: "Template NRI plugin: logs every request it gets",
    name: "template",
    index: "10",
    annotations: &[],
};

/// Flags of the template plugin (those of the Go template, plus `-events`, `-verbose` and `-no-reconnect`).
#[derive(Debug, Clone, Default, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Comma-separated list of events to subscribe to (default: all the runtime delivers).
    #[arg(long)]
    pub events: Option<String>,
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn events_and_common_flags() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &["-events", "pod", "-socket-path", "/s", "-no-reconnect"],
        )
        .unwrap();
        assert_eq!(a.events.as_deref(), Some("pod"));
        assert_eq!(a.common.socket_path.to_str(), Some("/s"));
        assert!(!a.common.reconnects());
    }
}
