//! Command-line conventions shared with the Go plugins: single-dash long flags,
//! Go boolean syntax, the plugin name default, and logging set-up.

use std::ffi::{OsStr, OsString};

/// Rewrites Go-style flags (`-idx 10`, `-verbose=false`) into the double-dash form
/// clap parses. Arguments after a bare `--` and the program name are left alone.
///
/// ```
/// # use nri_plugin_v010_adapter::cli::normalize_args;
/// let args = normalize_args(["prog", "-idx", "10", "--verbose", "-verbose=false"]);
/// assert_eq!(args, ["prog", "--idx", "10", "--verbose", "--verbose=false"]);
/// ```
pub fn normalize_args<I, S>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let mut out = Vec::new();
    let mut flags_done = false;
    for (i, arg) in args.into_iter().enumerate() {
        let arg: OsString = arg.into();
        if i == 0 || flags_done {
            out.push(arg);
            continue;
        }
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" {
            flags_done = true;
            out.push(arg);
        } else if bytes.len() > 1 && bytes[0] == b'-' && bytes[1] != b'-' {
            let mut long = OsString::from("-");
            long.push(&arg);
            out.push(long);
        } else {
            out.push(arg);
        }
    }
    out
}

/// Parses a boolean the way Go's `strconv.ParseBool` does (`1`, `t`, `TRUE`, `false`, ...).
///
/// ```
/// # use nri_plugin_v010_adapter::cli::parse_go_bool;
/// assert_eq!(parse_go_bool("T"), Ok(true));
/// assert_eq!(parse_go_bool("0"), Ok(false));
/// assert!(parse_go_bool("yes").is_err());
/// ```
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("invalid boolean value {value:?}")),
    }
}

/// Parses a duration written as Go writes them, for the common units: `500ms`,
/// `2s`, `1m`, `1m30s`; a bare number is seconds.
///
/// ```
/// # use std::time::Duration;
/// # use nri_plugin_v010_adapter::cli::parse_duration;
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("invalid duration {text:?}");
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(secs));
    }
    let mut total = std::time::Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let value: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit] {
            "ms" => std::time::Duration::from_millis(value),
            "s" => std::time::Duration::from_secs(value),
            "m" => std::time::Duration::from_secs(value.saturating_mul(60)),
            "h" => std::time::Duration::from_secs(value.saturating_mul(3600)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(part);
        rest = &rest[unit..];
    }
    Ok(total)
}

/// The plugin name to give the stub: the `-name` flag; else nothing when the runtime
/// named the plugin (`NRI_PLUGIN_NAME`) or the program is called `NN-name`; else
/// `default` (the name of the Go plugin's binary).
pub fn plugin_name(flag: Option<String>, default: &str) -> Option<String> {
    if let Some(name) = flag.filter(|n| !n.is_empty()) {
        return Some(name);
    }
    let from_env =
        std::env::var_os(nri_stub::api::plugin::PLUGIN_NAME_ENV).is_some_and(|v| !v.is_empty());
    let program = std::env::args_os().next().unwrap_or_default();
    if from_env || is_indexed_program(&program) {
        None
    } else {
        Some(default.to_string())
    }
}

/// True if the basename of `program` reads as `NN-name`.
fn is_indexed_program(program: &OsStr) -> bool {
    let program = program.to_string_lossy();
    let base = program.rsplit('/').next().unwrap_or_default();
    nri_stub::api::plugin::parse_plugin_name(base).is_ok()
}

/// Sends `tracing` logs to standard error: `info` and up, `debug` with `verbose`;
/// `RUST_LOG` overrides both.
pub fn init_logging(verbose: bool) {
    let default = if verbose { "debug" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_dash_flags_become_long() {
        let args = normalize_args(["p", "-socket-path=/x", "-v", "value", "--", "-keep"]);
        assert_eq!(
            args,
            ["p", "--socket-path=/x", "--v", "value", "--", "-keep"]
        );
    }

    #[test]
    fn lone_dash_is_a_value() {
        assert_eq!(normalize_args(["p", "-"]), ["p", "-"]);
    }

    #[test]
    fn indexed_program_names() {
        assert!(is_indexed_program(OsStr::new(
            "/opt/nri/plugins/10-hook-injector"
        )));
        assert!(!is_indexed_program(OsStr::new(
            "/usr/bin/nri-hook-injector"
        )));
    }
}
