//! The policy file: its YAML form, checked as it is read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use nri_validator::DefaultValidatorConfig;
use serde::de::{self, Deserialize, Deserializer};
use serde::Deserialize as DeriveDeserialize;

use crate::cpuset::CpuSet;
use crate::glob::Glob;

/// Whether refusals are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, DeriveDeserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Refuse the container (the default).
    #[default]
    Enforce,
    /// Decide, log and count, but accept the container.
    Audit,
}

impl Mode {
    /// `enforce` or `audit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// What happens to a field a plugin set that no rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, DeriveDeserialize)]
#[serde(rename_all = "lowercase")]
pub enum DefaultAction {
    /// It is accepted (the default).
    #[default]
    Allow,
    /// It is refused.
    Deny,
}

/// A loaded, checked policy.
///
/// ```
/// use nri_policy::{Policy, Mode, DefaultAction};
///
/// let policy = Policy::from_yaml_str(
///     r#"
/// mode: audit
/// default: deny
/// rejectOCIHookAdjustment: true
/// rules:
///   - name: cpu-manager
///     plugins: {names: [cpu-manager]}
///     allow:
///       resources: {cpus: {within: 0-63}}
/// "#,
///     "policy.yaml",
/// )
/// .unwrap();
/// assert_eq!(policy.mode, Mode::Audit);
/// assert_eq!(policy.default, DefaultAction::Deny);
/// assert!(policy.default_validator.reject_oci_hook_adjustment);
/// assert_eq!(policy.rules[0].line, 6);
/// assert_eq!(policy.default_line, 3);
///
/// let err = Policy::from_yaml_str("rules:\n  - allow: {envs: [X]}\n", "p.yaml").unwrap_err();
/// assert!(err.to_string().starts_with("p.yaml:2:"), "{err}");
/// ```
#[derive(Debug, Clone)]
pub struct Policy {
    /// Where the policy came from (a path or a name), for citations.
    pub source: String,
    /// Enforce or audit.
    pub mode: Mode,
    /// What happens to fields no rule decides.
    pub default: DefaultAction,
    /// Line of the `default:` key (0 when absent).
    pub default_line: usize,
    /// The default validator's options (same words, same meaning).
    pub default_validator: DefaultValidatorConfig,
    /// Where to append the audit trail (JSON lines); none when unset.
    pub audit_file: Option<PathBuf>,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

/// One rule: a scope and what it allows and denies.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    /// The rule's name (`rule-<n>` when it has none).
    pub name: String,
    /// Line of the rule's `-` in the file (1-based).
    pub line: usize,
    /// Which plugins it speaks of.
    pub plugins: PluginScope,
    /// Which containers it speaks of.
    pub workload: WorkloadScope,
    /// What it allows.
    pub allow: Spec,
    /// What it denies; a deny wins over every allow.
    pub deny: Spec,
}

/// Which plugins a rule applies to; every given condition must hold, none
/// given means every plugin.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginScope {
    /// Base (`cpu-manager`) or qualified (`10-cpu-manager`) names.
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// A glob over the base or the qualified name.
    #[serde(default)]
    pub glob: Option<Glob>,
    /// The index, as a number range.
    #[serde(default)]
    pub index: Option<IndexRange>,
}

/// An inclusive range of plugin indices: `{min: 10, max: 19}`, or a single
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRange {
    /// Lowest index (inclusive).
    pub min: u32,
    /// Highest index (inclusive).
    pub max: u32,
}

/// Which containers a rule applies to; every given condition must hold.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadScope {
    /// Pod namespaces (globs).
    #[serde(default)]
    pub namespaces: Option<Vec<Glob>>,
    /// Pod labels that must be present, with a value matching the glob.
    #[serde(default)]
    pub pod_labels: Option<BTreeMap<String, Glob>>,
    /// Pod annotations that must be present, with a value matching the glob.
    #[serde(default)]
    pub pod_annotations: Option<BTreeMap<String, Glob>>,
    /// Container names (globs).
    #[serde(default)]
    pub containers: Option<Vec<Glob>>,
}

