//! Booleans and durations written the way Go reads them, for every crate of
//! the workspace: Go's `strconv.ParseBool` ([`parse_bool`]) and
//! `time.ParseDuration` ([`parse_duration`]), with Go's error texts, and
//! `time.Duration.String` ([`format_duration`]).
//!
//! Flags of the sample plugins, annotations, and configuration files all go
//! through these, so `1m30s` or `T` mean the same thing everywhere.
//!
//! ```
//! use std::time::Duration;
//! use nri_api::goparse::{format_duration, parse_bool, parse_duration};
//!
//! assert_eq!(parse_bool("T"), Ok(true));
//! assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
//! assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
//! // As in Go, a number needs a unit unless it is 0.
//! assert_eq!(
//!     parse_duration("30").unwrap_err().to_string(),
//!     r#"time: missing unit in duration "30""#
//! );
//! ```

use std::time::Duration;

use crate::gofmt::quote;

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
///
/// ```
/// use nri_api::goparse::parse_bool;
///
/// assert_eq!(parse_bool("0"), Ok(false));
/// assert_eq!(
///     parse_bool("yes").unwrap_err().to_string(),
///     r#"strconv.ParseBool: parsing "yes": invalid syntax"#
/// );
/// ```
pub fn parse_bool(s: &str) -> Result<bool, ParseBoolError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(ParseBoolError {
            input: s.to_owned(),
        }),
    }
}

/// Why [`parse_duration`] refused a text; displays as Go's `time.ParseDuration`
/// errors do, or says why a duration Go accepts does not fit a [`Duration`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a duration at all (Go: `time: invalid duration "..."`).
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    /// A number without a unit, other than `0`.
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.text))]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// More than Go's `time.Duration` holds (about 292 years).
    #[error("time: invalid duration {} (too large)", quote(.0))]
    Overflow(String),
    /// Negative: valid in Go, but not as a timeout or interval.
    #[error("invalid duration {}: negative durations are not allowed", quote(.0))]
    Negative(String),
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parses a duration with the rules of Go's `time.ParseDuration`: a sequence of
/// decimal numbers, each with an optional fraction and a unit (`ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`), such as `300ms`, `1.5h` or `2h45m`, with an
/// optional leading `+`. A bare `0` is zero; any other number without a unit
/// is an error, as in Go. Negative durations, valid in Go, are refused (except
/// `-0`), since no duration of nri-rs can be negative.
///
/// ```
/// use std::time::Duration;
/// use nri_api::goparse::parse_duration;
///
/// assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
/// assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
/// assert!(parse_duration("2").is_err());
/// assert!(parse_duration("-1s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len())),
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        let scale = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            text: text.to_owned(),
        })?;
        let overflow = || DurationError::Overflow(text.to_owned());
        let mut value: u128 = 0;
        for d in int_part.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d - b'0')))
                .filter(|v| *v <= i64::MAX as u128)
                .ok_or_else(overflow)?;
        }
        let mut nanos = value.checked_mul(scale).ok_or_else(overflow)?;
        // Fraction digits beyond nanosecond precision are dropped, as in Go.
        let mut place = scale;
        for d in frac_part.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            nanos += u128::from(d - b'0') * place;
        }
        total = total
            .checked_add(nanos)
            .filter(|t| *t <= i64::MAX as u128)
            .ok_or_else(overflow)?;
        rest = after;
    }
    if negative && total != 0 {
        return Err(DurationError::Negative(text.to_owned()));
    }
    Ok(Duration::new(
        (total / 1_000_000_000) as u64,
        (total % 1_000_000_000) as u32,
    ))
}

/// `value / unit` with the remainder as trailing decimals, trailing zeros
/// dropped (`1500, 1000` -> `1.5`).
fn with_fraction(value: u128, unit: u128, digits: usize) -> String {
    let (int, rem) = (value / unit, value % unit);
    if rem == 0 {
        return int.to_string();
    }
    let frac = format!("{rem:0digits$}");
    format!("{int}.{}", frac.trim_end_matches('0'))
}

