//! The validator's configuration: YAML with the keys of the Go default validator.

use std::path::Path;

use nri_validator::{ConfigError, DefaultValidatorConfig};

/// What the plugin validates with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatorSettings {
    /// The rules.
    pub config: DefaultValidatorConfig,
    /// False when the configuration says `enable: false`: every adjustment is then
    /// accepted. Running the plugin enables it otherwise, whatever `enable` says.
    pub enabled: bool,
}

impl Default for ValidatorSettings {
    /// Nothing rejected, but enabled.
    fn default() -> Self {
        ValidatorSettings {
            config: DefaultValidatorConfig::default(),
            enabled: true,
        }
    }
}

/// The configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file could not be read.
    #[error("failed to read configuration file {path:?}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a validator configuration.
    #[error("{0}")]
    Parse(#[from] ConfigError),
}

impl ValidatorSettings {
    /// Reads YAML (an empty text is the default configuration: nothing rejected).
    pub fn from_yaml(text: &str) -> Result<ValidatorSettings, SettingsError> {
        let config = DefaultValidatorConfig::from_yaml_str(text)?;
        Ok(ValidatorSettings {
            config,
            enabled: !explicitly_disabled(text),
        })
    }

    /// Reads a YAML file.
    pub fn from_file(path: &Path) -> Result<ValidatorSettings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text)
    }
}

/// `enable: false` (as opposed to `enable` left out) in a text that parsed already.
fn explicitly_disabled(text: &str) -> bool {
    let Ok(serde_norway::Value::Mapping(map)) = serde_norway::from_str::<serde_norway::Value>(text)
    else {
        return false;
    };
    map.get("enable") == Some(&serde_norway::Value::Bool(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_go_keys() {
        let s = ValidatorSettings::from_yaml(
            "rejectOCIHookAdjustment: true\nrejectSysctlAdjustment: true\n\
             requiredPlugins: [a, 10-b]\ntolerateMissingPluginsAnnotation: tol\n",
        )
        .unwrap();
        assert!(s.enabled);
        assert!(s.config.reject_oci_hook_adjustment && s.config.reject_sysctl_adjustment);
        assert!(!s.config.reject_namespace_adjustment);
        assert_eq!(s.config.required_plugins, ["a", "10-b"]);
        assert_eq!(s.config.tolerate_missing_plugins_annotation, "tol");
    }

    #[test]
    fn enable_false_disables_and_absent_enable_does_not() {
        assert!(
            !ValidatorSettings::from_yaml("enable: false\nrejectOCIHookAdjustment: true")
                .unwrap()
                .enabled
        );
        assert!(
            ValidatorSettings::from_yaml("enable: true")
                .unwrap()
                .enabled
        );
        assert!(ValidatorSettings::from_yaml("").unwrap().enabled);
        assert_eq!(
            ValidatorSettings::from_yaml("").unwrap(),
            ValidatorSettings::default()
        );
    }

    #[test]
    fn bad_text_and_missing_files_are_errors() {
        assert!(ValidatorSettings::from_yaml("rejectOCIHookAdjustment: [x]").is_err());
        let err = ValidatorSettings::from_file(Path::new("/no/such/file.yaml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to read configuration file"),
            "{err}"
        );
    }
}
