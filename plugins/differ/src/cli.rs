//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`; `-idx` is refused,
//! the differ registers at `-indices`), and those of the Go differ, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use clap::Parser;
use nri_plugin_util::{parse_go_bool, CommonArgs, PluginInfo};

/// Name and annotations of the plugin, for `-help` and the defaults; it
/// registers at each of `-indices`, not at a default index.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-differ",
    about:
        "NRI plugin: registers at several indices and shows what the plugins between them changed",
    name: "differ",
    index: "00",
    annotations: &[],
};

/// Flags of the differ (those of the Go differ, plus `-name`, `-verbose` and
/// `-no-reconnect`).
#[derive(Debug, Clone, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Comma-separated indices to register at, at least two; the changes made
    /// by the plugins between two of them are shown.
    #[arg(long, default_value = "0,99")]
    pub indices: String,
    /// Log file name, if logging to a file (appended to).
    #[arg(long, alias = "output", default_value = "")]
    pub log_file: String,
    /// 0: only the changes; 1: also what the first index saw; 2: also the
    /// objects before and after the changes; 3: also Synchronize.
    #[arg(long, default_value_t = 0)]
    pub verbose_level: u8,
    /// Show the changes as line diffs of the objects' YAML.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_parser = parse_go_bool)]
    pub yaml: bool,
}

impl Args {
    /// The name to register with at every index: `-name`, else `differ`.
    pub fn name(&self) -> String {
        self.common
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| INFO.name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn takes_the_go_flags() {
        let a = try_parse_flags::<Args>(&INFO, &[]).unwrap();
        assert_eq!(
            (
                a.indices.as_str(),
                a.name().as_str(),
                a.verbose_level,
                a.yaml
            ),
            ("0,99", "differ", 0, false)
        );
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "-indices",
                "05,15",
                "-socket-path=/run/x.sock",
                "-log-file",
                "/tmp/d.log",
                "-verbose-level",
                "2",
                "-yaml",
            ],
        )
        .unwrap();
        assert_eq!(a.indices, "05,15");
        assert_eq!(a.common.socket_path.to_str(), Some("/run/x.sock"));
        assert_eq!(a.log_file, "/tmp/d.log");
        assert_eq!(a.verbose_level, 2);
        assert!(a.yaml);
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "--socket",
                "/s",
                "-output",
                "/o",
                "-yaml=false",
                "-name",
                "d",
            ],
        )
        .unwrap();
        assert_eq!(a.common.socket_path.to_str(), Some("/s"));
        assert_eq!(a.log_file, "/o");
        assert!(!a.yaml);
        assert_eq!(a.name(), "d");
    }

    #[test]
    fn bad_flags_are_errors() {
        assert!(try_parse_flags::<Args>(&INFO, &["-bogus"]).is_err());
        assert!(try_parse_flags::<Args>(&INFO, &["-verbose-level", "x"]).is_err());
        assert!(try_parse_flags::<Args>(&INFO, &["-yaml=maybe"]).is_err());
    }
}