/// Formats `d` as Go's `time.Duration.String` does (`2s`, `1m30s`, `1h0m0s`,
/// `500ms`, `0s`).
///
/// ```
/// use std::time::Duration;
/// use nri_api::goparse::format_duration;
///
/// assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
/// assert_eq!(format_duration(Duration::ZERO), "0s");
/// ```
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    match nanos {
        0 => "0s".into(),
        1..=999 => format!("{nanos}ns"),
        1_000..=999_999 => format!("{}\u{b5}s", with_fraction(nanos, 1_000, 3)),
        1_000_000..=999_999_999 => format!("{}ms", with_fraction(nanos, 1_000_000, 6)),
        _ => {
            let secs = nanos / 1_000_000_000;
            let (h, m) = (secs / 3600, (secs / 60) % 60);
            let s = with_fraction(nanos % 60_000_000_000, 1_000_000_000, 9);
            if h > 0 {
                format!("{h}h{m}m{s}s")
            } else if m > 0 {
                format!("{m}m{s}s")
            } else {
                format!("{s}s")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool_accepts_every_go_spelling() {
        for s in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(s), Ok(true), "{s}");
        }
        for s in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(s), Ok(false), "{s}");
        }
    }

    #[test]
    fn bool_rejects_other_spellings_with_go_text() {
        for s in ["", "yes", "no", "tRUE", " true", "true ", "2", "on"] {
            assert_eq!(
                parse_bool(s).unwrap_err().to_string(),
                format!("strconv.ParseBool: parsing {}: invalid syntax", quote(s))
            );
        }
        assert_eq!(
            parse_bool("a\"b").unwrap_err().to_string(),
            r#"strconv.ParseBool: parsing "a\"b": invalid syntax"#
        );
    }

    #[test]
    fn durations_go_accepts() {
        let ok = [
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("2s", Duration::from_secs(2)),
            ("+5s", Duration::from_secs(5)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1s500ms", Duration::from_millis(1500)),
            ("1.5s", Duration::from_millis(1500)),
            ("1.s", Duration::from_secs(1)),
            (".5s", Duration::from_millis(500)),
            ("1.5h", Duration::from_secs(5400)),
            ("100ms", Duration::from_millis(100)),
            ("10us", Duration::from_micros(10)),
            ("10\u{b5}s", Duration::from_micros(10)),
            ("10\u{3bc}s", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("1.0000000019s", Duration::from_nanos(1_000_000_001)),
            ("0000000000000000000000001s", Duration::from_secs(1)),
            (
                "9223372036854775807ns",
                Duration::from_nanos(i64::MAX as u64),
            ),
            // Units may repeat and come in any order.
            ("1s1s", Duration::from_secs(2)),
            ("1s1m", Duration::from_secs(61)),
        ];
        for (text, want) in ok {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn durations_go_refuses() {
        let missing = |t: &str| DurationError::MissingUnit(t.into());
        let invalid = |t: &str| DurationError::Invalid(t.into());
        for (text, want) in [
            ("", invalid("")),
            ("+", invalid("+")),
            ("-", invalid("-")),
            ("s", invalid("s")),
            (".s", invalid(".s")),
            ("1", missing("1")),
            ("30", missing("30")),
            ("1m30", missing("1m30")),
            ("1s2", missing("1s2")),
            ("1.5", missing("1.5")),
            ("1.s.", invalid("1.s.")),
            (
                "1 s",
                DurationError::UnknownUnit {
                    unit: " s".into(),
                    text: "1 s".into(),
                },
            ),
            (
                "2 parsecs",
                DurationError::UnknownUnit {
                    unit: " parsecs".into(),
                    text: "2 parsecs".into(),
                },
            ),
            (
                "1x",
                DurationError::UnknownUnit {
                    unit: "x".into(),
                    text: "1x".into(),
                },
            ),
            (
                "1S",
                DurationError::UnknownUnit {
                    unit: "S".into(),
                    text: "1S".into(),
                },
            ),
            ("１s", invalid("１s")),
            ("-1s", DurationError::Negative("-1s".into())),
            (
                "9223372036854775808ns",
                DurationError::Overflow("9223372036854775808ns".into()),
            ),
            ("2562048h", DurationError::Overflow("2562048h".into())),
            (
                "99999999999999999999999s",
                DurationError::Overflow("99999999999999999999999s".into()),
            ),
        ] {
            assert_eq!(parse_duration(text), Err(want), "{text}");
        }
    }

    #[test]
    fn duration_errors_read_as_go_ones() {
        assert_eq!(
            parse_duration("1x").unwrap_err().to_string(),
            r#"time: unknown unit "x" in duration "1x""#
        );
        assert_eq!(
            parse_duration("soon").unwrap_err().to_string(),
            r#"time: invalid duration "soon""#
        );
    }

    #[test]
    fn formats_like_go_and_round_trips() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(12), "12ns"),
            (Duration::from_nanos(1_500), "1.5\u{b5}s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(2), "2s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
        ];
        for (d, want) in cases {
            assert_eq!(format_duration(d), want);
            assert_eq!(parse_duration(want), Ok(d));
        }
    }
}
