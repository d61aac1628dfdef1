//! Whether a plugin should name (or number) itself, or leave that to the runtime.
//!
//! A plugin's stub takes its name and index from the builder first, then from
//! `NRI_PLUGIN_NAME` and `NRI_PLUGIN_IDX` (set, non-empty, by a runtime that
//! launched it), then from the program name (`NN-name`). A plugin with a default
//! name gives it to the builder only when neither of the latter two will supply
//! one, so that a runtime-launched plugin keeps the identity the runtime gave it.

use std::ffi::{OsStr, OsString};

use nri_api::plugin::{parse_plugin_name, PLUGIN_IDX_ENV, PLUGIN_NAME_ENV};

/// The plugin name to give the stub: the `-name` flag if not empty; else nothing
/// when `NRI_PLUGIN_NAME` is set and not empty or the program is called
/// `NN-name` (the stub takes the name from there); else `default`.
///
/// ```
/// // A flag always wins.
/// assert_eq!(
///     nri_plugin_util::plugin_name(Some("mine".into()), "logger"),
///     Some("mine".to_string())
/// );
/// ```
pub fn plugin_name(flag: Option<String>, default: &str) -> Option<String> {
    flag_or_default(flag, PLUGIN_NAME_ENV, default)
}

/// The plugin index to give the stub, by the rules of [`plugin_name`] with
/// `NRI_PLUGIN_IDX` in place of `NRI_PLUGIN_NAME`.
///
/// ```
/// assert_eq!(
///     nri_plugin_util::plugin_index(Some("10".into()), "00"),
///     Some("10".to_string())
/// );
/// ```
pub fn plugin_index(flag: Option<String>, default: &str) -> Option<String> {
    flag_or_default(flag, PLUGIN_IDX_ENV, default)
}

/// True if the basename of `program` reads as an indexed plugin name, `NN-name`.
///
/// ```
/// use std::ffi::OsStr;
/// use nri_plugin_util::is_indexed_program;
///
/// assert!(is_indexed_program(OsStr::new("/opt/nri/plugins/10-logger")));
/// assert!(!is_indexed_program(OsStr::new("/usr/bin/nri-logger")));
/// ```
pub fn is_indexed_program(program: &OsStr) -> bool {
    let program = program.to_string_lossy();
    let base = program.rsplit('/').next().unwrap_or_default();
    parse_plugin_name(base).is_ok()
}

fn flag_or_default(flag: Option<String>, env_var: &str, default: &str) -> Option<String> {
    choose(
        flag,
        std::env::var_os(env_var),
        std::env::args_os().next(),
        default,
    )
}

/// The decision of [`plugin_name`] and [`plugin_index`], given what they read.
fn choose(
    flag: Option<String>,
    env_value: Option<OsString>,
    program: Option<OsString>,
    default: &str,
) -> Option<String> {
    if let Some(value) = flag.filter(|v| !v.is_empty()) {
        return Some(value);
    }
    let from_env = env_value.is_some_and(|v| !v.is_empty());
    let from_program = program.is_some_and(|p| is_indexed_program(&p));
    (!from_env && !from_program).then(|| default.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn indexed_program_names() {
        assert!(is_indexed_program(OsStr::new(
            "/opt/nri/plugins/10-hook-injector"
        )));
        assert!(is_indexed_program(OsStr::new("05-rdt")));
        assert!(!is_indexed_program(OsStr::new(
            "/usr/bin/nri-hook-injector"
        )));
        assert!(!is_indexed_program(OsStr::new("/opt/10-dir/plugin")));
        assert!(!is_indexed_program(OsStr::new("")));
    }

    #[test]
    fn a_non_empty_flag_wins() {
        let got = choose(Some("x".into()), os("env"), os("/p/10-prog"), "dflt");
        assert_eq!(got.as_deref(), Some("x"));
    }

    #[test]
    fn default_when_nothing_else_names_the_plugin() {
        assert_eq!(
            choose(None, None, os("/usr/bin/nri-x"), "dflt").as_deref(),
            Some("dflt")
        );
        assert_eq!(
            choose(Some(String::new()), os(""), None, "dflt").as_deref(),
            Some("dflt")
        );
    }

    #[test]
    fn left_to_the_runtime_or_the_program_name() {
        assert_eq!(
            choose(None, os("from-env"), os("/usr/bin/nri-x"), "d"),
            None
        );
        assert_eq!(choose(Some(String::new()), None, os("/p/10-x"), "d"), None);
    }
}
