//! The builtin policy validator: [`PolicyValidatorConfig`] (the
//! `policy_validator` section of [`Config`](crate::Config)) and the builtin
//! plugin that runs `nri-policy` in the runtime's own process.

use std::path::PathBuf;
use std::sync::Arc;

use nri_adaptation::{async_trait, BoxError, BuiltinPlugin};
use nri_api::{EventMask, ValidateContainerAdjustmentRequest, ValidateContainerAdjustmentResponse};
use nri_policy::{
    LoadError, Policy, PolicyValidator, POLICY_VALIDATOR_INDEX, POLICY_VALIDATOR_NAME,
};
use serde::{Deserialize, Serialize};

/// The builtin policy validator's configuration: whether it runs and the
/// policy file (see `docs/policy.md`). It runs as the builtin plugin
/// `00-policy-validator`, next to (or instead of) the default validator.
///
/// The file is read when NRI starts and on every
/// [`Nri::reload`](crate::Nri::reload); a file that does not load fails
/// them with `file:line:column` (a failed reload keeps the running
/// configuration, and so the old policy, in force).
///
/// ```
/// use nri_integration::{Config, PolicyValidatorConfig};
///
/// let cfg: Config = toml::from_str(r#"
///     [policy_validator]
///     enable = true
///     policy_file = "/etc/nri/policy.yaml"
/// "#).unwrap();
/// let p = cfg.policy_validator.unwrap();
/// assert!(p.enable);
/// assert_eq!(p.policy_file, std::path::Path::new("/etc/nri/policy.yaml"));
///
/// let json: PolicyValidatorConfig =
///     serde_json::from_str(r#"{"enable": true, "policyFile": "/p.yaml"}"#).unwrap();
/// assert_eq!(json.policy_file, std::path::Path::new("/p.yaml"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyValidatorConfig {
    /// Whether the runtime runs the policy validator.
    #[serde(default)]
    pub enable: bool,
    /// The policy file (YAML).
    #[serde(default, alias = "policyFile", alias = "policy-file")]
    pub policy_file: PathBuf,
}

impl PolicyValidatorConfig {
    /// Reads and checks the policy file.
    pub fn load(&self) -> Result<Policy, LoadError> {
        Policy::load(&self.policy_file)
    }
}

/// The policy validator as a builtin plugin.
pub(crate) struct PolicyBuiltin {
    validator: Arc<PolicyValidator>,
}

impl PolicyBuiltin {
    /// The builtin with the policy of `cfg`; when the file no longer loads
    /// (it changed between the check and the start), every field a plugin
    /// sets is refused.
    pub(crate) fn new(cfg: &PolicyValidatorConfig) -> PolicyBuiltin {
        let policy = cfg.load().unwrap_or_else(|e| {
            tracing::error!("policy validator: {e}; refusing every container");
            refuse_all(&e.to_string())
        });
        PolicyBuiltin {
            validator: Arc::new(PolicyValidator::new(policy)),
        }
    }
}

/// A policy that refuses every field any plugin sets.
fn refuse_all(why: &str) -> Policy {
    let mut p = Policy::empty(format!("(policy not loaded: {why})"));
    p.default = nri_policy::DefaultAction::Deny;
    p
}

#[async_trait]
impl BuiltinPlugin for PolicyBuiltin {
    fn name(&self) -> &str {
        POLICY_VALIDATOR_NAME
    }
    fn index(&self) -> &str {
        POLICY_VALIDATOR_INDEX
    }
    fn events(&self) -> EventMask {
        nri_api::Event::ValidateContainerAdjustment.into()
    }
    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, BoxError> {
        self.validator.validate(req)?;
        Ok(ValidateContainerAdjustmentResponse::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use nri_api::{Container, ContainerAdjustment, Field, FieldOwners, KeyValue, OwningPlugins};

    fn request(var: &str) -> ValidateContainerAdjustmentRequest {
        let mut owners = FieldOwners::default();
        owners
            .compound
            .entry(Field::Env as i32)
            .or_default()
            .owners
            .insert(var.into(), "10-vendor".into());
        ValidateContainerAdjustmentRequest {
            container: Some(Container {
                id: "c0".into(),
                ..Default::default()
            }),
            adjust: Some(ContainerAdjustment {
                env: vec![KeyValue {
                    key: var.into(),
                    value: "1".into(),
                }],
                ..Default::default()
            }),
            owners: Some(OwningPlugins {
                owners: [("c0".to_string(), owners)].into(),
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn builtin_refuses_as_the_policy_says() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(
            &file,
            "default: deny\nrules:\n  - name: env\n    allow: {env: ['OK_*']}\n",
        )
        .unwrap();
        let cfg = PolicyValidatorConfig {
            enable: true,
            policy_file: file.clone(),
        };
        let b = PolicyBuiltin::new(&cfg);
        assert_eq!(b.name(), "policy-validator");
        assert_eq!(b.index(), "00");
        assert!(b
            .validate_container_adjustment(&request("OK_A"))
            .await
            .is_ok());
        let err = b
            .validate_container_adjustment(&request("PATH"))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "validation error: plugin \"10-vendor\" may not set env \"PATH\" = \"1\": \
                 no rule allows it (default: deny, {}:1)",
                file.display()
            )
        );
    }

    #[test]
    fn a_bad_policy_file_fails_validation_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, "rules:\n  - allow: {env: [A]}\n    dney: {}\n").unwrap();
        let toml = format!(
            "[policy_validator]\nenable = true\npolicy_file = {:?}\n",
            file.display().to_string()
        );
        let cfg: Config = toml::from_str(&toml).unwrap();
        let err = cfg.validate().unwrap_err().to_string();
        let at = format!("{}:3:5: ", file.display());
        assert!(err.contains(&at), "{err}");
        // Disabled: the file is not read.
        let mut off = cfg.clone();
        off.policy_validator.as_mut().unwrap().enable = false;
        assert!(off.validate().is_ok());
    }
}
