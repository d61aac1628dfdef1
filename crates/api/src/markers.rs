//! Removal markers.
//!
//! In a `ContainerAdjustment`, a key prefixed with a single `-` asks for the
//! removal of that entry instead of its addition: annotation keys, mount
//! destinations, device paths, environment variable names, namespace types,
//! sysctl keys and network device names. (Arguments use a leading empty
//! string instead, and RDT a `remove` flag.)
//!
//! ```
//! use nri_api::markers::{clear_removal_marker, is_marked_for_removal, mark_for_removal};
//!
//! assert_eq!(mark_for_removal("FOO"), "-FOO");
//! assert_eq!(is_marked_for_removal("-FOO"), ("FOO", true));
//! assert_eq!(is_marked_for_removal("FOO"), ("FOO", false));
//! assert_eq!(clear_removal_marker("-FOO"), "FOO");
//! ```

/// The removal marker prefix.
pub const REMOVAL_MARKER: char = '-';

/// Splits off a removal marker: `("rest", true)` for `"-rest"`, `(key, false)`
/// for an unmarked key, `("", false)` for an empty key.
pub fn is_marked_for_removal(key: &str) -> (&str, bool) {
    match key.strip_prefix(REMOVAL_MARKER) {
        Some(rest) => (rest, true),
        None => (key, false),
    }
}

/// Prefixes `key` with the removal marker.
pub fn mark_for_removal(key: &str) -> String {
    format!("{REMOVAL_MARKER}{key}")
}

/// Strips one leading removal marker, if any.
pub fn clear_removal_marker(key: &str) -> &str {
    key.strip_prefix(REMOVAL_MARKER).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_key_is_not_marked() {
        assert_eq!(is_marked_for_removal(""), ("", false));
        assert_eq!(clear_removal_marker(""), "");
    }

    #[test]
    fn marked_keys_lose_one_dash() {
        assert_eq!(is_marked_for_removal("-a"), ("a", true));
        assert_eq!(is_marked_for_removal("--a"), ("-a", true));
        assert_eq!(is_marked_for_removal("-"), ("", true));
        assert_eq!(clear_removal_marker("--a"), "-a");
        assert_eq!(clear_removal_marker("a-"), "a-");
    }

    #[test]
    fn unmarked_keys_are_unchanged() {
        assert_eq!(is_marked_for_removal("/dev/null"), ("/dev/null", false));
        assert_eq!(
            clear_removal_marker("net.ipv4.ip_forward"),
            "net.ipv4.ip_forward"
        );
    }

    #[test]
    fn mark_then_check_round_trips() {
        for key in ["FOO", "/mnt", "-x", ""] {
            let marked = mark_for_removal(key);
            assert_eq!(is_marked_for_removal(&marked), (key, true));
            assert_eq!(clear_removal_marker(&marked), key);
        }
    }
}
