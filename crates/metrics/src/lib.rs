//! Prometheus/OpenMetrics metrics of NRI plugin calls.
//!
//! [`NriMetrics`] is an [`nri_adaptation::Metrics`] sink: hand it to
//! [`AdaptationBuilder::metrics`](nri_adaptation::AdaptationBuilder::metrics)
//! or to `nri_integration::NriBuilder::metrics`, then either
//! [`encode`](NriMetrics::encode) the OpenMetrics text exposition (for a
//! `/metrics` endpoint), [`register`](NriMetrics::register) the metrics in
//! the runtime's own [`Registry`], or read the figures in code
//! ([`invocations`](NriMetrics::invocations),
//! [`latency`](NriMetrics::latency), ...).
//!
//! The names and labels of the metrics containerd exports for NRI are kept
//! (`plugin_invocations_total`, `plugin_latency_seconds`,
//! `plugin_adjustments_total`, `active_plugins_total`), so dashboards built
//! for containerd carry over; the others are additions. With the default
//! prefix every name starts with `nri_`; [`NriMetrics::with_prefix`]`
//! ("containerd")` gives exactly containerd's `containerd_nri_` names. The
//! full list is in [`METRIC_NAMES`].
//!
//! ```
//! use std::sync::Arc;
//! use nri_adaptation::Metrics;
//! use nri_metrics::NriMetrics;
//!
//! let metrics = Arc::new(NriMetrics::new());
//! // The adaptation calls these; here by hand.
//! metrics.record_plugin_invocation("10-logger", "CreateContainer", None);
//! metrics.record_plugin_latency("10-logger", "CreateContainer",
//!     std::time::Duration::from_micros(250));
//! assert_eq!(metrics.invocations("10-logger", "CreateContainer", "success", ""), 1);
//! assert_eq!(metrics.latency("10-logger", "CreateContainer").count, 1);
//! let text = metrics.encode();
//! assert!(text.contains(
//!     r#"nri_plugin_invocations_total{plugin="10-logger",operation="CreateContainer",status="success",error=""} 1"#));
//! ```

pub mod http;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{AskedFor, Metrics, PluginError, SyncStats};
use nri_api::{ContainerAdjustment, ContainerUpdate, LinuxResources};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

pub use prometheus_client;

/// Upper bounds (seconds) of the latency histograms: 1-2.5-5 steps from
/// 10 µs to 2 s, so a builtin plugin's few microseconds and a slow external
/// plugin's second both land in a bucket of their own.
pub const LATENCY_BUCKETS: [f64; 17] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0,
];

/// Every metric family [`NriMetrics`] exports, as named in the exposition
/// with the default prefix (histograms add `_bucket`, `_sum`, `_count`).
pub const METRIC_NAMES: [&str; 13] = [
    "nri_plugin_invocations_total",
    "nri_plugin_latency_seconds",
    "nri_plugin_adjustments_total",
    "nri_active_plugins_total",
    "nri_plugin_adjustment_fields_total",
    "nri_plugin_update_fields_total",
    "nri_plugin_registrations_total",
    "nri_plugin_restarts_total",
    "nri_plugin_timeouts_total",
    "nri_plugin_drops_total",
    "nri_plugin_synchronize_duration_seconds",
    "nri_plugin_synchronize_objects",
    "nri_plugin_synchronize_messages_total",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InvocationLabels {
    plugin: String,
    operation: String,
    status: String,
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    plugin: String,
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    plugin: String,
    operation: String,
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FieldLabels {
    plugin: String,
    operation: String,
    field: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    plugin: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    plugin: String,
    kind: String,
}

/// A histogram that can also be read in code: prometheus-client's
/// [`Histogram`] plus its count and an integer sum (nanoseconds for
/// durations, objects for sizes).
#[derive(Clone, Debug)]
struct Readable {
    histogram: Histogram,
    count: Arc<AtomicU64>,
    sum: Arc<AtomicU64>,
}

impl Readable {
    fn new(buckets: &[f64]) -> Self {
        Readable {
            histogram: Histogram::new(buckets.iter().copied()),
            count: Arc::default(),
            sum: Arc::default(),
        }
    }

    fn observe(&self, value: f64, raw: u64) {
        self.histogram.observe(value);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(raw, Ordering::Relaxed);
    }

    fn observe_duration(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.observe(d.as_secs_f64(), nanos);
    }

    fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: Duration::from_nanos(self.sum.load(Ordering::Relaxed)).as_secs_f64(),
        }
    }
}

