//! The builtin policy validator: [`PolicyValidatorConfig`] (the
//! `policy_validator` section of [`Config`](crate::Config)) and the builtin
//! plugin that runs `nri-policy` in the runtime's own process.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nri_adaptation::{async_trait, BoxError, BuiltinPlugin};
use nri_api::{EventMask, ValidateContainerAdjustmentRequest, ValidateContainerAdjustmentResponse};
use nri_policy::{
    AuditEntry, LoadError, Policy, PolicyValidator, POLICY_VALIDATOR_INDEX, POLICY_VALIDATOR_NAME,
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

/// How many audit records an [`Nri`](crate::Nri) keeps: those of its most
/// recent validations (one per container created), older ones dropped
/// first.
pub const POLICY_AUDIT_CONTAINERS: usize = 1024;

/// The last [`POLICY_AUDIT_CONTAINERS`] validations, oldest first; their
/// JSON records ([`nri_policy::AuditEntry::record`]) are made when asked.
#[derive(Debug, Default)]
pub(crate) struct AuditRecords {
    records: Mutex<VecDeque<AuditEntry>>,
}

impl AuditRecords {
    fn push(&self, entry: AuditEntry) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records.push_back(entry);
        while records.len() > POLICY_AUDIT_CONTAINERS {
            records.pop_front();
        }
    }

    fn lines(&self, container: Option<&str>) -> Vec<String> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records
            .iter()
            .filter(|e| container.is_none_or(|c| c == e.container_id()))
            .map(|e| e.record().to_string())
            .collect()
    }
}

/// What the builtin policy validator keeps across the NRI instances of one
/// [`Nri`](crate::Nri) (reloads): the validator (and so its counters) and
/// the audit records.
#[derive(Debug, Default)]
pub(crate) struct PolicyState {
    validator: Mutex<Option<Arc<PolicyValidator>>>,
    records: Arc<AuditRecords>,
}

impl PolicyState {
    /// The builtin for `cfg`: the validator made the first time, with the
    /// policy of `cfg` put in force on later calls.
    pub(crate) fn builtin(&self, cfg: &PolicyValidatorConfig) -> PolicyBuiltin {
        let policy = load_or_refuse(cfg);
        let mut slot = self.validator.lock().unwrap_or_else(|p| p.into_inner());
        let validator = match slot.as_ref() {
            Some(v) => {
                v.reload(policy);
                v.clone()
            }
            None => {
                let v = Arc::new(PolicyValidator::new(policy));
                *slot = Some(v.clone());
                v
            }
        };
        PolicyBuiltin {
            validator,
            records: self.records.clone(),
        }
    }

