//! The decision: which fields the policy lets each plugin set.

use std::fmt;

use nri_api::{Field, Mount, ValidateContainerAdjustmentRequest};
use nri_validator::ValidationError;

use crate::cpuset::CpuSet;
use crate::glob::any_match;
use crate::items::{class_name, Item, Value};
use crate::lang::{
    Access, DefaultAction, MountSpec, PluginScope, Policy, Rule, Spec, WorkloadScope,
};

/// Why one field a plugin set is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The plugin, qualified (`10-foo`).
    pub plugin: String,
    /// The field class (`mounts`, `env`, `resources.memory`, ...).
    pub field: &'static str,
    /// The field and its value, as the refusal shows it
    /// (`mounts "/host" (source "/", type "bind", rw)`).
    pub what: String,
    /// The rule that denied it; `None` when no rule allowed it under `default: deny`.
    pub rule: Option<String>,
    /// `file:line` of that rule (or of `default:`).
    pub cite: String,
}

impl Violation {
    /// The rule's name for metrics and logs: the rule's name, or `default`.
    pub fn rule_label(&self) -> &str {
        self.rule.as_deref().unwrap_or("default")
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plugin {:?} may not set {}: ", self.plugin, self.what)?;
        match &self.rule {
            Some(name) => write!(f, "denied by rule {:?} ({})", name, self.cite),
            None => write!(f, "no rule allows it (default: deny, {})", self.cite),
        }
    }
}

/// Why the policy refuses a container adjustment. Its text is the
/// validator's rejection reason, as the runtime hands it to its client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A default-validator option refused it, with the default validator's text.
    #[error(transparent)]
    DefaultValidator(#[from] ValidationError),
    /// A rule (or `default: deny`) refused a field; `more` further fields
    /// were refused as well.
    #[error("validation error: {first}{}", more_suffix(*.more))]
    Rules {
        /// The first refused field.
        first: Violation,
        /// How many more were refused.
        more: usize,
    },
}

fn more_suffix(more: usize) -> String {
    match more {
        0 => String::new(),
        1 => " (and 1 more violation)".to_owned(),
        n => format!(" (and {n} more violations)"),
    }
}

/// The outcome of evaluating one request.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The default validator's refusal, if any.
    pub default_refusal: Option<ValidationError>,
    /// Every field the rules refuse, in field order.
    pub violations: Vec<Violation>,
}

impl Decision {
    /// Whether nothing is refused.
    pub fn allowed(&self) -> bool {
        self.default_refusal.is_none() && self.violations.is_empty()
    }

    /// The refusal an enforcing validator returns: the default validator's
    /// first, else the first violation.
    pub fn refusal(&self) -> Option<Refusal> {
        if let Some(e) = &self.default_refusal {
            return Some(Refusal::DefaultValidator(e.clone()));
        }
        let first = self.violations.first()?;
        Some(Refusal::Rules {
            first: first.clone(),
            more: self.violations.len() - 1,
        })
    }
}

/// Evaluates the rules of `policy` (not its default-validator options) for
/// one request.
pub(crate) fn violations(
    policy: &Policy,
    req: &ValidateContainerAdjustmentRequest,
) -> Vec<Violation> {
    let items = crate::items::collect(req);
    if items.is_empty() {
        return Vec::new();
    }
    let in_workload: Vec<bool> = policy
        .rules
        .iter()
        .map(|r| workload_matches(&r.workload, req))
        .collect();
    let mut out = Vec::new();
    for item in &items {
        if let Some(v) = judge(policy, &in_workload, item) {
            out.push(v);
        }
    }
    out
}

fn judge(policy: &Policy, in_workload: &[bool], item: &Item<'_>) -> Option<Violation> {
    let mut allowed = false;
    for (rule, _) in policy
        .rules
        .iter()
        .zip(in_workload)
        .filter(|(r, w)| **w && plugin_matches(&r.plugins, item.plugin))
    {
        if spec_matches(&rule.deny, item, true) {
            return Some(violation(policy, Some(rule), item));
        }
        allowed = allowed || spec_matches(&rule.allow, item, false);
    }
    if allowed || policy.default == DefaultAction::Allow {
        return None;
    }
    Some(violation(policy, None, item))
}

fn violation(policy: &Policy, rule: Option<&Rule>, item: &Item<'_>) -> Violation {
    Violation {
        plugin: item.plugin.to_owned(),
        field: class_name(item.field),
        what: item.to_string(),
        rule: rule.map(|r| r.name.clone()),
        cite: match rule {
            Some(r) => policy.cite(r),
            None => format!("{}:{}", policy.source, policy.default_line),
        },
    }
}