impl TypedMetric for Readable {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Readable {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.histogram.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type HistogramFamily<L> = Family<L, Readable, fn() -> Readable>;

fn latency_histogram() -> Readable {
    Readable::new(&LATENCY_BUCKETS)
}

/// Bucket bounds of the synchronization size histogram: 0, 1, 4, ...
/// 65536 pods or containers.
const OBJECT_BUCKETS: [f64; 10] = [
    0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

fn object_histogram() -> Readable {
    Readable::new(&OBJECT_BUCKETS)
}

/// Count and sum of one latency histogram, read with
/// [`NriMetrics::latency`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    /// Observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

/// The metrics of one adaptation (or of several: every method is cheap and
/// thread-safe; clones share the figures).
///
/// See the [crate documentation](crate) for an example.
#[derive(Clone)]
pub struct NriMetrics {
    prefix: String,
    invocations: Family<InvocationLabels, Counter>,
    latency: HistogramFamily<OpLabels>,
    adjustments: Family<TypeLabels, Counter>,
    active: Gauge,
    adjustment_fields: Family<FieldLabels, Counter>,
    update_fields: Family<FieldLabels, Counter>,
    registrations: Family<PluginLabels, Counter>,
    restarts: Family<PluginLabels, Counter>,
    timeouts: Family<OpLabels, Counter>,
    drops: Family<PluginLabels, Counter>,
    sync_duration: HistogramFamily<SyncLabels>,
    sync_objects: HistogramFamily<ObjectLabels>,
    sync_messages: Family<PluginLabels, Counter>,
}

impl Default for NriMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for NriMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NriMetrics")
            .field("prefix", &self.prefix)
            .field("active_plugins", &self.active.get())
            .finish_non_exhaustive()
    }
}

impl NriMetrics {
    /// Metrics named `nri_*`.
    pub fn new() -> Self {
        Self::with_prefix("")
    }

    /// Metrics named `<prefix>_nri_*` (`containerd` gives containerd's
    /// names); an empty prefix gives `nri_*`.
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        NriMetrics {
            prefix: prefix.into(),
            invocations: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            adjustments: Family::default(),
            active: Gauge::default(),
            adjustment_fields: Family::default(),
            update_fields: Family::default(),
            registrations: Family::default(),
            restarts: Family::default(),
            timeouts: Family::default(),
            drops: Family::default(),
            sync_duration: Family::new_with_constructor(latency_histogram),
            sync_objects: Family::new_with_constructor(object_histogram),
            sync_messages: Family::default(),
        }
    }