    fn validator(&self) -> Option<Arc<PolicyValidator>> {
        self.validator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl crate::Nri {
    /// The builtin policy validator's Prometheus counters
    /// (`nri_policy_decisions_total` and the others of
    /// [`PolicyMetrics`](nri_policy::PolicyMetrics)), once an NRI instance
    /// with `[policy_validator] enable = true` has been built (`None`
    /// before, and when it never is). Serve
    /// [`encode`](nri_policy::PolicyMetrics::encode) next to the other
    /// metrics, or register them in a registry of your own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), nri_integration::Error> {
    /// use nri_integration::{Config, Nri, PolicyValidatorConfig};
    ///
    /// let tmp = tempfile::tempdir().unwrap();
    /// let policy_file = tmp.path().join("policy.yaml");
    /// std::fs::write(&policy_file, "rules: []\n").unwrap();
    /// let config = Config {
    ///     socket_path: tmp.path().join("nri.sock"),
    ///     plugin_path: tmp.path().join("plugins"),
    ///     plugin_config_path: tmp.path().join("conf.d"),
    ///     policy_validator: Some(PolicyValidatorConfig { enable: true, policy_file }),
    ///     ..Config::default()
    /// };
    /// let nri = Nri::new(config);
    /// nri.start().await?;
    /// let text = nri.policy_metrics().expect("enabled").encode();
    /// assert!(text.contains("nri_policy_rules 0"), "{text}");
    /// assert!(Nri::new(Config::disabled()).policy_metrics().is_none());
    /// nri.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn policy_metrics(&self) -> Option<nri_policy::PolicyMetrics> {
        self.core.policy.validator().map(|v| v.metrics().clone())
    }

    /// The builtin policy validator's audit records, one JSON object per
    /// line as [`nri_policy::audit_record`] writes them (which plugin set
    /// which field to what, the verdict and the violations): the record of
    /// `container` (an id), or of every container it has validated, oldest
    /// first. The records of the last [`POLICY_AUDIT_CONTAINERS`]
    /// validations are kept in memory; none when the validator is not
    /// enabled.
    ///
    /// ```
    /// use nri_integration::{Config, Nri};
    ///
    /// let nri = Nri::new(Config::disabled());
    /// assert!(nri.policy_audit(None).is_empty());
    /// assert!(nri.policy_audit(Some("ctr0")).is_empty());
    /// ```
    pub fn policy_audit(&self, container: Option<&str>) -> Vec<String> {
        self.core.policy.records.lines(container)
    }
}

/// The policy validator as a builtin plugin.
pub(crate) struct PolicyBuiltin {
    validator: Arc<PolicyValidator>,
    records: Arc<AuditRecords>,
}

impl PolicyBuiltin {
    /// The builtin with the policy of `cfg` and audit records of its own.
    #[cfg(test)]
    pub(crate) fn new(cfg: &PolicyValidatorConfig) -> PolicyBuiltin {
        PolicyBuiltin {
            validator: Arc::new(PolicyValidator::new(load_or_refuse(cfg))),
            records: Arc::default(),
        }
    }
}

/// The policy of `cfg`; when the file no longer loads (it changed between
/// the check and the start), one that refuses every field a plugin sets.
fn load_or_refuse(cfg: &PolicyValidatorConfig) -> Policy {
    cfg.load().unwrap_or_else(|e| {
        tracing::error!("policy validator: {e}; refusing every container");
        refuse_all(&e.to_string())
    })
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
        let (verdict, entry) = self.validator.validate_audited(req);
        self.records.push(entry);
        verdict?;
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

    #[tokio::test]
    async fn audit_records_and_counters_outlive_a_reload_and_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, "mode: audit\ndefault: deny\nrules: []\n").unwrap();
        let cfg = PolicyValidatorConfig {
            enable: true,
            policy_file: file,
        };
        let state = PolicyState::default();
        let first = state.builtin(&cfg);
        first
            .validate_container_adjustment(&request("PATH"))
            .await
            .unwrap();
        // A reload builds a new builtin: same counters, same records.
        let second = state.builtin(&cfg);
        second
            .validate_container_adjustment(&request("HOME"))
            .await
            .unwrap();
        let metrics = state.validator().unwrap().metrics().clone();
        assert_eq!(metrics.decisions("audit", "would_refuse"), 2);
        // Both validations of c0, oldest first.
        let lines = state.records.lines(Some("c0"));
        assert_eq!(lines.len(), 2, "{lines:?}");
        let rec: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(rec["container"]["id"], "c0");
        assert_eq!(rec["set"][0]["plugin"], "10-vendor");
        assert_eq!(rec["set"][0]["field"], "env");
        assert_eq!(rec["set"][0]["key"], "HOME");
        assert_eq!(rec["violations"][0]["plugin"], "10-vendor");
        assert!(state.records.lines(Some("other")).is_empty());

        let v = state.validator().unwrap();
        for i in 0..POLICY_AUDIT_CONTAINERS + 3 {
            let mut r = request("X");
            r.container.as_mut().unwrap().id = format!("x{i}");
            state.records.push(v.validate_audited(&r).1);
        }
        let all = state.records.lines(None);
        assert_eq!(all.len(), POLICY_AUDIT_CONTAINERS);
        let first: serde_json::Value = serde_json::from_str(&all[0]).unwrap();
        // 2 + 1027 validations: the first five (c0 twice, x0 to x2) dropped.
        assert_eq!(first["container"]["id"], "x3");
        assert!(state.records.lines(Some("c0")).is_empty());
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