/// Whether the scope covers the plugin `qualified` (`10-foo`).
pub(crate) fn plugin_matches(scope: &PluginScope, qualified: &str) -> bool {
    let (index, base) = qualified.split_once('-').unwrap_or(("", qualified));
    if let Some(names) = &scope.names {
        if !names.iter().any(|n| n == base || n == qualified) {
            return false;
        }
    }
    if let Some(g) = &scope.glob {
        if !g.matches(base) && !g.matches(qualified) {
            return false;
        }
    }
    if let Some(range) = &scope.index {
        match index.parse::<u32>() {
            Ok(i) if i >= range.min && i <= range.max => {}
            _ => return false,
        }
    }
    true
}

/// Whether the scope covers the container of `req`.
pub(crate) fn workload_matches(
    scope: &WorkloadScope,
    req: &ValidateContainerAdjustmentRequest,
) -> bool {
    let pod = req.pod.as_ref();
    if let Some(ns) = &scope.namespaces {
        if !any_match(ns, pod.map_or("", |p| p.namespace.as_str())) {
            return false;
        }
    }
    let kv_ok = |want: &Option<std::collections::BTreeMap<String, crate::Glob>>,
                 have: Option<&std::collections::BTreeMap<String, String>>| {
        want.as_ref().is_none_or(|want| {
            want.iter()
                .all(|(k, g)| have.and_then(|h| h.get(k)).is_some_and(|v| g.matches(v)))
        })
    };
    if !kv_ok(&scope.pod_labels, pod.map(|p| &p.labels)) {
        return false;
    }
    if !kv_ok(&scope.pod_annotations, pod.map(|p| &p.annotations)) {
        return false;
    }
    if let Some(c) = &scope.containers {
        if !any_match(c, req.container.as_ref().map_or("", |c| c.name.as_str())) {
            return false;
        }
    }
    true
}

/// Whether `spec` speaks of `item`. `deny` selects the reading of a
/// multi-valued field: a deny speaks of it when any of its values matches, an
/// allow only when all do.
pub(crate) fn spec_matches(spec: &Spec, item: &Item<'_>, deny: bool) -> bool {
    if spec
        .fields
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f.0 == item.field))
    {
        return true;
    }
    let globs = |g: &Option<Vec<crate::Glob>>, s: &str| g.as_ref().is_some_and(|g| any_match(g, s));
    let bounds = |b: Option<&crate::Bounds>| match (b, &item.value) {
        (None, _) => false,
        (Some(b), Value::Number(n)) => b.contains(*n),
        // Removed, or not in the adjustment: the bound has nothing to check.
        (Some(_), _) => true,
    };
    let res = spec.resources.as_ref();
    match item.field {
        Field::Annotations => globs(&spec.annotations, item.key),
        Field::Env => globs(&spec.env, item.key),
        Field::Mounts => spec
            .mounts
            .as_ref()
            .is_some_and(|ms| ms.iter().any(|m| mount_matches(m, item))),
        Field::Devices => globs(&spec.devices, item.key),
        Field::CdiDevices => globs(&spec.cdi_devices, item.key),
        Field::OciHooks => match (&spec.hooks, &item.value) {
            (None, _) => false,
            (Some(g), Value::Hooks(paths)) if deny => {
                paths.is_empty() || paths.iter().any(|p| any_match(g, p))
            }
            (Some(g), Value::Hooks(paths)) => paths.iter().all(|p| any_match(g, p)),
            (Some(_), _) => true,
        },
        Field::SeccompPolicy => spec.seccomp,
        Field::Namespace => globs(&spec.namespaces, item.key),
        Field::Sysctl => globs(&spec.sysctls, item.key),
        Field::Rlimits => spec.rlimits.as_ref().is_some_and(|m| {
            m.iter()
                .filter(|(ty, _)| crate::Glob::new(ty).matches(item.key))
                .any(|(_, b)| match &item.value {
                    Value::Rlimit(r) if deny => {
                        b.contains(r.soft.into()) || b.contains(r.hard.into())
                    }
                    Value::Rlimit(r) => b.contains(r.soft.into()) && b.contains(r.hard.into()),
                    _ => true,
                })
        }),
        Field::MemLimit => bounds(res.and_then(|r| r.memory.as_ref())),
        Field::MemReservation => bounds(res.and_then(|r| r.memory_reservation.as_ref())),
        Field::MemSwapLimit => bounds(res.and_then(|r| r.memory_swap.as_ref())),
        Field::MemKernelLimit => bounds(res.and_then(|r| r.memory_kernel.as_ref())),
        Field::MemTcpLimit => bounds(res.and_then(|r| r.memory_kernel_tcp.as_ref())),
        Field::MemSwappiness => bounds(res.and_then(|r| r.memory_swappiness.as_ref())),
        Field::CpuShares => bounds(res.and_then(|r| r.cpu_shares.as_ref())),
        Field::CpuQuota => bounds(res.and_then(|r| r.cpu_quota.as_ref())),
        Field::CpuPeriod => bounds(res.and_then(|r| r.cpu_period.as_ref())),
        Field::CpuRealtimeRuntime => bounds(res.and_then(|r| r.cpu_realtime_runtime.as_ref())),
        Field::CpuRealtimePeriod => bounds(res.and_then(|r| r.cpu_realtime_period.as_ref())),
        Field::PidsLimit => bounds(res.and_then(|r| r.pids_limit.as_ref())),
        Field::CpuSetCpUs => set_matches(res.and_then(|r| r.cpus.as_ref()), item, deny),
        Field::CpuSetMems => set_matches(res.and_then(|r| r.mems.as_ref()), item, deny),
        Field::HugepageLimits => res.is_some_and(|r| globs(&r.hugepage_limits, item.key)),
        Field::MemDisableOomKiller => res.is_some_and(|r| r.disable_oom_killer),
        Field::MemUseHierarchy => res.is_some_and(|r| r.use_hierarchy),
        Field::BlockioClass => text_globs(&spec.blockio_classes, item),
        Field::RdtClass => text_globs(&spec.rdt_classes, item),
        Field::CgroupsUnified => globs(&spec.unified, item.key),
        Field::CgroupsPath => text_globs(&spec.cgroups_path, item),
        Field::OomScoreAdj => bounds(spec.oom_score_adj.as_ref()),
        Field::Args => spec.args,
        _ => false,
    }
}

