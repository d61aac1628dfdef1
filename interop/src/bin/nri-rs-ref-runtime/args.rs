//! Command-line flags, parsed as Go's `flag` package does: `-name value`,
//! `-name=value`, one or two dashes, parsing stops at the first non-flag
//! argument or `--`.

use std::path::PathBuf;

use crate::runner::Paths;

pub const USAGE: &str =
    "usage: nri-rs-ref-runtime -scenario FILE [-socket PATH] [-plugin-dir DIR] \
[-plugin-config-dir DIR] [-output FILE] [-raw]";

/// The flags.
#[derive(Debug, Default)]
pub struct Args {
    pub scenario: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub raw: bool,
    pub paths: Paths,
}

#[derive(Debug)]
pub enum Parsed {
    Run(Args),
    Help,
}

/// A boolean flag's value, with the error text of Go's `flag` package.
fn parse_bool(flag: &str, v: &str) -> Result<bool, String> {
    nri_api::goparse::parse_bool(v)
        .map_err(|_| format!("invalid boolean value \"{v}\" for -{flag}: parse error"))
}

/// Parses the arguments (without the program name).
pub fn parse(argv: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut args = Args::default();
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--" || !arg.starts_with('-') || arg == "-" {
            break;
        }
        let body = arg.strip_prefix("--").unwrap_or(&arg[1..]);
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            return Err(format!("bad flag syntax: {arg}"));
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        if name == "raw" {
            args.raw = match inline {
                Some(v) => parse_bool(&name, &v)?,
                None => true,
            };
            continue;
        }
        if name == "h" || name == "help" {
            return Ok(Parsed::Help);
        }
        let known = [
            "scenario",
            "socket",
            "plugin-dir",
            "plugin-config-dir",
            "output",
        ];
        if !known.contains(&name.as_str()) {
            return Err(format!("flag provided but not defined: -{name}"));
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .ok_or_else(|| format!("flag needs an argument: -{name}"))?,
        };
        let path = |v: String| (!v.is_empty()).then(|| PathBuf::from(v));
        match name.as_str() {
            "scenario" => args.scenario = path(value),
            "socket" => args.paths.socket = path(value),
            "plugin-dir" => args.paths.plugin_dir = path(value),
            "plugin-config-dir" => args.paths.config_dir = path(value),
            _ => args.output = path(value),
        }
    }
    Ok(Parsed::Run(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[&str]) -> Result<Args, String> {
        match parse(v.iter().map(|s| s.to_string()))? {
            Parsed::Run(a) => Ok(a),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn go_flag_forms() {
        let a = run(&[
            "-scenario",
            "s.json",
            "--socket=/x.sock",
            "-raw",
            "-output",
            "o",
        ])
        .unwrap();
        assert_eq!(a.scenario.unwrap(), PathBuf::from("s.json"));
        assert_eq!(a.paths.socket.unwrap(), PathBuf::from("/x.sock"));
        assert_eq!(a.output.unwrap(), PathBuf::from("o"));
        assert!(a.raw);
        assert!(!run(&["-raw=false"]).unwrap().raw);
        assert!(run(&["-socket", "", "x", "-bogus"])
            .unwrap()
            .paths
            .socket
            .is_none());
        assert_eq!(
            run(&["-bogus"]).unwrap_err(),
            "flag provided but not defined: -bogus"
        );
        assert_eq!(
            run(&["-scenario"]).unwrap_err(),
            "flag needs an argument: -scenario"
        );
        assert!(run(&["-raw=maybe"]).is_err());
        assert!(matches!(parse(["-h".to_string()]), Ok(Parsed::Help)));
    }
}
