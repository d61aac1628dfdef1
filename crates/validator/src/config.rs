//! Configuration of the default validator.

use serde::{Deserialize, Serialize};

/// Configuration of the default validator.
///
/// Every option defaults to off (or empty). Field names are accepted in two
/// spellings: the camel-case names of YAML/JSON files (`rejectOCIHookAdjustment`)
/// and the snake-case names of runtime TOML files (`reject_oci_hook_adjustment`).
/// Serialization writes the camel-case names. Unknown fields are ignored, as
/// the reference does.
///
/// # Example
///
/// ```
/// use nri_validator::DefaultValidatorConfig;
///
/// let cfg = DefaultValidatorConfig::from_yaml_str(
///     "enable: true\n\
///      rejectOCIHookAdjustment: true\n\
///      requiredPlugins: [resource-manager]\n\
///      tolerateMissingPluginsAnnotation: tolerate-missing-nri-plugins.noderesource.dev\n",
/// )
/// .unwrap();
/// assert!(cfg.enable && cfg.reject_oci_hook_adjustment);
/// assert_eq!(cfg.required_plugins, ["resource-manager"]);
///
/// let same = DefaultValidatorConfig::from_json_str(
///     r#"{"enable": true, "reject_oci_hook_adjustment": true,
///         "required_plugins": ["resource-manager"],
///         "tolerate_missing_plugins_annotation": "tolerate-missing-nri-plugins.noderesource.dev"}"#,
/// )
/// .unwrap();
/// assert_eq!(cfg, same);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DefaultValidatorConfig {
    /// Whether the runtime should run the default validator at all.
    pub enable: bool,
    /// Reject any injection of OCI hooks.
    #[serde(
        rename = "rejectOCIHookAdjustment",
        alias = "reject_oci_hook_adjustment"
    )]
    pub reject_oci_hook_adjustment: bool,
    /// Reject seccomp policy changes of containers that run with the
    /// runtime's default profile.
    #[serde(
        rename = "rejectRuntimeDefaultSeccompAdjustment",
        alias = "reject_runtime_default_seccomp_adjustment"
    )]
    pub reject_runtime_default_seccomp_adjustment: bool,
    /// Reject seccomp policy changes of containers that run unconfined (or
    /// have no seccomp profile).
    #[serde(
        rename = "rejectUnconfinedSeccompAdjustment",
        alias = "reject_unconfined_seccomp_adjustment"
    )]
    pub reject_unconfined_seccomp_adjustment: bool,
    /// Reject seccomp policy changes of containers with a custom
    /// (`LOCALHOST`) profile.
    #[serde(
        rename = "rejectCustomSeccompAdjustment",
        alias = "reject_custom_seccomp_adjustment"
    )]
    pub reject_custom_seccomp_adjustment: bool,
    /// Reject any change of Linux namespaces.
    #[serde(
        rename = "rejectNamespaceAdjustment",
        alias = "reject_namespace_adjustment"
    )]
    pub reject_namespace_adjustment: bool,
    /// Reject any change of sysctls.
    #[serde(rename = "rejectSysctlAdjustment", alias = "reject_sysctl_adjustment")]
    pub reject_sysctl_adjustment: bool,
    /// Plugins that must have taken part in creating every container, by
    /// base name (`resources`) or qualified name (`10-resources`).
    ///
    /// This applies to all containers of the node, including static pods,
    /// which then need the tolerate annotation (see
    /// [`tolerate_missing_plugins_annotation`](Self::tolerate_missing_plugins_annotation))
    /// to start before the required plugins run.
    #[serde(rename = "requiredPlugins", alias = "required_plugins")]
    pub required_plugins: Vec<String>,
    /// Key of an annotation that lets a pod or container tolerate missing
    /// required plugins when set to a true value (`"true"`, `"1"`, ...).
    /// Empty: no such annotation.
    #[serde(
        rename = "tolerateMissingPluginsAnnotation",
        alias = "tolerate_missing_plugins_annotation"
    )]
    pub tolerate_missing_plugins_annotation: String,
}

/// A configuration text that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Invalid YAML, or YAML that does not describe a configuration.
    #[error("invalid default validator configuration (YAML): {0}")]
    Yaml(#[from] serde_norway::Error),
    /// Invalid JSON, or JSON that does not describe a configuration.
    #[error("invalid default validator configuration (JSON): {0}")]
    Json(#[from] serde_json::Error),
}

impl DefaultValidatorConfig {
    /// Reads a configuration from YAML. An empty document (or `null`) is the
    /// default configuration.
    pub fn from_yaml_str(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let cfg: Option<Self> = serde_norway::from_str(text)?;
        Ok(cfg.unwrap_or_default())
    }

    /// Reads a configuration from JSON.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        Ok(serde_json::from_str(text)?)
    }
}

