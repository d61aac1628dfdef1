//! Boolean parsing with the rules and error text of Go's `strconv.ParseBool`.
//!
//! Annotations such as the "tolerate missing plugins" one are parsed this
//! way, so that the same values are accepted and the same error text is
//! produced as by the reference implementation.
//!
//! ```
//! use nri_validator::gobool::parse_bool;
//! assert_eq!(parse_bool("T"), Ok(true));
//! assert_eq!(parse_bool("0"), Ok(false));
//! assert_eq!(
//!     parse_bool("yes").unwrap_err().to_string(),
//!     r#"strconv.ParseBool: parsing "yes": invalid syntax"#,
//! );
//! ```

use nri_api::gofmt::quote;

/// The error of [`parse_bool`]; displays as Go's `strconv.ParseBool` error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strconv.ParseBool: parsing {}: invalid syntax", quote(.input))]
pub struct ParseBoolError {
    /// The text that could not be parsed.
    pub input: String,
}

/// Parses a boolean like Go's `strconv.ParseBool`.
///
/// True: `1`, `t`, `T`, `TRUE`, `true`, `True`. False: `0`, `f`, `F`,
/// `FALSE`, `false`, `False`. Anything else (including surrounding white
/// space) is an error.
pub fn parse_bool(s: &str) -> Result<bool, ParseBoolError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(ParseBoolError {
            input: s.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_go_spelling() {
        for s in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(s), Ok(true), "{s}");
        }
        for s in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(s), Ok(false), "{s}");
        }
    }

    #[test]
    fn rejects_other_spellings_with_go_text() {
        for s in ["", "yes", "no", "tRUE", " true", "true ", "2", "on"] {
            let err = parse_bool(s).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("strconv.ParseBool: parsing {}: invalid syntax", quote(s))
            );
        }
        assert_eq!(
            parse_bool("a\"b").unwrap_err().to_string(),
            r#"strconv.ParseBool: parsing "a\"b": invalid syntax"#
        );
    }
}