/// What a rule allows (or denies), field class by field class. A class left
/// out says nothing.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// Annotation keys (globs).
    pub annotations: Option<Vec<Glob>>,
    /// Environment variable names (globs).
    pub env: Option<Vec<Glob>>,
    /// Mounts.
    pub mounts: Option<Vec<MountSpec>>,
    /// Device paths (globs).
    pub devices: Option<Vec<Glob>>,
    /// CDI device names (globs, `vendor.com/class=name`).
    pub cdi_devices: Option<Vec<Glob>>,
    /// OCI hook paths (globs); every injected hook path must match.
    pub hooks: Option<Vec<Glob>>,
    /// The seccomp policy.
    #[serde(default)]
    pub seccomp: bool,
    /// Linux namespace types (globs: `network`, `pid`, ...).
    pub namespaces: Option<Vec<Glob>>,
    /// Sysctl keys (globs).
    pub sysctls: Option<Vec<Glob>>,
    /// Rlimits by type (`RLIMIT_NOFILE`, or a glob); soft and hard within the bounds.
    pub rlimits: Option<BTreeMap<String, Bounds>>,
    /// Cgroup resources.
    pub resources: Option<Resources>,
    /// The OOM score adjustment, within the bounds.
    pub oom_score_adj: Option<Bounds>,
    /// The command line (args).
    #[serde(default)]
    pub args: bool,
    /// RDT classes (globs).
    pub rdt_classes: Option<Vec<Glob>>,
    /// Block I/O classes (globs).
    pub blockio_classes: Option<Vec<Glob>>,
    /// Unified (cgroup v2) keys (globs).
    pub unified: Option<Vec<Glob>>,
    /// The cgroups path (globs).
    pub cgroups_path: Option<Vec<Glob>>,
    /// Any field by its NRI name (`IoPriority`, `LinuxSched`, ...), whatever value.
    pub fields: Option<Vec<FieldName>>,
}

/// What a mount must look like; every given condition must hold.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MountSpec {
    /// Destinations in the container (globs).
    pub destinations: Option<Vec<Glob>>,
    /// Source path prefixes on the host, by whole path components:
    /// `/var/lib/foo` covers `/var/lib/foo` and `/var/lib/foo/x`, not
    /// `/var/lib/foobar`. A source with a `..` component matches no prefix.
    pub sources: Option<Vec<PathPrefix>>,
    /// Mount types (globs: `bind`, `tmpfs`, ...).
    pub types: Option<Vec<Glob>>,
    /// `ro` or `rw`: a mount is `ro` when its options say `ro`.
    pub access: Option<Access>,
    /// Propagation options (`rprivate`, `rshared`, ...); a mount without one counts as `rprivate`.
    pub propagation: Option<Vec<String>>,
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, DeriveDeserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Read-only.
    Ro,
    /// Read-write.
    Rw,
}

/// A host path prefix, normalized (no trailing slash but for `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPrefix(pub String);

/// Cgroup resources: numeric bounds, CPU and memory-node sets, switches.
#[derive(Debug, Clone, Default, DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Resources {
    /// Memory limit (bytes; `512Mi`, `2G` accepted).
    pub memory: Option<Bounds>,
    /// Memory reservation.
    pub memory_reservation: Option<Bounds>,
    /// Memory + swap limit.
    pub memory_swap: Option<Bounds>,
    /// Kernel memory limit.
    pub memory_kernel: Option<Bounds>,
    /// Kernel TCP memory limit.
    pub memory_kernel_tcp: Option<Bounds>,
    /// Swappiness.
    pub memory_swappiness: Option<Bounds>,
    /// CPU shares.
    pub cpu_shares: Option<Bounds>,
    /// CPU quota.
    pub cpu_quota: Option<Bounds>,
    /// CPU period.
    pub cpu_period: Option<Bounds>,
    /// Realtime runtime.
    pub cpu_realtime_runtime: Option<Bounds>,
    /// Realtime period.
    pub cpu_realtime_period: Option<Bounds>,
    /// Pids limit.
    pub pids_limit: Option<Bounds>,
    /// Cpuset CPUs: `{within: "0-7"}` (allow: a subset; deny: any overlap).
    pub cpus: Option<SetSpec>,
    /// Cpuset memory nodes.
    pub mems: Option<SetSpec>,
    /// Hugepage limits by page size (globs: `2MB`, `1GB`).
    pub hugepage_limits: Option<Vec<Glob>>,
    /// Disabling the OOM killer.
    #[serde(default)]
    pub disable_oom_killer: bool,
    /// Memory use_hierarchy.
    #[serde(default)]
    pub use_hierarchy: bool,
}

