//! Access to NRI's sockets (the adaptation's [`socket`](nri_adaptation::socket)
//! module, re-exported), and the serde adapter for socket modes in
//! configuration files.

pub use nri_adaptation::socket::*;

/// serde adapter for socket mode fields: serializes octal digits
/// (`"0660"`), deserializes octal digits in a string (`"0660"`, `"660"`,
/// `"0o660"`) or an integer (TOML's `0o660`), at most `0o777`. Tools with
/// configuration files of their own use it too.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Options {
///     #[serde(with = "nri_integration::socket::mode")]
///     control_socket_mode: u32,
/// }
/// let o: Options = toml::from_str(r#"control_socket_mode = "0660""#).unwrap();
/// assert_eq!(o.control_socket_mode, 0o660);
/// let o: Options = toml::from_str("control_socket_mode = 0o640").unwrap();
/// assert_eq!(o.control_socket_mode, 0o640);
/// assert!(toml::from_str::<Options>("control_socket_mode = 660").is_err());
/// ```
pub mod mode {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// Writes `mode` as four octal digits (`"0600"`).
    pub fn serialize<S: Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{mode:04o}"))
    }

    /// Reads octal digits in a string, or an integer, as a socket mode.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        d.deserialize_any(Mode)
    }

    /// For `Option<u32>` fields with `#[serde(default)]`.
    pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        deserialize(d).map(Some)
    }

    struct Mode;

    impl Visitor<'_> for Mode {
        type Value = u32;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a socket mode: octal digits such as \"0660\", or an integer")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<u32, E> {
            super::parse_mode(v).map_err(E::custom)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            let mode = u32::try_from(v).map_err(|_| {
                E::custom(format!(
                    "invalid socket mode {v}: only permission bits (at most 0o777) may be given"
                ))
            })?;
            super::SocketAccess::default()
                .mode(mode)
                .check()
                .map_err(E::custom)?;
            Ok(mode)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!("invalid socket mode {v}: negative"))),
            }
        }
    }
}