    /// Registers every metric in `registry` under this instance's prefix
    /// and `nri`. The figures stay shared with `self`.
    pub fn register(&self, registry: &mut Registry) {
        let reg = if self.prefix.is_empty() {
            registry.sub_registry_with_prefix("nri")
        } else {
            registry
                .sub_registry_with_prefix(&self.prefix)
                .sub_registry_with_prefix("nri")
        };
        reg.register(
            "plugin_invocations",
            "Number of NRI plugin invocations",
            self.invocations.clone(),
        );
        reg.register_with_unit(
            "plugin_latency",
            "NRI plugin operation latency",
            Unit::Seconds,
            self.latency.clone(),
        );
        reg.register(
            "plugin_adjustments",
            "Number of adjustment operations from plugins",
            self.adjustments.clone(),
        );
        // containerd names this gauge with a `_total` suffix; kept for
        // dashboards that query it.
        reg.register(
            "active_plugins_total",
            "Number of currently active NRI plugins",
            self.active.clone(),
        );
        reg.register(
            "plugin_adjustment_fields",
            "Container adjustments from plugins, by adjusted field",
            self.adjustment_fields.clone(),
        );
        reg.register(
            "plugin_update_fields",
            "Container updates requested by plugins, by updated field",
            self.update_fields.clone(),
        );
        reg.register(
            "plugin_registrations",
            "Successful registrations of external and launched plugins",
            self.registrations.clone(),
        );
        reg.register(
            "plugin_restarts",
            "Restarts of launched plugins",
            self.restarts.clone(),
        );
        reg.register(
            "plugin_timeouts",
            "Plugin calls that timed out",
            self.timeouts.clone(),
        );
        reg.register(
            "plugin_drops",
            "Plugins dropped from the plugin list after a failure",
            self.drops.clone(),
        );
        reg.register_with_unit(
            "plugin_synchronize_duration",
            "Duration of plugin synchronizations, all messages included",
            Unit::Seconds,
            self.sync_duration.clone(),
        );
        reg.register(
            "plugin_synchronize_objects",
            "Pods and containers sent to a plugin in one synchronization",
            self.sync_objects.clone(),
        );
        reg.register(
            "plugin_synchronize_messages",
            "Synchronize requests sent (more than one per synchronization when split)",
            self.sync_messages.clone(),
        );
    }

    /// The OpenMetrics text exposition of these metrics alone (ends with
    /// `# EOF`); serve it as [`CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    /// Calls of `operation` to `plugin` that ended with `status`
    /// (`success` or `error`) and error kind `error` (empty on success; else
    /// a gRPC code in snake case such as `deadline_exceeded`, or `other`).
    pub fn invocations(&self, plugin: &str, operation: &str, status: &str, error: &str) -> u64 {
        self.invocations
            .get(&InvocationLabels {
                plugin: plugin.into(),
                operation: operation.into(),
                status: status.into(),
                error: error.into(),
            })
            .map_or(0, |c| c.get())
    }

    /// Count and sum of the latency of `operation` calls to `plugin`.
    pub fn latency(&self, plugin: &str, operation: &str) -> LatencySummary {
        self.latency
            .get(&op(plugin, operation))
            .map_or_else(LatencySummary::default, |h| h.summary())
    }

    /// Adjustments counted by containerd's `type` label: `update` or
    /// `evict`.
    pub fn adjustments(&self, plugin: &str, operation: &str, kind: &str) -> u64 {
        self.adjustments
            .get(&TypeLabels {
                plugin: plugin.into(),
                operation: operation.into(),
                r#type: kind.into(),
            })
            .map_or(0, |c| c.get())
    }

    /// How often `plugin`'s replies to `operation` adjusted `field` (names
    /// as in [`adjustment_fields`]).
    pub fn adjustment_fields(&self, plugin: &str, operation: &str, field: &str) -> u64 {
        self.adjustment_fields
            .get(&field_labels(plugin, operation, field))
            .map_or(0, |c| c.get())
    }

    /// How many container updates from `plugin`'s replies to `operation`
    /// changed `field` (names as in [`update_fields`]).
    pub fn update_fields(&self, plugin: &str, operation: &str, field: &str) -> u64 {
        self.update_fields
            .get(&field_labels(plugin, operation, field))
            .map_or(0, |c| c.get())
    }

    /// The number of active plugins.
    pub fn active_plugins(&self) -> i64 {
        self.active.get()
    }

    /// Successful registrations of `plugin`.
    pub fn registrations(&self, plugin: &str) -> u64 {
        get_plugin(&self.registrations, plugin)
    }

    /// Restarts of `plugin`.
    pub fn restarts(&self, plugin: &str) -> u64 {
        get_plugin(&self.restarts, plugin)
    }

    /// Timed-out `operation` calls to `plugin`.
    pub fn timeouts(&self, plugin: &str, operation: &str) -> u64 {
        self.timeouts
            .get(&op(plugin, operation))
            .map_or(0, |c| c.get())
    }

    /// Times `plugin` was dropped after a failure.
    pub fn drops(&self, plugin: &str) -> u64 {
        get_plugin(&self.drops, plugin)
    }