/// A set condition: `{within: "0-7"}`.
#[derive(Debug, Clone, DeriveDeserialize)]
#[serde(deny_unknown_fields)]
pub struct SetSpec {
    /// The set.
    pub within: CpuSet,
}

/// Inclusive numeric bounds; a missing end is open. Values may carry a
/// binary (`Ki`, `Mi`, `Gi`, `Ti`) or decimal (`k`, `M`, `G`, `T`) suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bounds {
    /// Lowest value (inclusive).
    pub min: Option<i128>,
    /// Highest value (inclusive).
    pub max: Option<i128>,
}

impl Bounds {
    /// Whether `v` lies within the bounds.
    pub fn contains(&self, v: i128) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m)
    }
}

/// An NRI field name (the `Field` enum's, e.g. `IoPriority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldName(pub nri_api::Field);

// ---------------------------------------------------------------------------
// Deserialization helpers.

impl<'de> Deserialize<'de> for IndexRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(DeriveDeserialize)]
        #[serde(untagged)]
        enum Raw {
            One(u32),
            Range {
                #[serde(default)]
                min: Option<u32>,
                #[serde(default)]
                max: Option<u32>,
            },
        }
        let r = match Raw::deserialize(d)? {
            Raw::One(n) => IndexRange { min: n, max: n },
            Raw::Range { min, max } => IndexRange {
                min: min.unwrap_or(0),
                max: max.unwrap_or(99),
            },
        };
        if r.min > r.max {
            return Err(de::Error::custom(format!(
                "index range {}..{} is empty (min above max)",
                r.min, r.max
            )));
        }
        Ok(r)
    }
}

impl<'de> Deserialize<'de> for Bounds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(DeriveDeserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(default)]
            min: Option<Quantity>,
            #[serde(default)]
            max: Option<Quantity>,
        }
        let raw = Raw::deserialize(d)?;
        let b = Bounds {
            min: raw.min.map(|q| q.0),
            max: raw.max.map(|q| q.0),
        };
        if let (Some(lo), Some(hi)) = (b.min, b.max) {
            if lo > hi {
                return Err(de::Error::custom(format!(
                    "bounds are empty: min {lo} is above max {hi}"
                )));
            }
        }
        Ok(b)
    }
}

/// A number, or a string with a unit suffix.
struct Quantity(i128);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(DeriveDeserialize)]
        #[serde(untagged)]
        enum Raw {
            Signed(i64),
            Unsigned(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Signed(n) => Ok(Quantity(n.into())),
            Raw::Unsigned(n) => Ok(Quantity(n.into())),
            Raw::Text(s) => parse_quantity(&s)
                .map(Quantity)
                .ok_or_else(|| de::Error::custom(format!("not a quantity: {s:?}"))),
        }
    }
}

/// `512Mi` → 536870912; `2G` → 2000000000; `-5` → -5.
pub(crate) fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let units: [(&str, i128); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, mult) in units {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.trim().parse::<i128>().ok()?.checked_mul(mult);
        }
    }
    s.parse().ok()
}

impl<'de> Deserialize<'de> for PathPrefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !s.starts_with('/') {
            return Err(de::Error::custom(format!(
                "mount source prefix {s:?} is not an absolute path"
            )));
        }
        if s.split('/').any(|c| c == "..") {
            return Err(de::Error::custom(format!(
                "mount source prefix {s:?} has a `..` component"
            )));
        }
        let trimmed = s.trim_end_matches('/');
        Ok(PathPrefix(if trimmed.is_empty() {
            "/".to_owned()
        } else {
            trimmed.to_owned()
        }))
    }
}

impl PathPrefix {
    /// Whether the host path `path` lies at or below this prefix. Paths with
    /// `..` components, and relative paths, never do.
    pub fn covers(&self, path: &str) -> bool {
        if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            return false;
        }
        if self.0 == "/" {
            return true;
        }
        match path.strip_prefix(self.0.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }
}

impl<'de> Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        crate::items::field_by_name(&s)
            .map(FieldName)
            .ok_or_else(|| de::Error::custom(format!("unknown NRI field {s:?}")))
    }
}

