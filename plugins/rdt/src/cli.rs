//! Command line: the flags of every sample plugin ([`nri_plugin_util::CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::PluginInfo;

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-rdt",
    about: "Sets the RDT class, schemata and monitoring of containers, as pod annotations ask",
    name: "rdt",
    index: "10",
    annotations: &[
        (
            "closid.rdt.noderesource.dev/container.NAME",
            "class of service (intelRdt.closID)",
        ),
        (
            "schemata.rdt.noderesource.dev/container.NAME",
            "schemata lines, comma-separated",
        ),
        (
            "enablemonitoring.rdt.noderesource.dev/container.NAME",
            "Go boolean",
        ),
    ],
};

/// Flags of the RDT plugin (those of the Go plugin, plus `-name`, `-socket-path` and `-no-reconnect`).
pub type Args = nri_plugin_util::PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn verbose_is_a_go_boolean() {
        assert!(
            try_parse_flags::<Args>(&INFO, &["-verbose"])
                .unwrap()
                .common
                .verbose
        );
        assert!(
            !try_parse_flags::<Args>(&INFO, &["-verbose=F"])
                .unwrap()
                .common
                .verbose
        );
        assert!(try_parse_flags::<Args>(&INFO, &["-verbose=yes"]).is_err());
    }
}
