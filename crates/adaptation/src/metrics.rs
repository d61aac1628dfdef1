//! [`Metrics`]: what the adaptation reports about plugin calls.

use std::time::Duration;

use nri_api::ContainerAdjustment;

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
/// the plugin count after every change of the plugin list.
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
    fn record_plugin_adjustments(
        &self,
        plugin: &str,
        operation: &str,
        adjust: Option<&ContainerAdjustment>,
        updates: usize,
        evictions: usize,
    ) {
        let _ = (plugin, operation, adjust, updates, evictions);
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
}

/// The default [`Metrics`]: records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl Metrics for NoMetrics {}