// ---------------------------------------------------------------------------
// The file.

#[derive(DeriveDeserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPolicy {
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    default: DefaultAction,
    #[serde(default)]
    audit_file: Option<PathBuf>,
    #[serde(default)]
    enable: Option<bool>,
    #[serde(
        default,
        rename = "rejectOCIHookAdjustment",
        alias = "reject_oci_hook_adjustment"
    )]
    reject_oci_hook_adjustment: bool,
    #[serde(
        default,
        rename = "rejectRuntimeDefaultSeccompAdjustment",
        alias = "reject_runtime_default_seccomp_adjustment"
    )]
    reject_runtime_default_seccomp_adjustment: bool,
    #[serde(
        default,
        rename = "rejectUnconfinedSeccompAdjustment",
        alias = "reject_unconfined_seccomp_adjustment"
    )]
    reject_unconfined_seccomp_adjustment: bool,
    #[serde(
        default,
        rename = "rejectCustomSeccompAdjustment",
        alias = "reject_custom_seccomp_adjustment"
    )]
    reject_custom_seccomp_adjustment: bool,
    #[serde(
        default,
        rename = "rejectNamespaceAdjustment",
        alias = "reject_namespace_adjustment"
    )]
    reject_namespace_adjustment: bool,
    #[serde(
        default,
        rename = "rejectSysctlAdjustment",
        alias = "reject_sysctl_adjustment"
    )]
    reject_sysctl_adjustment: bool,
    #[serde(default, rename = "requiredPlugins", alias = "required_plugins")]
    required_plugins: Vec<String>,
    #[serde(
        default,
        rename = "tolerateMissingPluginsAnnotation",
        alias = "tolerate_missing_plugins_annotation"
    )]
    tolerate_missing_plugins_annotation: String,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(DeriveDeserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    plugins: PluginScope,
    #[serde(default)]
    workload: WorkloadScope,
    #[serde(default)]
    allow: Spec,
    #[serde(default)]
    deny: Spec,
}

/// A policy that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: cannot read the policy: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid policy.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file (or name) of the policy.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl Policy {
    /// A policy that says nothing: everything allowed, nothing audited.
    pub fn empty(source: impl Into<String>) -> Policy {
        Policy {
            source: source.into(),
            mode: Mode::Enforce,
            default: DefaultAction::Allow,
            default_line: 0,
            default_validator: DefaultValidatorConfig::default(),
            audit_file: None,
            rules: Vec::new(),
        }
    }

    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<Policy, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::from_yaml_str(&text, &path.display().to_string())
    }

    /// Reads and checks a policy from YAML text; `source` names it in
    /// citations and errors. An empty text is the empty policy.
    pub fn from_yaml_str(text: &str, source: &str) -> Result<Policy, LoadError> {
        if text.trim().is_empty() {
            return Ok(Policy::empty(source));
        }
        let raw: Option<RawPolicy> = serde_norway::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map_or((1, 1), |l| (l.line().max(1), l.column().max(1)));
            LoadError::Invalid {
                file: source.to_owned(),
                line,
                column,
                message: strip_location(&e.to_string()),
            }
        })?;
        let Some(raw) = raw else {
            return Ok(Policy::empty(source));
        };
        let lines = rule_lines(text);
        let rules_line = top_level_key_line(text, "rules").unwrap_or(0);
        let rules = raw
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let line = lines.get(i).copied().unwrap_or(rules_line);
                Rule {
                    name: r.name.unwrap_or_else(|| format!("rule-{}", i + 1)),
                    line,
                    plugins: r.plugins,
                    workload: r.workload,
                    allow: r.allow,
                    deny: r.deny,
                }
            })
            .collect();
        Ok(Policy {
            source: source.to_owned(),
            mode: raw.mode,
            default: raw.default,
            default_line: top_level_key_line(text, "default").unwrap_or(0),
            default_validator: DefaultValidatorConfig {
                enable: raw.enable.unwrap_or(true),
                reject_oci_hook_adjustment: raw.reject_oci_hook_adjustment,
                reject_runtime_default_seccomp_adjustment: raw
                    .reject_runtime_default_seccomp_adjustment,
                reject_unconfined_seccomp_adjustment: raw.reject_unconfined_seccomp_adjustment,
                reject_custom_seccomp_adjustment: raw.reject_custom_seccomp_adjustment,
                reject_namespace_adjustment: raw.reject_namespace_adjustment,
                reject_sysctl_adjustment: raw.reject_sysctl_adjustment,
                required_plugins: raw.required_plugins,
                tolerate_missing_plugins_annotation: raw.tolerate_missing_plugins_annotation,
            },
            audit_file: raw.audit_file.filter(|p| !p.as_os_str().is_empty()),
            rules,
        })
    }

    /// `file:line` of a rule, for citations.
    pub fn cite(&self, rule: &Rule) -> String {
        format!("{}:{}", self.source, rule.line)
    }
}