fn text_globs(g: &Option<Vec<crate::Glob>>, item: &Item<'_>) -> bool {
    match (g, &item.value) {
        (None, _) => false,
        (Some(g), Value::Text(t)) => any_match(g, t),
        (Some(_), _) => true,
    }
}

fn set_matches(spec: Option<&crate::lang::SetSpec>, item: &Item<'_>, deny: bool) -> bool {
    let Some(spec) = spec else {
        return false;
    };
    let Value::Text(t) = &item.value else {
        return true;
    };
    match CpuSet::parse(t) {
        Ok(set) if deny => set.intersects(&spec.within),
        Ok(set) => set.is_subset(&spec.within),
        // A list the kernel would not take either: only a deny speaks of it.
        Err(_) => deny,
    }
}

fn mount_matches(spec: &MountSpec, item: &Item<'_>) -> bool {
    if let Some(d) = &spec.destinations {
        if !any_match(d, item.key) {
            return false;
        }
    }
    let Value::Mount(m) = &item.value else {
        // Removed: only the destination can be checked.
        return true;
    };
    if let Some(sources) = &spec.sources {
        if !sources.iter().any(|p| p.covers(&m.source)) {
            return false;
        }
    }
    if let Some(types) = &spec.types {
        if !any_match(types, &m.r#type) {
            return false;
        }
    }
    if let Some(access) = spec.access {
        let ro = mount_is_ro(m);
        if (access == Access::Ro) != ro {
            return false;
        }
    }
    if let Some(props) = &spec.propagation {
        let p = mount_propagation(m).unwrap_or("rprivate");
        if !props.iter().any(|q| q == p) {
            return false;
        }
    }
    true
}

/// Whether the mount's options make it read-only (the last of `ro`/`rw` wins).
pub(crate) fn mount_is_ro(m: &Mount) -> bool {
    m.options
        .iter()
        .rev()
        .find(|o| *o == "ro" || *o == "rw")
        .is_some_and(|o| o == "ro")
}

/// The mount's propagation option, if it has one (the last one wins).
pub(crate) fn mount_propagation(m: &Mount) -> Option<&str> {
    const PROPAGATION: [&str; 8] = [
        "private",
        "rprivate",
        "shared",
        "rshared",
        "slave",
        "rslave",
        "unbindable",
        "runbindable",
    ];
    m.options
        .iter()
        .rev()
        .find(|o| PROPAGATION.contains(&o.as_str()))
        .map(String::as_str)
}
