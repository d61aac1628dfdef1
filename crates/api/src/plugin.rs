//! Well-known paths, environment variables, timeouts and the naming rules of
//! plugins.
//!
//! A plugin is known by a two-digit index and a base name, written together
//! as `<index>-<name>` (e.g. `10-logger`); plugins are invoked in ascending
//! index order.
//!
//! ```
//! use nri_api::plugin::{check_plugin_name, parse_plugin_name};
//!
//! assert_eq!(parse_plugin_name("10-logger").unwrap(), ("10", "logger"));
//! assert_eq!(
//!     check_plugin_name("foo,bar").unwrap_err().to_string(),
//!     r#"invalid plugin name "foo,bar": contains invalid character ','"#
//! );
//! ```

use std::time::Duration;

use crate::gofmt;

/// Socket on which the runtime accepts external plugins.
pub const DEFAULT_SOCKET_PATH: &str = "/var/run/nri/nri.sock";
/// Directory of plugins the runtime launches itself.
pub const DEFAULT_PLUGIN_PATH: &str = "/opt/nri/plugins";
/// Directory of configuration drop-ins for launched plugins.
pub const DEFAULT_PLUGIN_CONFIG_PATH: &str = "/etc/nri/conf.d";

/// Environment variable holding the file descriptor number of the
/// pre-connected socket of a launched plugin (always `3`).
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";
/// Environment variable holding the base name of a launched plugin.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
/// Environment variable holding the index of a launched plugin.
pub const PLUGIN_IDX_ENV: &str = "NRI_PLUGIN_IDX";
/// File descriptor on which a launched plugin finds its socket.
pub const PLUGIN_SOCKET_FD: i32 = 3;

/// How long the runtime waits for a connected plugin to register.
pub const DEFAULT_REGISTRATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of each runtime-to-plugin request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Smallest number of pods plus containers per message when a
/// synchronization is split into several messages.
pub const MAX_SYNC_SPLIT_MIN: usize = 8;

/// Domain of NRI's own annotations.
pub const ANNOTATION_DOMAIN: &str = "noderesource.dev";
/// Annotation listing plugins a pod or container requires.
pub const REQUIRED_PLUGINS_ANNOTATION: &str = "required-plugins.noderesource.dev";

/// Pids limit meaning "no limit".
pub const PIDS_UNLIMITED: i64 = -1;

/// A plugin name or index that breaks the naming rules. The texts are those
/// of the reference implementation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginNameError {
    /// A full name without the `-` between index and base name.
    #[error("invalid plugin name {}, idx-pluginname expected", gofmt::quote(.0))]
    MissingIndex(String),
    /// An index that is not two bytes long.
    #[error("invalid plugin index {}, must be 2 digits", gofmt::quote(.0))]
    IndexLength(String),
    /// An index that is not two decimal digits.
    #[error("invalid plugin index {} (not [0-9][0-9])", gofmt::quote(.0))]
    IndexNotDigits(String),
    /// An empty base name.
    #[error("invalid plugin name: name is empty")]
    EmptyName,
    /// A base name with a character outside `[a-zA-Z0-9_.+-]`.
    #[error(
        "invalid plugin name {}: contains invalid character {}",
        gofmt::quote(.name),
        gofmt::quote_char(*.character)
    )]
    InvalidCharacter {
        /// The whole name.
        name: String,
        /// The first offending character.
        character: char,
    },
}

/// Checks that `idx` is exactly two decimal digits.
///
/// ```
/// use nri_api::plugin::check_plugin_index;
/// assert!(check_plugin_index("05").is_ok());
/// assert_eq!(
///     check_plugin_index("1").unwrap_err().to_string(),
///     r#"invalid plugin index "1", must be 2 digits"#
/// );
/// ```
pub fn check_plugin_index(idx: &str) -> Result<(), PluginNameError> {
    let bytes = idx.as_bytes();
    if bytes.len() != 2 {
        return Err(PluginNameError::IndexLength(idx.to_string()));
    }
    if !bytes.iter().all(u8::is_ascii_digit) {
        return Err(PluginNameError::IndexNotDigits(idx.to_string()));
    }
    Ok(())
}

