//! The ulimit annotations: where they are, what they hold, and the adjustment they ask for.
//!
//! A pod annotates the rlimits of one of its containers with
//! `ulimits.noderesource.dev/container.<name>` (or the older
//! `ulimits.nri.containerd.io/container.<name>`); the value is a YAML list:
//!
//! ```yaml
//! - type: RLIMIT_NOFILE   # also "nofile", "rlimit_nofile"
//!   soft: 1024
//!   hard: 4096
//! ```

use std::collections::BTreeMap;

use nri_plugin_util::{go_integral, go_yaml_load};
use nri_stub::api::ContainerAdjustment;
use serde_norway::Value;

/// Annotation key prefix.
pub const ULIMIT_KEY: &str = "ulimits.noderesource.dev";
/// Older annotation key prefix, still accepted.
pub const OLD_ULIMIT_KEY: &str = "ulimits.nri.containerd.io";

const RLIMIT_PREFIX: &str = "RLIMIT_";

/// The rlimits of `setrlimit(2)`, without the `RLIMIT_` prefix.
const VALID: [&str; 16] = [
    "AS",
    "CORE",
    "CPU",
    "DATA",
    "FSIZE",
    "LOCKS",
    "MEMLOCK",
    "MSGQUEUE",
    "NICE",
    "NOFILE",
    "NPROC",
    "RSS",
    "RTPRIO",
    "RTTIME",
    "SIGPENDING",
    "STACK",
];

/// One requested rlimit, its type normalized to `RLIMIT_<NAME>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    /// `RLIMIT_NOFILE`, ...
    pub r#type: String,
    /// Hard limit.
    pub hard: u64,
    /// Soft limit.
    pub soft: u64,
}

/// Why an annotation was refused. The container is then not created.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UlimitError {
    /// The value is not YAML, or not a list of `{type, hard, soft}`.
    #[error("invalid ulimit annotation {key:?}: {reason}")]
    Syntax {
        /// The annotation key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The type is not an rlimit name.
    #[error("failed to parse type: {0:?}")]
    Type(String),
    /// The hard limit is below the soft one.
    #[error("ulimit {0:?} must have hard limit >= soft limit")]
    HardBelowSoft(String),
}

/// The two keys a container's ulimits may be under, the current one first.
pub fn annotation_keys(container: &str) -> [String; 2] {
    [
        format!("{ULIMIT_KEY}/container.{container}"),
        format!("{OLD_ULIMIT_KEY}/container.{container}"),
    ]
}

/// The ulimits annotated for `container`.
///
/// The first of the keys that is present is used; an empty value means no ulimits
/// (the older key is then not looked at).
pub fn parse_ulimits(
    container: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<Vec<Ulimit>, UlimitError> {
    let Some((key, value)) = annotation_keys(container)
        .into_iter()
        .find_map(|k| annotations.get(&k).map(|v| (k, v)))
    else {
        tracing::debug!(container, "no ulimit annotation");
        return Ok(Vec::new());
    };
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let syntax = |reason: String| UlimitError::Syntax {
        key: key.clone(),
        reason,
    };
    let doc: Value = go_yaml_load(value).map_err(|e| syntax(e.to_string()))?;
    let items = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        other => return Err(syntax(format!("expected a list, got {}", kind(&other)))),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_item(item).map_err(|reason| syntax(format!("entry {i}: {reason}"))))
        .map(|raw| raw.and_then(normalize))
        .collect()
}

/// `{type, hard, soft}` with keys matched case-insensitively (as Go's JSON decoding
/// does); unknown keys are ignored, missing limits are 0.
fn parse_item(item: &Value) -> Result<Ulimit, String> {
    let mut ulimit = Ulimit {
        r#type: String::new(),
        hard: 0,
        soft: 0,
    };
    let map = match item {
        Value::Null => return Ok(ulimit),
        Value::Mapping(map) => map,
        other => return Err(format!("expected a mapping, got {}", kind(other))),
    };
    for (k, v) in map {
        let Some(k) = k.as_str() else { continue };
        match k.to_ascii_lowercase().as_str() {
            "type" => match v {
                Value::String(s) => ulimit.r#type = s.clone(),
                Value::Null => {}
                other => return Err(format!("type must be a string, got {}", kind(other))),
            },
            "hard" => ulimit.hard = limit("hard", v)?,
            "soft" => ulimit.soft = limit("soft", v)?,
            _ => {}
        }
    }
    Ok(ulimit)
}