#[cfg(test)]
impl DefaultValidatorConfig {
    /// Enabled with every rejection on, nothing required.
    pub(crate) fn rejecting_everything() -> DefaultValidatorConfig {
        DefaultValidatorConfig {
            enable: true,
            reject_oci_hook_adjustment: true,
            reject_runtime_default_seccomp_adjustment: true,
            reject_unconfined_seccomp_adjustment: true,
            reject_custom_seccomp_adjustment: true,
            reject_namespace_adjustment: true,
            reject_sysctl_adjustment: true,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everything_on() -> DefaultValidatorConfig {
        DefaultValidatorConfig {
            required_plugins: vec!["a".into(), "10-b".into()],
            tolerate_missing_plugins_annotation: "tol".into(),
            ..DefaultValidatorConfig::rejecting_everything()
        }
    }

    const CAMEL_YAML: &str = "
enable: true
rejectOCIHookAdjustment: true
rejectRuntimeDefaultSeccompAdjustment: true
rejectUnconfinedSeccompAdjustment: true
rejectCustomSeccompAdjustment: true
rejectNamespaceAdjustment: true
rejectSysctlAdjustment: true
requiredPlugins:
  - a
  - 10-b
tolerateMissingPluginsAnnotation: tol
";

    const SNAKE_TOML: &str = r#"
enable = true
reject_oci_hook_adjustment = true
reject_runtime_default_seccomp_adjustment = true
reject_unconfined_seccomp_adjustment = true
reject_custom_seccomp_adjustment = true
reject_namespace_adjustment = true
reject_sysctl_adjustment = true
required_plugins = ["a", "10-b"]
tolerate_missing_plugins_annotation = "tol"
"#;

    #[test]
    fn defaults_are_all_off() {
        let cfg = DefaultValidatorConfig::default();
        assert_eq!(DefaultValidatorConfig::from_yaml_str("").unwrap(), cfg);
        assert_eq!(DefaultValidatorConfig::from_yaml_str("null").unwrap(), cfg);
        assert_eq!(DefaultValidatorConfig::from_yaml_str("{}").unwrap(), cfg);
        assert_eq!(DefaultValidatorConfig::from_json_str("{}").unwrap(), cfg);
        assert!(!cfg.enable && !cfg.reject_oci_hook_adjustment && cfg.required_plugins.is_empty());
    }

    #[test]
    fn yaml_camel_case_names() {
        assert_eq!(
            DefaultValidatorConfig::from_yaml_str(CAMEL_YAML).unwrap(),
            everything_on()
        );
    }

    #[test]
    fn toml_snake_case_names() {
        let cfg: DefaultValidatorConfig = toml::from_str(SNAKE_TOML).unwrap();
        assert_eq!(cfg, everything_on());
    }

    #[test]
    fn snake_case_names_in_yaml_and_json() {
        let yaml = SNAKE_TOML.replace(" = ", ": ");
        assert_eq!(
            DefaultValidatorConfig::from_yaml_str(&yaml).unwrap(),
            everything_on()
        );
        let json = r#"{"enable":true,"reject_oci_hook_adjustment":true,
            "reject_runtime_default_seccomp_adjustment":true,
            "reject_unconfined_seccomp_adjustment":true,
            "reject_custom_seccomp_adjustment":true,"reject_namespace_adjustment":true,
            "reject_sysctl_adjustment":true,"required_plugins":["a","10-b"],
            "tolerate_missing_plugins_annotation":"tol"}"#;
        assert_eq!(
            DefaultValidatorConfig::from_json_str(json).unwrap(),
            everything_on()
        );
    }

    #[test]
    fn each_field_alone() {
        type Set = fn(&mut DefaultValidatorConfig);
        let cases: [(&str, &str, Set); 6] = [
            (
                "rejectOCIHookAdjustment",
                "reject_oci_hook_adjustment",
                |c| c.reject_oci_hook_adjustment = true,
            ),
            (
                "rejectRuntimeDefaultSeccompAdjustment",
                "reject_runtime_default_seccomp_adjustment",
                |c| c.reject_runtime_default_seccomp_adjustment = true,
            ),
            (
                "rejectUnconfinedSeccompAdjustment",
                "reject_unconfined_seccomp_adjustment",
                |c| c.reject_unconfined_seccomp_adjustment = true,
            ),
            (
                "rejectCustomSeccompAdjustment",
                "reject_custom_seccomp_adjustment",
                |c| c.reject_custom_seccomp_adjustment = true,
            ),
            (
                "rejectNamespaceAdjustment",
                "reject_namespace_adjustment",
                |c| c.reject_namespace_adjustment = true,
            ),
            ("rejectSysctlAdjustment", "reject_sysctl_adjustment", |c| {
                c.reject_sysctl_adjustment = true
            }),
        ];
        for (camel, snake, set) in cases {
            let mut expected = DefaultValidatorConfig::default();
            set(&mut expected);
            for name in [camel, snake] {
                let json = format!("{{\"{name}\": true}}");
                assert_eq!(
                    DefaultValidatorConfig::from_json_str(&json).unwrap(),
                    expected,
                    "{name}"
                );
                let yaml = format!("{name}: true");
                assert_eq!(
                    DefaultValidatorConfig::from_yaml_str(&yaml).unwrap(),
                    expected,
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn serializes_camel_case_and_round_trips() {
        let json = serde_json::to_string(&everything_on()).unwrap();
        assert!(json.contains("\"rejectOCIHookAdjustment\":true"), "{json}");
        assert!(
            json.contains("\"tolerateMissingPluginsAnnotation\":\"tol\""),
            "{json}"
        );
        assert_eq!(
            DefaultValidatorConfig::from_json_str(&json).unwrap(),
            everything_on()
        );
        let yaml = serde_norway::to_string(&everything_on()).unwrap();
        assert_eq!(
            DefaultValidatorConfig::from_yaml_str(&yaml).unwrap(),
            everything_on()
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let cfg =
            DefaultValidatorConfig::from_yaml_str("enable: true\nsomethingElse: 3\n").unwrap();
        assert!(cfg.enable);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            DefaultValidatorConfig::from_yaml_str("enable: [x"),
            Err(ConfigError::Yaml(_))
        ));
        assert!(matches!(
            DefaultValidatorConfig::from_yaml_str("enable: maybe"),
            Err(ConfigError::Yaml(_))
        ));
        assert!(matches!(
            DefaultValidatorConfig::from_json_str("{\"enable\": 1}"),
            Err(ConfigError::Json(_))
        ));
        let text = DefaultValidatorConfig::from_yaml_str("- a")
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("invalid default validator configuration (YAML): "),
            "{text}"
        );
    }
}
