//! [`PolicyValidator`]: the policy in force, its counters and its audit trail.

use std::path::Path;
use std::sync::{Arc, RwLock};

use nri_api::ValidateContainerAdjustmentRequest;
use nri_validator::DefaultValidator;

use crate::audit::{self, AuditEntry, AuditTrail};
use crate::eval::{self, Decision, Refusal};
use crate::lang::{LoadError, Mode, Policy};
use crate::metrics::PolicyMetrics;

/// The policy validator: validates container adjustments against the policy
/// in force, counts and logs each decision and appends it to the audit trail.
/// Thread-safe; [`reload`](Self::reload) swaps the policy atomically.
///
/// Order of checks: the default validator's options first (the same
/// verdicts and texts as [`DefaultValidator`]), then the rules.
///
/// # Example
///
/// ```
/// use nri_api::{Container, ContainerAdjustment, Field, FieldOwners, KeyValue, OwningPlugins,
///               ValidateContainerAdjustmentRequest};
/// use nri_policy::{Policy, PolicyValidator};
///
/// let policy = Policy::from_yaml_str(
///     r#"default: deny
/// rules:
///   - name: vendor-env
///     plugins: {glob: 'acme-*'}
///     allow: {env: ['ACME_*']}
/// "#,
///     "policy.yaml",
/// )
/// .unwrap();
/// let v = PolicyValidator::new(policy);
///
/// let mut owners = FieldOwners::default();
/// owners.compound.entry(Field::Env as i32).or_default().owners.insert("PATH".into(), "10-acme-env".into());
/// let req = ValidateContainerAdjustmentRequest {
///     container: Some(Container { id: "c0".into(), name: "web".into(), ..Default::default() }),
///     adjust: Some(ContainerAdjustment {
///         env: vec![KeyValue { key: "PATH".into(), value: "/evil".into() }],
///         ..Default::default()
///     }),
///     owners: Some(OwningPlugins { owners: [("c0".to_string(), owners)].into() }),
///     ..Default::default()
/// };
/// assert_eq!(
///     v.validate(&req).unwrap_err().to_string(),
///     r#"validation error: plugin "10-acme-env" may not set env "PATH" = "/evil": no rule allows it (default: deny, policy.yaml:1)"#,
/// );
/// ```
#[derive(Debug)]
pub struct PolicyValidator {
    state: RwLock<Arc<Loaded>>,
    metrics: PolicyMetrics,
    audit: AuditTrail,
}

#[derive(Debug)]
struct Loaded {
    policy: Policy,
    default: DefaultValidator,
}

impl Loaded {
    fn new(policy: Policy) -> Loaded {
        Loaded {
            default: DefaultValidator::new(policy.default_validator.clone()),
            policy,
        }
    }
}

impl PolicyValidator {
    /// A validator with `policy` in force.
    pub fn new(policy: Policy) -> PolicyValidator {
        let metrics = PolicyMetrics::default();
        metrics.reload(true, policy.rules.len());
        PolicyValidator {
            state: RwLock::new(Arc::new(Loaded::new(policy))),
            metrics,
            audit: AuditTrail::default(),
        }
    }

    /// A validator with the policy of the file `path`.
    pub fn load(path: &Path) -> Result<PolicyValidator, LoadError> {
        Ok(PolicyValidator::new(Policy::load(path)?))
    }