/// Checks that a base name is non-empty and made of `[a-zA-Z0-9_.+-]` only.
pub fn check_plugin_name(name: &str) -> Result<(), PluginNameError> {
    if name.is_empty() {
        return Err(PluginNameError::EmptyName);
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+');
    match name.chars().find(|c| !allowed(*c)) {
        Some(character) => Err(PluginNameError::InvalidCharacter {
            name: name.to_string(),
            character,
        }),
        None => Ok(()),
    }
}

/// Splits a full plugin name `<index>-<base>` at its first `-` and checks the
/// index. The base name is returned as is (it may contain further dashes and
/// is not checked here).
pub fn parse_plugin_name(name: &str) -> Result<(&str, &str), PluginNameError> {
    let (idx, base) = name
        .split_once('-')
        .ok_or_else(|| PluginNameError::MissingIndex(name.to_string()))?;
    check_plugin_index(idx)?;
    Ok((idx, base))
}

/// The full name `<index>-<base>` under which a plugin appears in logs,
/// ownership records and errors.
pub fn qualified_name(idx: &str, base: &str) -> String {
    format!("{idx}-{base}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_have_reference_values() {
        assert_eq!(DEFAULT_SOCKET_PATH, "/var/run/nri/nri.sock");
        assert_eq!(DEFAULT_PLUGIN_PATH, "/opt/nri/plugins");
        assert_eq!(DEFAULT_PLUGIN_CONFIG_PATH, "/etc/nri/conf.d");
        assert_eq!(PLUGIN_SOCKET_ENV, "NRI_PLUGIN_SOCKET");
        assert_eq!(PLUGIN_NAME_ENV, "NRI_PLUGIN_NAME");
        assert_eq!(PLUGIN_IDX_ENV, "NRI_PLUGIN_IDX");
        assert_eq!(DEFAULT_REGISTRATION_TIMEOUT, Duration::from_millis(5000));
        assert_eq!(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis(2000));
        assert_eq!(MAX_SYNC_SPLIT_MIN, 8);
    }

    #[test]
    fn index_must_be_two_digits() {
        for ok in ["00", "05", "10", "99"] {
            assert_eq!(check_plugin_index(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_plugin_index("1").unwrap_err().to_string(),
            r#"invalid plugin index "1", must be 2 digits"#
        );
        assert_eq!(
            check_plugin_index("100").unwrap_err().to_string(),
            r#"invalid plugin index "100", must be 2 digits"#
        );
        assert_eq!(
            check_plugin_index("").unwrap_err().to_string(),
            r#"invalid plugin index "", must be 2 digits"#
        );
        assert_eq!(
            check_plugin_index("1a").unwrap_err().to_string(),
            r#"invalid plugin index "1a" (not [0-9][0-9])"#
        );
        assert_eq!(
            check_plugin_index("a1").unwrap_err().to_string(),
            r#"invalid plugin index "a1" (not [0-9][0-9])"#
        );
        // Two bytes long (lengths count bytes), so it fails the digit check.
        assert_eq!(
            check_plugin_index("é").unwrap_err(),
            PluginNameError::IndexNotDigits("é".to_string())
        );
    }

    #[test]
    fn names_allow_only_the_safe_set() {
        assert_eq!(check_plugin_name("abcd-0123+EFGH_4567.ijkl"), Ok(()));
        assert_eq!(
            check_plugin_name("").unwrap_err().to_string(),
            "invalid plugin name: name is empty"
        );
        assert_eq!(
            check_plugin_name("foo,bar").unwrap_err().to_string(),
            r#"invalid plugin name "foo,bar": contains invalid character ','"#
        );
        assert_eq!(
            check_plugin_name("a b").unwrap_err().to_string(),
            r#"invalid plugin name "a b": contains invalid character ' '"#
        );
        assert_eq!(
            check_plugin_name("it's").unwrap_err().to_string(),
            r#"invalid plugin name "it's": contains invalid character '\''"#
        );
        assert_eq!(
            check_plugin_name("x/y").unwrap_err(),
            PluginNameError::InvalidCharacter {
                name: "x/y".into(),
                character: '/'
            }
        );
    }

    #[test]
    fn parse_splits_at_first_dash() {
        assert_eq!(parse_plugin_name("10-logger"), Ok(("10", "logger")));
        assert_eq!(
            parse_plugin_name("05-my-plugin-x"),
            Ok(("05", "my-plugin-x"))
        );
        assert_eq!(parse_plugin_name("00-"), Ok(("00", "")));
        assert_eq!(
            parse_plugin_name("logger").unwrap_err().to_string(),
            r#"invalid plugin name "logger", idx-pluginname expected"#
        );
        assert_eq!(
            parse_plugin_name("1-logger").unwrap_err().to_string(),
            r#"invalid plugin index "1", must be 2 digits"#
        );
        assert_eq!(
            parse_plugin_name("xx-logger").unwrap_err().to_string(),
            r#"invalid plugin index "xx" (not [0-9][0-9])"#
        );
    }

    #[test]
    fn qualified_name_joins_with_dash() {
        assert_eq!(qualified_name("10", "logger"), "10-logger");
    }
}
