//! Durations written the way Go writes them.

use std::time::Duration;

/// Parses a duration written as Go writes them, for the common units: `500ms`,
/// `2s`, `1m`, `1h`, and sums such as `1m30s`; a bare number is seconds. Values
/// too large saturate instead of overflowing.
///
/// ```
/// use std::time::Duration;
/// use nri_plugin_util::parse_duration;
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {text:?}");
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    if text.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let value: u64 = number.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let part = match unit {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(part);
        rest = tail;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_sums() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        for text in ["", "s", "1.5s", "1x", "1m30", "-1s", "1 s", "ms5", "１s"] {
            assert_eq!(
                parse_duration(text),
                Err(format!("invalid duration {text:?}")),
                "{text}"
            );
        }
    }

    #[test]
    fn huge_values_saturate_or_fail_cleanly() {
        assert_eq!(
            parse_duration("18446744073709551615h"),
            Ok(Duration::from_secs(u64::MAX))
        );
        assert!(parse_duration("99999999999999999999999s").is_err());
    }
}
