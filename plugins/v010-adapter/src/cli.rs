//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and its own, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use std::path::PathBuf;
use std::time::Duration;

use crate::v01::{DEFAULT_BINARY_PATH, DEFAULT_CONF_PATH};

use clap::Parser;
use nri_plugin_util::{parse_duration, CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-v010-adapter",
    about: "Runs the NRI v0.1 plugins of /etc/nri/conf.json at pod and container start and stop",
    name: "v010-adapter",
    index: "10",
    annotations: &[],
};

/// Flags of the v0.1 adapter (those of the Go plugin, plus `-name`, `-conf`, `-bin-dir`, `-invoke-timeout` and `-no-reconnect`).
#[derive(Debug, Clone, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// The v0.1 configuration list
    #[arg(long = "conf", default_value = DEFAULT_CONF_PATH)]
    pub conf: PathBuf,
    /// Directory of v0.1 plugin executables (searched after $PATH)
    #[arg(long = "bin-dir", default_value = DEFAULT_BINARY_PATH)]
    pub bin_dir: PathBuf,
    /// Longest run of one v0.1 plugin (e.g. 2s); default: the runtime's request timeout
    #[arg(long = "invoke-timeout", value_parser = parse_duration)]
    pub invoke_timeout: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn own_flags() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "-conf",
                "/c.json",
                "-bin-dir",
                "/b",
                "-invoke-timeout",
                "1.5s",
            ],
        )
        .unwrap();
        assert_eq!(a.conf, PathBuf::from("/c.json"));
        assert_eq!(a.bin_dir, PathBuf::from("/b"));
        assert_eq!(a.invoke_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(
            try_parse_flags::<Args>(&INFO, &[]).unwrap().invoke_timeout,
            None
        );
    }
}