    /// Synchronizations of `plugin` that ended with `status` (`success` or
    /// `error`): count and total duration.
    pub fn synchronizations(&self, plugin: &str, status: &str) -> LatencySummary {
        self.sync_duration
            .get(&SyncLabels {
                plugin: plugin.into(),
                status: status.into(),
            })
            .map_or_else(LatencySummary::default, |h| h.summary())
    }

    /// Pods (`kind` `pod`) or containers (`container`) sent to `plugin` in
    /// all its synchronizations.
    pub fn synchronized_objects(&self, plugin: &str, kind: &str) -> u64 {
        self.sync_objects
            .get(&ObjectLabels {
                plugin: plugin.into(),
                kind: kind.into(),
            })
            .map_or(0, |h| h.sum.load(Ordering::Relaxed))
    }

    /// Synchronize requests sent to `plugin`.
    pub fn synchronize_messages(&self, plugin: &str) -> u64 {
        get_plugin(&self.sync_messages, plugin)
    }
}

/// The HTTP content type of [`NriMetrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn op(plugin: &str, operation: &str) -> OpLabels {
    OpLabels {
        plugin: plugin.into(),
        operation: operation.into(),
    }
}

fn field_labels(plugin: &str, operation: &str, field: &str) -> FieldLabels {
    FieldLabels {
        plugin: plugin.into(),
        operation: operation.into(),
        field: field.into(),
    }
}

fn get_plugin(f: &Family<PluginLabels, Counter>, plugin: &str) -> u64 {
    f.get(&PluginLabels {
        plugin: plugin.into(),
    })
    .map_or(0, |c| c.get())
}

/// The error kind label of a failed call, as containerd computes it: a
/// deadline is `deadline_exceeded`, a ttRPC status its gRPC code in snake
/// case, anything else (closed connection, protocol error, a builtin
/// plugin's error) `other`.
///
/// ```
/// use nri_adaptation::PluginError;
/// assert_eq!(nri_metrics::error_kind(&PluginError::Timeout), "deadline_exceeded");
/// ```
pub fn error_kind(err: &(dyn std::error::Error + 'static)) -> &'static str {
    use nri_ttrpc::Error as E;
    match err.downcast_ref::<PluginError>() {
        Some(PluginError::Timeout) | Some(PluginError::Rpc(E::Timeout)) => "deadline_exceeded",
        Some(PluginError::Rpc(E::Status(st))) => code_name(st.code()),
        Some(PluginError::Rpc(E::Oversized { .. })) => "resource_exhausted",
        _ => match err.downcast_ref::<E>() {
            Some(E::Timeout) => "deadline_exceeded",
            Some(E::Status(st)) => code_name(st.code()),
            _ => "other",
        },
    }
}

fn code_name(code: nri_ttrpc::Code) -> &'static str {
    use nri_ttrpc::Code as C;
    match code {
        C::Ok => "ok",
        C::Cancelled => "canceled",
        C::Unknown => "unknown",
        C::InvalidArgument => "invalid_argument",
        C::DeadlineExceeded => "deadline_exceeded",
        C::NotFound => "not_found",
        C::AlreadyExists => "already_exists",
        C::PermissionDenied => "permission_denied",
        C::ResourceExhausted => "resource_exhausted",
        C::FailedPrecondition => "failed_precondition",
        C::Aborted => "aborted",
        C::OutOfRange => "out_of_range",
        C::Unimplemented => "unimplemented",
        C::Internal => "internal",
        C::Unavailable => "unavailable",
        C::DataLoss => "data_loss",
        C::Unauthenticated => "unauthenticated",
        #[allow(unreachable_patterns)]
        _ => "unknown_code",
    }
}

/// The fields an adjustment sets, by the names the `field` label uses
/// (`annotations`, `mounts`, `env`, `hooks`, `rlimits`, `cdi_devices`,
/// `args`, `linux.devices`, `linux.cgroups_path`, `linux.oom_score_adj`,
/// `linux.io_priority`, `linux.seccomp_policy`, `linux.namespaces`,
/// `linux.sysctl`, `linux.net_devices`, `linux.scheduler`, `linux.rdt`,
/// `linux.memory_policy`, and `resources.*` as in [`update_fields`]).
///
/// ```
/// use nri_api::{ContainerAdjustment, KeyValue};
/// let adj = ContainerAdjustment {
///     env: vec![KeyValue { key: "A".into(), value: "1".into() }],
///     ..Default::default()
/// };
/// assert_eq!(nri_metrics::adjustment_fields(&adj), ["env"]);
/// ```
pub fn adjustment_fields(a: &ContainerAdjustment) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut add = |cond: bool, name: &'static str| {
        if cond {
            out.push(name);
        }
    };
    add(!a.annotations.is_empty(), "annotations");
    add(!a.mounts.is_empty(), "mounts");
    add(!a.env.is_empty(), "env");
    add(a.hooks.is_some(), "hooks");
    add(!a.rlimits.is_empty(), "rlimits");
    add(!a.cdi_devices.is_empty(), "cdi_devices");
    add(!a.args.is_empty(), "args");
    if let Some(l) = &a.linux {
        add(!l.devices.is_empty(), "linux.devices");
        add(!l.cgroups_path.is_empty(), "linux.cgroups_path");
        add(l.oom_score_adj.is_some(), "linux.oom_score_adj");
        add(l.io_priority.is_some(), "linux.io_priority");
        add(l.seccomp_policy.is_some(), "linux.seccomp_policy");
        add(!l.namespaces.is_empty(), "linux.namespaces");
        add(!l.sysctl.is_empty(), "linux.sysctl");
        add(!l.net_devices.is_empty(), "linux.net_devices");
        add(l.scheduler.is_some(), "linux.scheduler");
        add(l.rdt.is_some(), "linux.rdt");
        add(l.memory_policy.is_some(), "linux.memory_policy");
        if let Some(r) = &l.resources {
            out.extend(resource_fields(r));
        }
    }
    out
}

