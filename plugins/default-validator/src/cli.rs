//! Command line: the flags of every sample plugin ([`CommonArgs`](nri_plugin_util::CommonArgs): `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and `-config`, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use nri_plugin_util::{PluginArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-default-validator",
    about: "NRI plugin: the default validator as a standalone validating plugin",
    name: nri_validator::DEFAULT_VALIDATOR_NAME,
    index: nri_validator::DEFAULT_VALIDATOR_INDEX,
    annotations: &[
        (
            "required-plugins.noderesource.dev[/container.NAME]",
            "plugins that must have processed the container",
        ),
        (
            "tolerate-missing-nri-plugins.noderesource.dev",
            "\"true\": no plugin is required (the key is configurable)",
        ),
    ],
};

/// Flags of the validator plugin: the flags every sample plugin takes, `-config`
/// among them: the configuration file (YAML); a configuration sent by the runtime
/// replaces it.
pub type Args = PluginArgs;

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn config_flag() {
        let a = try_parse_flags::<Args>(&INFO, &["-config", "/c", "-name", "v"]).unwrap();
        assert_eq!(a.common.config.as_deref(), Some(std::path::Path::new("/c")));
        assert_eq!(a.common.name.as_deref(), Some("v"));
    }
}