    /// Replaces the policy in force.
    pub fn reload(&self, policy: Policy) {
        self.metrics.reload(true, policy.rules.len());
        tracing::info!(
            target: "nri_policy",
            source = %policy.source,
            mode = policy.mode.as_str(),
            rules = policy.rules.len(),
            "policy in force"
        );
        let next = Arc::new(Loaded::new(policy));
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// Reads `path` and puts its policy in force; a file that does not load
    /// leaves the old policy in force and is counted and logged.
    pub fn reload_file(&self, path: &Path) -> Result<(), LoadError> {
        match Policy::load(path) {
            Ok(p) => {
                self.reload(p);
                Ok(())
            }
            Err(e) => {
                self.metrics.reload(false, 0);
                tracing::error!(target: "nri_policy", "policy not reloaded, the old one stays in force: {e}");
                Err(e)
            }
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.current().policy.clone()
    }

    /// The counters.
    pub fn metrics(&self) -> &PolicyMetrics {
        &self.metrics
    }

    fn current(&self) -> Arc<Loaded> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What the policy in force says of `req`, without logging, counting or
    /// auditing.
    pub fn decide(&self, req: &ValidateContainerAdjustmentRequest) -> Decision {
        let loaded = self.current();
        decide_with(&loaded, req)
    }

    /// Validates one request: decides, counts, logs, appends to the audit
    /// trail, and returns the refusal in enforce mode (`Ok` in audit mode,
    /// whatever the decision).
    pub fn validate(&self, req: &ValidateContainerAdjustmentRequest) -> Result<(), Refusal> {
        self.validate_inner(req, false).0
    }

    /// As [`validate`](Self::validate), and also returns what the audit
    /// record of the request is made of ([`AuditEntry::record`] makes it),
    /// whether or not the policy names an `audit_file`: for a runtime that
    /// keeps the trail itself.
    ///
    /// ```
    /// use nri_api::ValidateContainerAdjustmentRequest;
    /// use nri_policy::{Policy, PolicyValidator};
    ///
    /// let v = PolicyValidator::new(Policy::empty("policy.yaml"));
    /// let (verdict, entry) = v.validate_audited(&ValidateContainerAdjustmentRequest::default());
    /// assert!(verdict.is_ok());
    /// assert_eq!(entry.record()["verdict"], "allowed");
    /// ```
    pub fn validate_audited(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> (Result<(), Refusal>, AuditEntry) {
        let (verdict, entry) = self.validate_inner(req, true);
        let entry = entry.unwrap_or_else(|| AuditEntry::new(req, "", "", Decision::default()));
        (verdict, entry)
    }

    fn validate_inner(
        &self,
        req: &ValidateContainerAdjustmentRequest,
        want_entry: bool,
    ) -> (Result<(), Refusal>, Option<AuditEntry>) {
        let loaded = self.current();
        let policy = &loaded.policy;
        let decision = decide_with(&loaded, req);
        let mode = policy.mode.as_str();
        let verdict = match (decision.allowed(), policy.mode) {
            (true, _) => "allowed",
            (false, Mode::Enforce) => "refused",
            (false, Mode::Audit) => "would_refuse",
        };
        self.metrics.decision(mode, verdict);
        if decision.default_refusal.is_some() {
            self.metrics.violation(mode, "", "", "default-validator");
        }
        for v in &decision.violations {
            self.metrics
                .violation(mode, &v.plugin, v.field, v.rule_label());
        }
        let pod = req.pod.as_ref();
        let refusal = decision.refusal();
        tracing::info!(
            target: "nri_policy",
            mode,
            verdict,
            pod_namespace = pod.map_or("", |p| p.namespace.as_str()),
            pod = pod.map_or("", |p| p.name.as_str()),
            container = req.container.as_ref().map_or("", |c| c.name.as_str()),
            violations = decision.violations.len() + usize::from(decision.default_refusal.is_some()),
            reason = refusal.as_ref().map(|r| r.to_string()).unwrap_or_default(),
            "policy decision"
        );
        for v in &decision.violations {
            tracing::warn!(
                target: "nri_policy",
                mode,
                plugin = %v.plugin,
                field = v.field,
                value = %v.what,
                rule = v.rule_label(),
                at = %v.cite,
                "policy violation"
            );
        }
        if let Some(path) = &policy.audit_file {
            let line = audit::record(req, mode, verdict, &decision).to_string();
            if let Err(e) = self.audit.append(path, &line) {
                tracing::error!(target: "nri_policy", file = %path.display(), "cannot write the audit trail: {e}");
            }
        }
        let entry = want_entry.then(|| AuditEntry::new(req, mode, verdict, decision));
        let verdict = match (refusal, policy.mode) {
            (Some(r), Mode::Enforce) => Err(r),
            _ => Ok(()),
        };
        (verdict, entry)
    }
}

fn decide_with(loaded: &Loaded, req: &ValidateContainerAdjustmentRequest) -> Decision {
    if !loaded.policy.default_validator.enable {
        return Decision::default();
    }
    Decision {
        default_refusal: loaded.default.validate(req).err(),
        violations: eval::violations(&loaded.policy, req),
    }
}