/// A limit as the Go plugin reads it (`sigs.k8s.io/yaml`, see
/// [`nri_plugin_util::go_yaml_load`]): a number, which plain YAML 1.1 text is
/// (`010` is 8, `1_000` is 1000), or an integral float (`1e3`); quoted numbers
/// are strings, refused as Go's JSON decoding refuses a string for a number.
fn limit(name: &str, v: &Value) -> Result<u64, String> {
    let unsigned = || format!("{name} must be an unsigned integer, got {}", kind(v));
    match v {
        Value::Null => Ok(0),
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .and_then(go_integral)
                    .and_then(|i| u64::try_from(i).ok())
            })
            .ok_or_else(|| format!("{name} must be an unsigned integer, got {n}")),
        _ => Err(unsigned()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// Checks the type and writes it as `RLIMIT_<NAME>` (any case, prefix optional).
fn normalize(mut u: Ulimit) -> Result<Ulimit, UlimitError> {
    let upper = u.r#type.to_uppercase();
    let name = upper.strip_prefix(RLIMIT_PREFIX).unwrap_or(&upper);
    if !VALID.contains(&name) {
        tracing::debug!(raw = %u.r#type, trimmed = name, "invalid rlimit type");
        return Err(UlimitError::Type(u.r#type));
    }
    u.r#type = format!("{RLIMIT_PREFIX}{name}");
    Ok(u)
}

/// The adjustment setting `ulimits`, in order; fails if a hard limit is below its soft
/// limit.
pub fn adjust_ulimits(ulimits: &[Ulimit]) -> Result<ContainerAdjustment, UlimitError> {
    let mut adjust = ContainerAdjustment::default();
    for u in ulimits {
        if u.hard < u.soft {
            return Err(UlimitError::HardBelowSoft(u.r#type.clone()));
        }
        tracing::debug!(r#type = %u.r#type, hard = u.hard, soft = u.soft, "adjusting rlimit");
        adjust.add_rlimit(u.r#type.clone(), u.hard, u.soft);
    }
    Ok(adjust)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_interop::plugin_tests::annotations as ann;

    fn ul(t: &str, hard: u64, soft: u64) -> Ulimit {
        Ulimit {
            r#type: t.into(),
            hard,
            soft,
        }
    }

    const KEY: &str = "ulimits.noderesource.dev/container.foo";
    const OLD: &str = "ulimits.nri.containerd.io/container.foo";

    #[test]
    fn no_or_unrelated_annotations_mean_no_ulimits() {
        assert_eq!(parse_ulimits("foo", &ann(&[])), Ok(vec![]));
        assert_eq!(parse_ulimits("foo", &ann(&[("bar", "baz")])), Ok(vec![]));
        let other = "ulimits.noderesource.dev/container.bar";
        assert_eq!(
            parse_ulimits("foo", &ann(&[(other, "- type: nofile")])),
            Ok(vec![])
        );
    }

    #[test]
    fn parses_valid_lists_and_normalizes_types() {
        let value = "
- type: RLIMIT_NOFILE
  soft: 123
  hard: 456
- type: nproc
  soft: 456
  hard: 789
- type: rlimit_core
  hard: 1
- type: As
";
        assert_eq!(
            parse_ulimits("foo", &ann(&[(KEY, value)])).unwrap(),
            vec![
                ul("RLIMIT_NOFILE", 456, 123),
                ul("RLIMIT_NPROC", 789, 456),
                ul("RLIMIT_CORE", 1, 0),
                ul("RLIMIT_AS", 0, 0),
            ]
        );
    }

    #[test]
    fn legacy_key_is_accepted_and_current_key_wins() {
        let old = "- {type: cpu, soft: 1, hard: 2}";
        let new = "- {type: stack, soft: 3, hard: 4}";
        assert_eq!(
            parse_ulimits("foo", &ann(&[(OLD, old)])).unwrap(),
            vec![ul("RLIMIT_CPU", 2, 1)]
        );
        assert_eq!(
            parse_ulimits("foo", &ann(&[(OLD, old), (KEY, new)])).unwrap(),
            vec![ul("RLIMIT_STACK", 4, 3)]
        );
        // An empty current annotation hides the older one.
        assert_eq!(
            parse_ulimits("foo", &ann(&[(OLD, old), (KEY, "")])),
            Ok(vec![])
        );
    }

    #[test]
    fn keys_match_case_insensitively_and_unknown_keys_are_ignored() {
        let value = "- {TYPE: nofile, Soft: 1, HARD: 2, comment: x}";
        assert_eq!(
            parse_ulimits("foo", &ann(&[(KEY, value)])).unwrap(),
            vec![ul("RLIMIT_NOFILE", 2, 1)]
        );
    }

    #[test]
    fn invalid_types_are_refused_with_the_raw_name() {
        for (value, raw) in [
            ("- {type: ULIMIT_NOFILE, soft: 1, hard: 2}", "ULIMIT_NOFILE"),
            ("- {type: RLIMIT_FOO}", "RLIMIT_FOO"),
            ("- {type: RLIMIT_NICE}\n- {type: RLIMIT_BAR}", "RLIMIT_BAR"),
            ("- {soft: 1, hard: 2}", ""),
        ] {
            let err = parse_ulimits("foo", &ann(&[(KEY, value)])).unwrap_err();
            assert_eq!(err, UlimitError::Type(raw.into()));
            assert_eq!(err.to_string(), format!("failed to parse type: {raw:?}"));
        }
    }

    #[test]
    fn malformed_values_are_syntax_errors() {
        for value in [
            "type: nofile",
            "- [1, 2]",
            "- {type: nofile, hard: -1}",
            "- {type: nofile, soft: 1.5}",
            "- {type: nofile, hard: \"10\"}",
            "- {type: [x]}",
            "- {type: nofile\n  hard: [",
        ] {
            let err = parse_ulimits("foo", &ann(&[(KEY, value)])).unwrap_err();
            assert!(
                matches!(&err, UlimitError::Syntax { key, .. } if key == KEY),
                "{value:?}: {err:?}"
            );
            assert!(err
                .to_string()
                .starts_with(&format!("invalid ulimit annotation {KEY:?}: ")));
        }
    }

    #[test]
    fn null_document_means_no_ulimits() {
        assert_eq!(parse_ulimits("foo", &ann(&[(KEY, "null")])), Ok(vec![]));
        assert_eq!(parse_ulimits("foo", &ann(&[(KEY, "[]")])), Ok(vec![]));
    }

    #[test]
    fn adjustment_holds_the_rlimits_in_order() {
        let adjust =
            adjust_ulimits(&[ul("RLIMIT_MEMLOCK", 100, 99), ul("RLIMIT_AS", 10, 0)]).unwrap();
        let got: Vec<_> = adjust
            .rlimits
            .iter()
            .map(|r| (r.r#type.as_str(), r.hard, r.soft))
            .collect();
        assert_eq!(got, [("RLIMIT_MEMLOCK", 100, 99), ("RLIMIT_AS", 10, 0)]);
        assert_eq!(adjust_ulimits(&[]).unwrap(), ContainerAdjustment::default());
    }

    #[test]
    fn hard_below_soft_is_refused() {
        let err = adjust_ulimits(&[ul("RLIMIT_MEMLOCK", 100, 99), ul("RLIMIT_NOFILE", 0, 100)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"ulimit "RLIMIT_NOFILE" must have hard limit >= soft limit"#
        );
    }

    #[test]
    fn yaml11_numbers_as_the_go_plugin_reads_them() {
        let parse = |text: &str| parse_ulimits("c", &ann(&[(KEY, text)]));
        const KEY: &str = "ulimits.noderesource.dev/container.c";
        let got = parse("- {type: nofile, hard: 010, soft: 1_0}").unwrap();
        assert_eq!((got[0].hard, got[0].soft), (8, 10));
        let got = parse("- {type: nofile, hard: 1e3, soft: 0b11}").unwrap();
        assert_eq!((got[0].hard, got[0].soft), (1000, 3));
        let got = parse("- {type: nofile, hard: 0x10, soft: +2}").unwrap();
        assert_eq!((got[0].hard, got[0].soft), (16, 2));
        let got = parse("- {type: nofile, hard: 18446744073709551615, soft: 0o10}").unwrap();
        assert_eq!((got[0].hard, got[0].soft), (u64::MAX, 8));
        // Quoted, any number is a string, which Go refuses for a limit.
        for refused in [
            r#"- {type: nofile, hard: "10", soft: 1}"#,
            r#"- {type: nofile, hard: "010", soft: 1}"#,
            "- {type: nofile, hard: 10, soft: '1_0'}",
            r#"- {type: nofile, hard: "0x10", soft: 1}"#,
            r#"- {type: nofile, hard: "18446744073709551615"}"#,
            "- {type: nofile, hard: 1.5, soft: 1}",
            "- {type: nofile, hard: -1, soft: 1}",
            "- {type: nofile, hard: 1e30, soft: 1}",
            "- {type: nofile, hard: many, soft: 1}",
        ] {
            assert!(parse(refused).is_err(), "{refused}");
        }
    }
}
