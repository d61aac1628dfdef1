//! [`Metrics`]: what the adaptation reports about plugin calls.

use std::time::Duration;

use std::sync::Arc;

use nri_api::{ContainerAdjustment, ContainerUpdate};

/// What a plugin asked for in one successful reply
/// ([`Metrics::record_plugin_adjustments`]).
///
/// ```
/// let asked = nri_adaptation::AskedFor { adjust: None, updates: 2, evictions: 0 };
/// assert_eq!(asked.updates + asked.evictions, 2);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AskedFor<'a> {
    /// The adjustment of the container (CreateContainer only).
    pub adjust: Option<&'a ContainerAdjustment>,
    /// How many containers it asked to update.
    pub updates: usize,
    /// How many containers it asked to evict.
    pub evictions: usize,
}

/// Receives measurements of plugin calls. Implementations must be cheap and
/// thread-safe; every method defaults to doing nothing.
///
/// * `plugin` is the full name `<idx>-<base>`;
/// * `operation` is the event's name (`CreateContainer`, ...) or
///   `Synchronize`.
///
/// Invocation and latency are recorded once per call attempt to a
/// subscribed plugin, also when it fails; adjustments after successful
/// CreateContainer, UpdateContainer, StopContainer and Synchronize calls;
/// the plugin count after every change of the plugin list. The updates
/// themselves ([`record_plugin_updates`](Self::record_plugin_updates))
/// after every successful reply that asked for some; registrations, drops
/// of failed plugins from the list and the size and duration of every
/// synchronization as they happen.
///
/// Every call site is a single dynamic call with borrowed arguments: the
/// default [`NoMetrics`] costs no allocation and no lock.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use nri_adaptation::Metrics;
///
/// #[derive(Default)]
/// struct Count(AtomicUsize);
///
/// impl Metrics for Count {
///     fn update_plugin_count(&self, count: usize) {
///         self.0.store(count, Ordering::Relaxed);
///     }
/// }
/// let m = Count::default();
/// m.update_plugin_count(3);
/// assert_eq!(m.0.load(Ordering::Relaxed), 3);
/// ```
pub trait Metrics: Send + Sync + 'static {
    /// One call to a plugin, with its error if it failed.
    fn record_plugin_invocation(
        &self,
        plugin: &str,
        operation: &str,
        error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        let _ = (plugin, operation, error);
    }

    /// How long one call to a plugin took.
    fn record_plugin_latency(&self, plugin: &str, operation: &str, latency: Duration) {
        let _ = (plugin, operation, latency);
    }

    /// What a plugin asked for in a successful reply.
    fn record_plugin_adjustments(&self, plugin: &str, operation: &str, asked: AskedFor<'_>) {
        let _ = (plugin, operation, asked);
    }

    /// A plugin launched from the plugin directory was restarted (see
    /// [`RestartPolicy`](crate::RestartPolicy)): it registered and was
    /// synchronized again.
    fn record_plugin_restart(&self, plugin: &str) {
        let _ = plugin;
    }

    /// The number of active plugins.
    fn update_plugin_count(&self, count: usize) {
        let _ = count;
    }

    /// The container updates a plugin asked for in a successful reply
    /// (never called with an empty slice).
    fn record_plugin_updates(&self, plugin: &str, operation: &str, updates: &[ContainerUpdate]) {
        let _ = (plugin, operation, updates);
    }

    /// An external or launched plugin registered (before Configure).
    fn record_plugin_registration(&self, plugin: &str) {
        let _ = plugin;
    }

    /// A plugin was dropped from the plugin list because it failed (closed
    /// connection, timeout, protocol error).
    fn record_plugin_drop(&self, plugin: &str) {
        let _ = plugin;
    }

    /// A synchronization of one plugin finished: the runtime's state it
    /// was sent (`pods`, `containers`, in `messages` Synchronize requests),
    /// how long it took in all, and whether it succeeded.
    fn record_plugin_synchronize(&self, sync: &SyncStats<'_>) {
        let _ = sync;
    }
}

/// One plugin's synchronization, for
/// [`Metrics::record_plugin_synchronize`].
#[derive(Debug, Clone, Copy)]
pub struct SyncStats<'a> {
    /// Full plugin name.
    pub plugin: &'a str,
    /// Pods sent.
    pub pods: usize,
    /// Containers sent.
    pub containers: usize,
    /// Synchronize requests sent (more than one when the state was split).
    pub messages: usize,
    /// From the first request to the last reply.
    pub duration: Duration,
    /// Whether the plugin synchronized successfully.
    pub ok: bool,
}

/// Sends every measurement to each of several [`Metrics`], in order: a
/// runtime's own recorder and a Prometheus exporter, say.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use nri_adaptation::{Metrics, MetricsFanout};
///
/// #[derive(Default)]
/// struct Count(AtomicUsize);
/// impl Metrics for Count {
///     fn update_plugin_count(&self, count: usize) {
///         self.0.store(count, Ordering::Relaxed);
///     }
/// }
/// let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
/// let both = MetricsFanout::new([a.clone() as Arc<dyn Metrics>, b.clone()]);
/// both.update_plugin_count(2);
/// assert_eq!(a.0.load(Ordering::Relaxed) + b.0.load(Ordering::Relaxed), 4);
/// ```
#[derive(Clone, Default)]
pub struct MetricsFanout(Vec<Arc<dyn Metrics>>);

impl MetricsFanout {
    /// Forwards to every one of `sinks`.
    pub fn new(sinks: impl IntoIterator<Item = Arc<dyn Metrics>>) -> Self {
        MetricsFanout(sinks.into_iter().collect())
    }
}

impl std::fmt::Debug for MetricsFanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsFanout")
            .field("sinks", &self.0.len())
            .finish()
    }
}

impl Metrics for MetricsFanout {
    fn record_plugin_invocation(
        &self,
        plugin: &str,
        operation: &str,
        error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_invocation(plugin, operation, error));
    }
    fn record_plugin_latency(&self, plugin: &str, operation: &str, latency: Duration) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_latency(plugin, operation, latency));
    }
    fn record_plugin_adjustments(&self, plugin: &str, operation: &str, asked: AskedFor<'_>) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_adjustments(plugin, operation, asked));
    }
    fn record_plugin_restart(&self, plugin: &str) {
        self.0.iter().for_each(|m| m.record_plugin_restart(plugin));
    }
    fn update_plugin_count(&self, count: usize) {
        self.0.iter().for_each(|m| m.update_plugin_count(count));
    }
    fn record_plugin_updates(&self, plugin: &str, operation: &str, updates: &[ContainerUpdate]) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_updates(plugin, operation, updates));
    }
    fn record_plugin_registration(&self, plugin: &str) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_registration(plugin));
    }
    fn record_plugin_drop(&self, plugin: &str) {
        self.0.iter().for_each(|m| m.record_plugin_drop(plugin));
    }
    fn record_plugin_synchronize(&self, sync: &SyncStats<'_>) {
        self.0
            .iter()
            .for_each(|m| m.record_plugin_synchronize(sync));
    }
}

/// The default [`Metrics`]: records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl Metrics for NoMetrics {}
