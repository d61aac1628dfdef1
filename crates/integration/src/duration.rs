//! Durations in configuration files, written the way containerd writes them:
//! Go duration strings (`"2s"`, `"1m30s"`, `"500ms"`); integers are taken as
//! nanoseconds (Go's JSON encoding of `time.Duration`).

use std::fmt;
use std::time::Duration;

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationError {
    text: String,
    reason: &'static str,
}

/// Longest accepted input; real durations are a handful of characters.
const MAX_LEN: usize = 64;

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

/// Parses a Go duration string such as `"1h2m3.5s"`, `"250ms"` or `"0"`.
/// Negative durations are refused; the result must fit Go's `int64`
/// nanoseconds.
///
/// ```
/// use std::time::Duration;
/// use nri_integration::duration::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
/// assert_eq!(parse_go_duration("1.5ms").unwrap(), Duration::from_micros(1500));
/// assert!(parse_go_duration("-1s").is_err());
/// ```
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let fail = |reason| DurationError {
        text: text.chars().take(MAX_LEN).collect(),
        reason,
    };
    if text.len() > MAX_LEN {
        return Err(fail("too long"));
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return Err(fail("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(fail("empty"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
                f.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(fail("expected a number"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(fail("missing unit"));
        }
        let scale = unit_nanos(unit).ok_or_else(|| fail("unknown unit"))?;
        let mut value: u128 = 0;
        for d in int_part.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d - b'0')))
                .filter(|v| *v <= u128::from(u64::MAX))
                .ok_or_else(|| fail("overflow"))?;
        }
        let mut nanos = value.checked_mul(scale).ok_or_else(|| fail("overflow"))?;
        // Fraction digits beyond nanosecond precision are ignored.
        let mut place = scale;
        for d in frac_part.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            nanos += u128::from(d - b'0') * place;
        }
        total = total.checked_add(nanos).ok_or_else(|| fail("overflow"))?;
        rest = after;
    }
    if total > i64::MAX as u128 {
        return Err(fail("overflow"));
    }
    let secs = (total / 1_000_000_000) as u64;
    let sub = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, sub))
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

/// Formats `d` as Go's `time.Duration.String` does (`"2s"`, `"1m30s"`,
/// `"1h0m0s"`, `"500ms"`, `"0s"`).
///
/// ```
/// use std::time::Duration;
/// use nri_integration::duration::format_go_duration;
///
/// assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
/// assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
/// ```
pub fn format_go_duration(d: Duration) -> String {
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

/// serde adapter for `Duration` fields: serializes a Go duration string,
/// deserializes a Go duration string or integer nanoseconds.
pub(crate) mod go {
    use super::*;
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(GoDuration)
    }

    /// For `Option<Duration>` fields with `#[serde(default)]`.
    pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        deserialize(d).map(Some)
    }

    struct GoDuration;

    impl Visitor<'_> for GoDuration {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration such as \"2s\" or integer nanoseconds")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_go_duration(v).map_err(E::custom)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            if v > i64::MAX as u64 {
                return Err(E::custom("duration overflows int64 nanoseconds"));
            }
            Ok(Duration::from_nanos(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_nanos)
                .map_err(|_| E::custom("negative durations are not allowed"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_syntax() {
        let ok = [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("2s", Duration::from_secs(2)),
            ("+5s", Duration::from_secs(5)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("100ms", Duration::from_millis(100)),
            ("10us", Duration::from_micros(10)),
            ("10\u{b5}s", Duration::from_micros(10)),
            ("10\u{3bc}s", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("1.0000000019s", Duration::from_nanos(1_000_000_001)),
        ];
        for (text, want) in ok {
            assert_eq!(parse_go_duration(text).unwrap(), want, "{text}");
        }
        for bad in [
            "",
            "s",
            "1",
            "1x",
            "-1s",
            "1.s.",
            ".s",
            "1s2",
            &"9".repeat(70),
            "9999999999999h",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_like_go() {
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
            assert_eq!(format_go_duration(d), want);
            assert_eq!(parse_go_duration(want).unwrap(), d);
        }
    }
}
