//! Durations in configuration files, written the way containerd writes them:
//! Go duration strings (`"2s"`, `"1m30s"`, `"500ms"`), read by
//! [`nri_api::goparse::parse_duration`]; integers are taken as nanoseconds
//! (Go's JSON encoding of `time.Duration`).

use std::fmt;
use std::time::Duration;

use nri_api::goparse::{format_duration, parse_duration};

/// serde adapter for `Duration` fields: serializes a Go duration string,
/// deserializes a Go duration string or integer nanoseconds. Tools with
/// configuration files of their own use it too, so every file reads
/// durations alike.
///
/// ```
/// use std::time::Duration;
///
/// #[derive(serde::Deserialize)]
/// struct Options {
///     #[serde(with = "nri_integration::duration::go")]
///     interval: Duration,
/// }
/// let o: Options = serde_json::from_str(r#"{"interval": "1m30s"}"#).unwrap();
/// assert_eq!(o.interval, Duration::from_secs(90));
/// ```
pub mod go {
    use super::*;
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// Writes `d` as a Go duration string (`"1m30s"`).
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }

    /// Reads a Go duration string, or an integer as nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(GoDuration)
    }

    /// Writes `Some(d)` as [`serialize`] does; for `Option<Duration>` fields
    /// that skip `None`.
    pub fn serialize_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => serialize(d, s),
            None => s.serialize_none(),
        }
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
            parse_duration(v).map_err(E::custom)
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
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        #[serde(with = "go")]
        d: Duration,
    }

    fn read(json: &str) -> Result<Duration, String> {
        serde_json::from_str::<Holder>(json)
            .map(|h| h.d)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn strings_are_go_durations_and_integers_nanoseconds() {
        assert_eq!(read(r#"{"d": "1m30s"}"#), Ok(Duration::from_secs(90)));
        assert_eq!(read(r#"{"d": 1500}"#), Ok(Duration::from_nanos(1500)));
        assert!(read(r#"{"d": "30"}"#).unwrap_err().contains("missing unit"));
        assert!(read(r#"{"d": -1}"#).is_err());
    }
}
