//! Command line: Go-style flags (`-name x`, `-name=x`, `--name x`) parsed with clap.

use clap::Parser;
use nri_plugin_util::{go_args, parse_go_bool, ShortFlags};

/// Flags of the ulimit adjuster (those of the Go plugin).
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "nri-ulimit-adjuster",
    about = "NRI plugin: sets container rlimits from pod annotations"
)]
pub struct Args {
    /// Plugin name to register to NRI.
    #[arg(long)]
    pub name: Option<String>,
    /// Plugin index to register to NRI.
    #[arg(long)]
    pub idx: Option<String>,
    /// Path of the NRI socket to connect to.
    #[arg(long, alias = "socket-path")]
    pub socket: Option<String>,
    /// Enable (more) verbose logging.
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
        let argv = std::iter::once("nri-ulimit-adjuster")
            .chain(args.iter().copied())
            .map(OsString::from);
        Args::try_parse_from(go_args(argv, ShortFlags::Keep))
    }

    #[test]
    fn accepts_single_and_double_dash_flags() {
        let a = parse(&["-name", "ulimits", "--idx", "10", "-socket=/run/x.sock"]).unwrap();
        assert_eq!(a.name.as_deref(), Some("ulimits"));
        assert_eq!(a.idx.as_deref(), Some("10"));
        assert_eq!(a.socket.as_deref(), Some("/run/x.sock"));
        assert!(!a.verbose);
    }

    #[test]
    fn bool_flags_take_go_values_but_never_the_next_argument() {
        assert!(parse(&["-verbose"]).unwrap().verbose);
        assert!(parse(&["-verbose=true"]).unwrap().verbose);
        assert!(!parse(&["-verbose=f"]).unwrap().verbose);
        let a = parse(&["-verbose", "-idx", "05"]).unwrap();
        assert!(a.verbose);
        assert_eq!(a.idx.as_deref(), Some("05"));
        assert!(parse(&["-verbose=maybe"]).is_err());
    }

    #[test]
    fn unknown_flags_are_errors() {
        assert!(parse(&["-bogus", "1"]).is_err());
    }
}
