//! Command line: Go-style flags (`-name x`, `-name=x`, `--name x`) parsed with clap.

use std::ffi::OsString;

use clap::Parser;

/// Flags of the network device injector (those of the Go plugin, plus `-name`).
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "nri-network-device-injector",
    about = "NRI plugin: moves host network devices into pods from annotations"
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
        Args::parse_from(go_style_args(std::env::args_os()))
    }
}

/// Rewrites Go-style single-dash long flags (`-name`) into clap's `--name`.
///
/// Arguments after a bare `--` are left alone, and so are single-letter flags (`-h`)
/// and anything that does not start with a dash.
pub fn go_style_args<I: IntoIterator<Item = OsString>>(args: I) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest_positional = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || rest_positional {
            out.push(arg);
            continue;
        }
        let rewritten = match arg.to_str() {
            Some("--") => {
                rest_positional = true;
                None
            }
            Some(s) if s.starts_with('-') && !s.starts_with("--") && s.len() > 2 => {
                Some(OsString::from(format!("-{s}")))
            }
            _ => None,
        };
        out.push(rewritten.unwrap_or(arg));
    }
    out
}

/// Go's `strconv.ParseBool`, the syntax of Go boolean flags (`-verbose=false`).
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("invalid boolean value {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("nri-network-device-injector")
            .chain(args.iter().copied())
            .map(OsString::from);
        Args::try_parse_from(go_style_args(argv))
    }

    #[test]
    fn accepts_single_and_double_dash_flags() {
        let a = parse(&["-name", "netdev", "--idx", "10", "-socket=/run/x.sock"]).unwrap();
        assert_eq!(a.name.as_deref(), Some("netdev"));
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

    #[test]
    fn leaves_positional_and_short_arguments_alone() {
        let argv = ["p", "-h", "x", "--", "-name"].map(OsString::from);
        assert_eq!(
            go_style_args(argv),
            ["p", "-h", "x", "--", "-name"].map(OsString::from)
        );
    }
}
