//! Booleans as Go's `strconv.ParseBool` reads them.

/// Parses a boolean the way Go's `strconv.ParseBool` does, the syntax of Go
/// boolean flags (`-verbose=false`): `1`, `t`, `T`, `true`, `TRUE`, `True` and
/// `0`, `f`, `F`, `false`, `FALSE`, `False`. Anything else is an error naming the
/// value, so it can serve as a clap `value_parser`.
///
/// ```
/// use nri_plugin_util::parse_go_bool;
///
/// assert_eq!(parse_go_bool("T"), Ok(true));
/// assert_eq!(parse_go_bool("0"), Ok(false));
/// assert_eq!(parse_go_bool("yes"), Err("invalid boolean value \"yes\"".to_string()));
/// ```
pub fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("invalid boolean value {value:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_exactly_go_spellings() {
        for v in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_go_bool(v), Ok(true), "{v}");
        }
        for v in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_go_bool(v), Ok(false), "{v}");
        }
        for v in ["", "tRUE", "yes", "on", "2", " true", "maybe"] {
            assert!(parse_go_bool(v).is_err(), "{v}");
        }
    }
}
