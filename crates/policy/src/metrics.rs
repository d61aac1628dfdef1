//! Prometheus counters of the policy validator.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    mode: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ViolationLabels {
    mode: &'static str,
    plugin: String,
    field: String,
    rule: String,
}

impl ViolationLabels {
    fn new(mode: &'static str, plugin: &str, field: &str, rule: &str) -> Self {
        ViolationLabels {
            mode,
            plugin: plugin.to_owned(),
            field: field.to_owned(),
            rule: rule.to_owned(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

/// The counters (clones share them):
///
/// * `nri_policy_decisions_total{mode, verdict}`: one per validated
///   container; `verdict` is `allowed`, `refused` (enforce mode) or
///   `would_refuse` (audit mode);
/// * `nri_policy_violations_total{mode, plugin, field, rule}`: one per
///   refused field (`rule` is the rule's name, `default` for `default: deny`,
///   `default-validator` for the default validator's options);
/// * `nri_policy_reloads_total{result}`: `ok` or `error`;
/// * `nri_policy_rules`: rules of the policy in force.
///
/// ```
/// use nri_api::ValidateContainerAdjustmentRequest;
/// use nri_policy::{Policy, PolicyValidator};
///
/// let v = PolicyValidator::new(Policy::empty("policy.yaml"));
/// v.validate(&ValidateContainerAdjustmentRequest::default()).unwrap();
/// let text = v.metrics().encode();
/// assert!(
///     text.contains("nri_policy_decisions_total{mode=\"enforce\",verdict=\"allowed\"} 1"),
///     "{text}"
/// );
/// assert_eq!(v.metrics().decisions("enforce", "allowed"), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct PolicyMetrics {
    decisions: Family<DecisionLabels, Counter>,
    violations: Family<ViolationLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    rules: Gauge,
}

impl PolicyMetrics {
    /// Registers the metrics under `nri_policy_` in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let reg = registry.sub_registry_with_prefix("nri_policy");
        reg.register(
            "decisions",
            "Container adjustments decided by the policy validator",
            self.decisions.clone(),
        );
        reg.register(
            "violations",
            "Fields set by plugins that the policy refuses",
            self.violations.clone(),
        );
        reg.register(
            "reloads",
            "Policy loads and reloads, by result",
            self.reloads.clone(),
        );
        reg.register("rules", "Rules of the policy in force", self.rules.clone());
    }

    /// The OpenMetrics text of these metrics alone (ends with `# EOF`).
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    pub(crate) fn decision(&self, mode: &'static str, verdict: &'static str) {
        self.decisions
            .get_or_create(&DecisionLabels { mode, verdict })
            .inc();
    }

    pub(crate) fn violation(&self, mode: &'static str, plugin: &str, field: &str, rule: &str) {
        self.violations
            .get_or_create(&ViolationLabels::new(mode, plugin, field, rule))
            .inc();
    }

    pub(crate) fn reload(&self, ok: bool, rules: usize) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ReloadLabels { result }).inc();
        if ok {
            self.rules.set(i64::try_from(rules).unwrap_or(i64::MAX));
        }
    }

    /// Decisions so far with that mode and verdict.
    pub fn decisions(&self, mode: &str, verdict: &str) -> u64 {
        let mode = match mode {
            "audit" => "audit",
            _ => "enforce",
        };
        let verdict = match verdict {
            "refused" => "refused",
            "would_refuse" => "would_refuse",
            _ => "allowed",
        };
        self.decisions
            .get_or_create(&DecisionLabels { mode, verdict })
            .get()
    }

    /// Violations so far of `plugin` on `field` by `rule`, in `mode`.
    pub fn violations(&self, mode: &str, plugin: &str, field: &str, rule: &str) -> u64 {
        let mode = if mode == "audit" { "audit" } else { "enforce" };
        self.violations
            .get_or_create(&ViolationLabels::new(mode, plugin, field, rule))
            .get()
    }

    /// Reloads so far with `result` (`ok` or `error`).
    pub fn reloads(&self, result: &str) -> u64 {
        let result = if result == "ok" { "ok" } else { "error" };
        self.reloads.get_or_create(&ReloadLabels { result }).get()
    }
}