/// The YAML error text without its trailing ` at line L column C`.
fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => {
            let rest = &msg[i + " at line ".len()..];
            // `<line> column <col>` possibly followed by more text.
            let after = rest
                .split_once(" column ")
                .map(|(_, c)| c.trim_start_matches(|ch: char| ch.is_ascii_digit()))
                .unwrap_or("");
            format!("{}{}", &msg[..i], after)
        }
        None => msg.to_owned(),
    }
}

/// The 1-based line of a top-level `key:`.
fn top_level_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// The 1-based line of each item of the top-level `rules:` block sequence:
/// the lines whose first non-blank character is the `-` at the indentation
/// of the first item. A flow sequence (`rules: [...]`) gives the line of
/// `rules:` for every rule.
fn rule_lines(text: &str) -> Vec<usize> {
    let Some(start) = top_level_key_line(text, "rules") else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.get(start - 1).copied().unwrap_or("");
    let after_colon = head.split_once(':').map_or("", |(_, r)| r).trim();
    if after_colon.starts_with('[') {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut indent: Option<usize> = None;
    for (i, line) in lines.iter().enumerate().skip(start) {
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let ind = line.len() - body.len();
        if ind == 0 && !body.starts_with('-') {
            break; // the next top-level key
        }
        let is_item = body == "-" || body.starts_with("- ");
        match indent {
            None if is_item => {
                indent = Some(ind);
                out.push(i + 1);
            }
            Some(n) if is_item && ind == n => out.push(i + 1),
            Some(n) if ind < n => break,
            _ => {}
        }
    }
    out
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_lines_block_and_flow() {
        let text = "mode: enforce\nrules:\n  # c\n  - name: a\n    allow:\n      env: [X]\n  - name: b\n\n  -\n    name: c\ndefault: deny\n";
        assert_eq!(rule_lines(text), [4, 7, 9]);
        assert_eq!(top_level_key_line(text, "default"), Some(11));
        let flush = "rules:\n- name: a\n- name: b\n";
        assert_eq!(rule_lines(flush), [2, 3]);
        assert!(rule_lines("rules: [{name: a}]\n").is_empty());
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("512Mi"), Some(512 << 20));
        assert_eq!(parse_quantity("2G"), Some(2_000_000_000));
        assert_eq!(parse_quantity("-5"), Some(-5));
        assert_eq!(parse_quantity("x"), None);
    }

    #[test]
    fn errors_have_positions() {
        let e = Policy::from_yaml_str(
            "mode: enforce\nrules:\n  - allow:\n      resources: {cpus: {within: 1-x}}\n",
            "f",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("f:4:"), "{s}");
        assert!(s.contains("invalid CPU list"), "{s}");
        let e = Policy::from_yaml_str("mode: sometimes\n", "f").unwrap_err();
        assert!(e.to_string().starts_with("f:1:7: "), "{e}");
        let e = Policy::from_yaml_str(
            "rules:\n  - deny:\n      oomScoreAdj: {min: 5, max: 1}\n",
            "f",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("f:3:"), "{e}");
        assert!(e.to_string().contains("min 5 is above max 1"), "{e}");
    }

    #[test]
    fn path_prefixes_by_component() {
        let p = PathPrefix("/var/lib/foo".into());
        assert!(p.covers("/var/lib/foo"));
        assert!(p.covers("/var/lib/foo/x"));
        assert!(!p.covers("/var/lib/foobar"));
        assert!(!p.covers("/var/lib/foo/../../etc"));
        assert!(!p.covers("var/lib/foo"));
        assert!(PathPrefix("/".into()).covers("/etc"));
    }
}
