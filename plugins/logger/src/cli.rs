//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and those of the Go logger, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use clap::Parser;
use nri_plugin_util::{CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-logger",
    about: "NRI plugin: logs the requests and events it subscribes to",
    name: "logger",
    index: "10",
    annotations: &[],
};

/// Flags of the logger (those of the Go logger, plus `-name`, `-verbose` and `-no-reconnect`).
#[derive(Debug, Clone, Default, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Comma-separated list of events to subscribe to (default: all the runtime delivers).
    #[arg(long, default_value = "")]
    pub events: String,
    /// Log file name, if logging to a file.
    #[arg(long, default_value = "")]
    pub log_file: String,
    /// Add this annotation to containers.
    #[arg(long, alias = "annotation", default_value = "")]
    pub add_annotation: String,
    /// Set this annotation on containers.
    #[arg(long, default_value = "")]
    pub set_annotation: String,
    /// Add this environment variable for containers.
    #[arg(long, default_value = "")]
    pub add_env: String,
    /// Set this environment variable for containers.
    #[arg(long, default_value = "")]
    pub set_env: String,
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn the_go_loggers_flags() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "-events",
                "pod,CreateContainer",
                "-log-file",
                "/tmp/l",
                "-add-annotation",
                "a",
                "-set-annotation",
                "s",
                "-add-env",
                "E",
                "-set-env",
                "S",
            ],
        )
        .unwrap();
        assert_eq!(a.events, "pod,CreateContainer");
        assert_eq!(a.log_file, "/tmp/l");
        assert_eq!(
            (a.add_annotation.as_str(), a.set_annotation.as_str()),
            ("a", "s")
        );
        assert_eq!((a.add_env.as_str(), a.set_env.as_str()), ("E", "S"));
        assert_eq!(
            try_parse_flags::<Args>(&INFO, &["-annotation", "x"])
                .unwrap()
                .add_annotation,
            "x"
        );
    }
}
