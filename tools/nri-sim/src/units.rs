//! Human-friendly units in scenario files: durations (`500ms`, `2s`, `1m`)
//! and byte quantities (`256Mi`, `1Gi`, `512M`, `1048576`).

use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};

/// Parses a duration of a scenario file or flag: Go's `time.ParseDuration`
/// syntax (`500ms`, `2s`, `1m30s`, `1.5h`), by [`nri_api::goparse::parse_duration`];
/// a number needs a unit unless it is `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    nri_api::goparse::parse_duration(text)
        .map_err(|e| format!("{e} (write e.g. 500ms, 2s or 1m30s)"))
}

/// Parses a byte quantity: a number with an optional suffix
/// `k`/`K`, `M`, `G`, `T` (powers of 1000) or `Ki`, `Mi`, `Gi`, `Ti`
/// (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: i64 = num
        .parse()
        .map_err(|_| format!("invalid quantity {text:?}: expected e.g. 512Mi, 1Gi or 1048576"))?;
    let factor: i64 = match unit.trim() {
        "" => 1,
        "k" | "K" => 1000,
        "M" => 1000_i64.pow(2),
        "G" => 1000_i64.pow(3),
        "T" => 1000_i64.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        other => {
            return Err(format!(
                "invalid quantity {text:?}: unknown suffix {other:?} (use Ki, Mi, Gi, Ti, k, M, G or T)"
            ))
        }
    };
    value
        .checked_mul(factor)
        .ok_or_else(|| format!("invalid quantity {text:?}: too large"))
}

/// A YAML number where a duration is expected reads as its text would: only
/// `0` has no unit to miss.
struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a duration such as 500ms, 2s or 1m")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        parse_duration(&v.to_string()).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        parse_duration(&v.to_string()).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        parse_duration(&v.to_string()).map_err(E::custom)
    }
}

/// `deserialize_with` for an optional duration.
pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    d.deserialize_any(DurationVisitor).map(Some)
}

struct BytesVisitor;

impl Visitor<'_> for BytesVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a byte quantity such as 512Mi, 1Gi or 1048576")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        parse_bytes(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom("quantity too large"))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
}

/// `deserialize_with` for an optional byte quantity.
pub fn opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(BytesVisitor).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        // As in Go: a bare number other than 0 is not a duration.
        assert!(parse_duration("3").unwrap_err().contains("missing unit"));
        assert!(parse_duration("2 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("9999999h").is_err());
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_bytes("256Mi").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_bytes("42").unwrap(), 42);
        assert!(parse_bytes("1Xi").unwrap_err().contains("unknown suffix"));
        assert!(parse_bytes("99999999999Ti")
            .unwrap_err()
            .contains("too large"));
    }
}
