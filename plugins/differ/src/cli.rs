//! Command line: Go-style flags (`-indices 05,15`, `-yaml`, `--socket-path x`) parsed with clap.

use clap::Parser;
use nri_plugin_util::{go_args, parse_go_bool, ShortFlags};

/// Flags of the differ (those of the Go differ, plus `-name` and `-verbose`).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "nri-differ",
    about = "NRI plugin: registers at several indices and shows what the plugins between them changed"
)]
pub struct Args {
    /// Comma-separated indices to register at, at least two; the changes made
    /// by the plugins between two of them are shown.
    #[arg(long, default_value = "0,99")]
    pub indices: String,
    /// Path of the NRI socket file.
    #[arg(long = "socket-path", alias = "socket")]
    pub socket: Option<String>,
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
    /// Plugin name to register to NRI (at every index).
    #[arg(long, default_value = "differ")]
    pub name: String,
    /// Enable debug logging.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_parser = parse_go_bool)]
    pub verbose: bool,
}

impl Args {
    /// Parses the process's arguments; exits with usage on error, like Go's `flag`.
    pub fn from_env() -> Args {
        Args::parse_from(go_args(std::env::args_os(), ShortFlags::Keep))
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("nri-differ")
            .chain(args.iter().copied())
            .map(OsString::from);
        Args::try_parse_from(go_args(argv, ShortFlags::Keep))
    }

    #[test]
    fn takes_the_go_flags() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            (a.indices.as_str(), a.name.as_str(), a.verbose_level, a.yaml),
            ("0,99", "differ", 0, false)
        );
        let a = parse(&[
            "-indices",
            "05,15",
            "-socket-path=/run/x.sock",
            "-log-file",
            "/tmp/d.log",
            "-verbose-level",
            "2",
            "-yaml",
        ])
        .unwrap();
        assert_eq!(a.indices, "05,15");
        assert_eq!(a.socket.as_deref(), Some("/run/x.sock"));
        assert_eq!(a.log_file, "/tmp/d.log");
        assert_eq!(a.verbose_level, 2);
        assert!(a.yaml);
        let a = parse(&[
            "--socket",
            "/s",
            "-output",
            "/o",
            "-yaml=false",
            "-name",
            "d",
        ])
        .unwrap();
        assert_eq!(a.socket.as_deref(), Some("/s"));
        assert_eq!(a.log_file, "/o");
        assert!(!a.yaml);
        assert_eq!(a.name, "d");
    }

    #[test]
    fn bad_flags_are_errors() {
        assert!(parse(&["-bogus"]).is_err());
        assert!(parse(&["-verbose-level", "x"]).is_err());
        assert!(parse(&["-yaml=maybe"]).is_err());
    }
}