/// The resource fields a container update sets: `resources.memory`,
/// `resources.cpu`, `resources.hugepage_limits`, `resources.blockio_class`,
/// `resources.rdt_class`, `resources.unified`, `resources.devices`,
/// `resources.pids`.
///
/// ```
/// use nri_api::{ContainerUpdate, LinuxContainerUpdate, LinuxResources, LinuxPids};
/// let u = ContainerUpdate {
///     linux: Some(LinuxContainerUpdate {
///         resources: Some(LinuxResources {
///             pids: Some(LinuxPids { limit: 10 }),
///             ..Default::default()
///         }),
///     }),
///     ..Default::default()
/// };
/// assert_eq!(nri_metrics::update_fields(&u), ["resources.pids"]);
/// ```
pub fn update_fields(u: &ContainerUpdate) -> Vec<&'static str> {
    u.linux
        .as_ref()
        .and_then(|l| l.resources.as_ref())
        .map(resource_fields)
        .unwrap_or_default()
}

fn resource_fields(r: &LinuxResources) -> Vec<&'static str> {
    [
        (r.memory.is_some(), "resources.memory"),
        (r.cpu.is_some(), "resources.cpu"),
        (!r.hugepage_limits.is_empty(), "resources.hugepage_limits"),
        (r.blockio_class.is_some(), "resources.blockio_class"),
        (r.rdt_class.is_some(), "resources.rdt_class"),
        (!r.unified.is_empty(), "resources.unified"),
        (!r.devices.is_empty(), "resources.devices"),
        (r.pids.is_some(), "resources.pids"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

impl Metrics for NriMetrics {
    fn record_plugin_invocation(
        &self,
        plugin: &str,
        operation: &str,
        error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        let (status, kind) = match error {
            None => ("success", ""),
            Some(e) => ("error", error_kind(e)),
        };
        self.invocations
            .get_or_create(&InvocationLabels {
                plugin: plugin.into(),
                operation: operation.into(),
                status: status.into(),
                error: kind.into(),
            })
            .inc();
        if kind == "deadline_exceeded" {
            self.timeouts.get_or_create(&op(plugin, operation)).inc();
        }
    }

    fn record_plugin_latency(&self, plugin: &str, operation: &str, latency: Duration) {
        self.latency
            .get_or_create(&op(plugin, operation))
            .observe_duration(latency);
    }

    fn record_plugin_adjustments(&self, plugin: &str, operation: &str, asked: AskedFor<'_>) {
        for (kind, n) in [("update", asked.updates), ("evict", asked.evictions)] {
            if n > 0 {
                self.adjustments
                    .get_or_create(&TypeLabels {
                        plugin: plugin.into(),
                        operation: operation.into(),
                        r#type: kind.into(),
                    })
                    .inc_by(n as u64);
            }
        }
        if let Some(a) = asked.adjust {
            for field in adjustment_fields(a) {
                self.adjustment_fields
                    .get_or_create(&field_labels(plugin, operation, field))
                    .inc();
            }
        }
    }

    fn record_plugin_updates(&self, plugin: &str, operation: &str, updates: &[ContainerUpdate]) {
        for u in updates {
            for field in update_fields(u) {
                self.update_fields
                    .get_or_create(&field_labels(plugin, operation, field))
                    .inc();
            }
        }
    }

    fn record_plugin_restart(&self, plugin: &str) {
        self.restarts
            .get_or_create(&PluginLabels {
                plugin: plugin.into(),
            })
            .inc();
    }

    fn update_plugin_count(&self, count: usize) {
        self.active.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    fn record_plugin_registration(&self, plugin: &str) {
        self.registrations
            .get_or_create(&PluginLabels {
                plugin: plugin.into(),
            })
            .inc();
    }

    fn record_plugin_drop(&self, plugin: &str) {
        self.drops
            .get_or_create(&PluginLabels {
                plugin: plugin.into(),
            })
            .inc();
    }

    fn record_plugin_synchronize(&self, sync: &SyncStats<'_>) {
        let status = if sync.ok { "success" } else { "error" };
        self.sync_duration
            .get_or_create(&SyncLabels {
                plugin: sync.plugin.into(),
                status: status.into(),
            })
            .observe_duration(sync.duration);
        for (kind, n) in [("pod", sync.pods), ("container", sync.containers)] {
            self.sync_objects
                .get_or_create(&ObjectLabels {
                    plugin: sync.plugin.into(),
                    kind: kind.into(),
                })
                .observe(n as f64, n as u64);
        }
        self.sync_messages
            .get_or_create(&PluginLabels {
                plugin: sync.plugin.into(),
            })
            .inc_by(sync.messages as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_in_the_exposition_with_help() {
        let m = NriMetrics::new();
        fill(&m);
        let text = m.encode();
        for name in METRIC_NAMES {
            let bare = name.strip_suffix("_total").unwrap_or(name);
            // The gauge keeps containerd's `_total` in its family name.
            let family = if name == "nri_active_plugins_total" {
                name
            } else {
                bare
            };
            assert!(
                text.contains(&format!("# HELP {family} ")),
                "{name} missing in\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"));
    }

    /// One of every measurement, as the adaptation makes them.
    fn fill(m: &NriMetrics) {
        m.record_plugin_invocation("p", "CreateContainer", Some(&PluginError::Timeout));
        m.record_plugin_latency("p", "CreateContainer", Duration::from_millis(1));
        let adj = ContainerAdjustment {
            env: vec![nri_api::KeyValue::default()],
            ..Default::default()
        };
        let asked = AskedFor {
            adjust: Some(&adj),
            updates: 1,
            evictions: 1,
        };
        m.record_plugin_adjustments("p", "CreateContainer", asked);
        let upd = ContainerUpdate {
            linux: Some(nri_api::LinuxContainerUpdate {
                resources: Some(LinuxResources {
                    pids: Some(nri_api::LinuxPids { limit: 1 }),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        m.record_plugin_updates("p", "CreateContainer", &[upd]);
        m.record_plugin_restart("p");
        m.update_plugin_count(1);
        m.record_plugin_registration("p");
        m.record_plugin_drop("p");
        m.record_plugin_synchronize(&SyncStats {
            plugin: "p",
            pods: 1,
            containers: 2,
            messages: 1,
            duration: Duration::from_millis(2),
            ok: true,
        });
    }

    /// Every PromQL expression of a Grafana dashboard (panel targets and
    /// variable queries).
    fn expressions(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => expressions(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| expressions(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_metric_the_dashboard_queries_is_exported() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/nri-dashboard.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut exprs = Vec::new();
        expressions(&dashboard, &mut exprs);
        assert!(exprs.len() > 10, "{exprs:?}");
        for (prefix, metrics) in [
            ("nri", NriMetrics::new()),
            ("containerd_nri", NriMetrics::with_prefix("containerd")),
        ] {
            fill(&metrics);
            let exposition = metrics.encode();
            let samples: std::collections::BTreeSet<&str> = exposition
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split(['{', ' ']).next())
                .collect();
            let mut queried = std::collections::BTreeSet::new();
            for e in &exprs {
                let e = e.replace("${prefix}", prefix);
                for word in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if word.starts_with(&format!("{prefix}_")) {
                        assert!(
                            samples.contains(word),
                            "{word} (in {e}) is not exported:\n{exposition}"
                        );
                        queried.insert(word.to_string());
                    }
                }
            }
            // And the dashboard shows every family.
            for name in METRIC_NAMES {
                let name = name.replacen("nri", prefix, 1);
                assert!(
                    queried.iter().any(|q| q.starts_with(&name)),
                    "{name} not on the dashboard"
                );
            }
        }
    }

    #[test]
    fn containerd_prefix_gives_containerd_names() {
        let m = NriMetrics::with_prefix("containerd");
        m.update_plugin_count(2);
        m.record_plugin_latency("a", "Synchronize", Duration::from_millis(3));
        let text = m.encode();
        assert!(
            text.contains("containerd_nri_active_plugins_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"containerd_nri_plugin_latency_seconds_bucket{le="0.005",plugin="a",operation="Synchronize"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"containerd_nri_plugin_latency_seconds_bucket{le="0.0025",plugin="a",operation="Synchronize"} 0"#
            ),
            "{text}"
        );
    }

    #[test]
    fn buckets_resolve_ten_microseconds_to_two_seconds() {
        let m = NriMetrics::new();
        m.record_plugin_latency("p", "X", Duration::from_micros(9));
        m.record_plugin_latency("p", "X", Duration::from_micros(20));
        m.record_plugin_latency("p", "X", Duration::from_millis(1500));
        let text = m.encode();
        let bucket = |le: &str| {
            let key = format!(
                r#"nri_plugin_latency_seconds_bucket{{le="{le}",plugin="p",operation="X"}} "#
            );
            let line = text
                .lines()
                .find(|l| l.starts_with(&key))
                .unwrap_or_else(|| panic!("{key} in {text}"));
            line[key.len()..].parse::<u64>().unwrap()
        };
        assert_eq!(bucket("0.00001"), 1);
        assert_eq!(bucket("0.000025"), 2);
        assert_eq!(bucket("1.0"), 2);
        assert_eq!(bucket("2.0"), 3);
        assert_eq!(m.latency("p", "X").count, 3);
    }

    #[test]
    fn error_kinds_follow_containerd() {
        let st = nri_ttrpc::Status::new(nri_ttrpc::Code::InvalidArgument, "no");
        let e = PluginError::Rpc(nri_ttrpc::Error::Status(st));
        assert_eq!(error_kind(&e), "invalid_argument");
        assert_eq!(
            error_kind(&PluginError::Rpc(nri_ttrpc::Error::Timeout)),
            "deadline_exceeded"
        );
        assert_eq!(
            error_kind(&PluginError::Rpc(nri_ttrpc::Error::Closed)),
            "other"
        );
        let m = NriMetrics::new();
        m.record_plugin_invocation("p", "StopContainer", Some(&PluginError::Timeout));
        assert_eq!(
            m.invocations("p", "StopContainer", "error", "deadline_exceeded"),
            1
        );
        assert_eq!(m.timeouts("p", "StopContainer"), 1);
        assert_eq!(m.timeouts("p", "CreateContainer"), 0);
    }
}

/// The examples of the README, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
