//! Pod annotations that steer validation, and how they are read.
//!
//! An annotation on a pod applies to one of its containers when it is
//! scoped to it (`<key>/container.<container name>`), or to all of them
//! (`<key>/pod`, or plain `<key>`). The container-scoped form wins over the
//! pod-scoped ones, and `<key>/pod` wins over `<key>`.
//!
//! ```
//! use nri_api::PodSandbox;
//! use nri_validator::annotations::{effective_annotation, parse_plugin_list};
//!
//! let pod = PodSandbox {
//!     annotations: [
//!         ("required-plugins.noderesource.dev".to_string(), r#"["a"]"#.to_string()),
//!         (
//!             "required-plugins.noderesource.dev/container.db".to_string(),
//!             "[ b, c ]".to_string(),
//!         ),
//!     ]
//!     .into(),
//!     ..Default::default()
//! };
//! let key = nri_api::plugin::REQUIRED_PLUGINS_ANNOTATION;
//! assert_eq!(effective_annotation(Some(&pod), key, "web"), Some(r#"["a"]"#));
//! let value = effective_annotation(Some(&pod), key, "db").unwrap();
//! assert_eq!(parse_plugin_list(value).unwrap(), ["b", "c"]);
//! ```

use std::fmt;

use nri_api::PodSandbox;
use serde::de::{self, Deserialize, Deserializer, Visitor};

pub use nri_api::plugin::REQUIRED_PLUGINS_ANNOTATION;

/// The annotation key that the reference documentation uses as its example
/// for [`tolerate_missing_plugins_annotation`]; it has no effect unless a
/// configuration names it.
///
/// [`tolerate_missing_plugins_annotation`]: crate::DefaultValidatorConfig::tolerate_missing_plugins_annotation
pub const EXAMPLE_TOLERATE_MISSING_PLUGINS_ANNOTATION: &str =
    "tolerate-missing-nri-plugins.noderesource.dev";

/// Returns the value of the annotation `key` that applies to the container
/// named `container_name` of `pod`.
///
/// Looks up, in this order, `<key>/container.<container_name>`, `<key>/pod`
/// and `<key>`; the first one present wins. `None` when the pod is absent,
/// has no annotations, or has none of the three keys.
pub fn effective_annotation<'a>(
    pod: Option<&'a PodSandbox>,
    key: &str,
    container_name: &str,
) -> Option<&'a str> {
    let annotations = &pod?.annotations;
    if annotations.is_empty() {
        return None;
    }
    [
        format!("{key}/container.{container_name}"),
        format!("{key}/pod"),
        key.to_owned(),
    ]
    .iter()
    .find_map(|k| annotations.get(k))
    .map(String::as_str)
}

/// Why an annotation value is not a list of plugin names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PluginListError {
    /// What the YAML parser reported. This text is ours; the reference
    /// reports the errors of its own YAML library in other words.
    pub message: String,
}

/// Parses the value of a required-plugins annotation: a YAML (or JSON)
/// sequence of plugin names, e.g. `["a", "b"]`, `[ a, b ]` or a block list.
///
/// Follows the reference's YAML decoding into a list of strings: only the
/// first document counts; an empty document or `null` is an empty list;
/// scalars of any kind are taken by their text (`[1, true]` is
/// `["1", "true"]`); null items are dropped. Mappings, nested sequences or a
/// bare scalar are errors.
pub fn parse_plugin_list(value: &str) -> Result<Vec<String>, PluginListError> {
    let Some(document) = serde_norway::Deserializer::from_str(value).next() else {
        return Ok(Vec::new());
    };
    let parsed = Option::<Vec<ScalarText>>::deserialize(document).map_err(|e| PluginListError {
        message: e.to_string(),
    })?;
    Ok(parsed
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.0)
        .collect())
}

/// A YAML scalar taken by its text; `None` for null.
struct ScalarText(Option<String>);

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OptionalText;
        impl<'de> Visitor<'de> for OptionalText {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a plugin name")
            }
            fn visit_none<E: de::Error>(self) -> Result<ScalarText, E> {
                Ok(ScalarText(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ScalarText, E> {
                Ok(ScalarText(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<ScalarText, D::Error> {
                d.deserialize_str(Text)
            }
        }
        struct Text;
        impl Visitor<'_> for Text {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a plugin name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarText, E> {
                Ok(ScalarText(Some(v.to_owned())))
            }
        }
        d.deserialize_option(OptionalText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(pairs: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            annotations: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn container_scope_beats_pod_scope_beats_plain_key() {
        let all = pod(&[("k", "plain"), ("k/pod", "pod"), ("k/container.c0", "ctr")]);
        assert_eq!(effective_annotation(Some(&all), "k", "c0"), Some("ctr"));
        assert_eq!(effective_annotation(Some(&all), "k", "c1"), Some("pod"));
        let plain = pod(&[("k", "plain"), ("k/container.c0", "ctr")]);
        assert_eq!(effective_annotation(Some(&plain), "k", "c1"), Some("plain"));
        let pod_only = pod(&[("k/pod", "pod")]);
        assert_eq!(
            effective_annotation(Some(&pod_only), "k", "c0"),
            Some("pod")
        );
    }

    #[test]
    fn missing_annotations_are_not_found() {
        assert_eq!(effective_annotation(None, "k", "c0"), None);
        assert_eq!(effective_annotation(Some(&pod(&[])), "k", "c0"), None);
        let other = pod(&[("k2", "x"), ("k/container.c1", "y")]);
        assert_eq!(effective_annotation(Some(&other), "k", "c0"), None);
    }

    #[test]
    fn empty_values_are_found() {
        let p = pod(&[("k", "")]);
        assert_eq!(effective_annotation(Some(&p), "k", "c0"), Some(""));
    }

    #[test]
    fn plugin_lists_in_yaml_and_json() {
        assert_eq!(parse_plugin_list(r#"["a", "b"]"#).unwrap(), ["a", "b"]);
        assert_eq!(parse_plugin_list("[ plugin ]").unwrap(), ["plugin"]);
        assert_eq!(parse_plugin_list("- a\n- 'b c'\n").unwrap(), ["a", "b c"]);
        assert_eq!(
            parse_plugin_list("[1, true, 0x10]").unwrap(),
            ["1", "true", "0x10"]
        );
        assert_eq!(parse_plugin_list("[a, ~, null, b]").unwrap(), ["a", "b"]);
        assert_eq!(parse_plugin_list("[a]\n---\n[b]\n").unwrap(), ["a"]);
        assert_eq!(parse_plugin_list("['', \"\"]").unwrap(), ["", ""]);
        assert!(parse_plugin_list("# nothing here\n").unwrap().is_empty());
        assert!(parse_plugin_list("[]").unwrap().is_empty());
        assert!(parse_plugin_list("").unwrap().is_empty());
        assert!(parse_plugin_list("  \n").unwrap().is_empty());
        assert!(parse_plugin_list("null").unwrap().is_empty());
        assert!(parse_plugin_list("~").unwrap().is_empty());
    }

    #[test]
    fn non_lists_are_errors() {
        for bad in ["plugin", "{a: b}", "[[a]]", "[a", "[{a: b}]", "\"x\""] {
            let err = parse_plugin_list(bad).unwrap_err();
            assert!(!err.message.is_empty(), "{bad}");
        }
    }
}
