//! What the simulator learns from the adaptation while it runs: every
//! plugin call and its result ([`Recorder`], a `Metrics` sink) and the
//! adaptation's log events about plugins ([`LogCapture`], a `tracing`
//! layer), for the report and for progress lines.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nri_adaptation::AskedFor;
use nri_api::ContainerAdjustment;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// One call to one plugin.
#[derive(Debug, Clone)]
pub struct Call {
    /// Full plugin name.
    pub plugin: String,
    /// Event name (`CreateContainer`, `Synchronize`...).
    pub event: String,
    /// The error, if the call failed.
    pub error: Option<String>,
    /// The adjustment the plugin answered (CreateContainer).
    pub adjust: Option<ContainerAdjustment>,
    /// Number of updates it asked for.
    pub updates: usize,
    /// Number of evictions it asked for.
    pub evictions: usize,
}

/// Records plugin calls in order.
#[derive(Default)]
pub struct Recorder {
    calls: Mutex<Vec<Call>>,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Vec<Call>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of calls recorded so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no call was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The calls recorded from position `from` on.
    pub fn since(&self, from: usize) -> Vec<Call> {
        self.lock()
            .get(from..)
            .map(<[Call]>::to_vec)
            .unwrap_or_default()
    }
}

impl nri_adaptation::Metrics for Recorder {
    fn record_plugin_invocation(
        &self,
        plugin: &str,
        operation: &str,
        error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        self.lock().push(Call {
            plugin: plugin.into(),
            event: operation.into(),
            error: error.map(|e| e.to_string()),
            adjust: None,
            updates: 0,
            evictions: 0,
        });
    }

    fn record_plugin_adjustments(&self, plugin: &str, operation: &str, asked: AskedFor<'_>) {
        let mut calls = self.lock();
        if let Some(c) = calls
            .iter_mut()
            .rev()
            .find(|c| c.plugin == plugin && c.event == operation)
        {
            c.adjust = asked.adjust.cloned();
            c.updates = asked.updates;
            c.evictions = asked.evictions;
        }
    }
}

/// A log event of the adaptation about a plugin.
#[derive(Debug, Clone, Default)]
pub struct LogEvent {
    /// Level.
    pub level: String,
    /// Message.
    pub message: String,
    /// The `plugin` field.
    pub plugin: String,
    /// The `error` field.
    pub error: String,
}

/// Called for each captured event (progress output).
pub type Progress = Arc<dyn Fn(&LogEvent) + Send + Sync>;

/// Captures INFO and above events of the NRI crates that name a plugin.
#[derive(Clone)]
pub struct LogCapture {
    events: Arc<Mutex<Vec<LogEvent>>>,
    progress: Option<Progress>,
}

impl LogCapture {
    /// A capture calling `progress` for each event.
    pub fn new(progress: Option<Progress>) -> LogCapture {
        LogCapture {
            events: Arc::default(),
            progress,
        }
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<LogEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last error logged about `plugin` (full name), if any.
    pub fn last_error(&self, plugin: &str) -> Option<String> {
        self.events()
            .into_iter()
            .rev()
            .find(|e| e.plugin == plugin && !e.error.is_empty())
            .map(|e| e.error)
    }
}

impl Visit for LogEvent {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.set(field.name(), format!("{value:?}"));
    }
}

impl LogEvent {
    fn set(&mut self, name: &str, value: String) {
        match name {
            "message" => self.message = value,
            "plugin" => self.plugin = value,
            "error" => self.error = value,
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for LogCapture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if !meta.target().starts_with("nri_") || *meta.level() > Level::INFO {
            return;
        }
        let mut e = LogEvent {
            level: meta.level().to_string(),
            ..Default::default()
        };
        event.record(&mut e);
        if e.plugin.is_empty() {
            return;
        }
        if let Some(p) = &self.progress {
            p(&e);
        }
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_adaptation::Metrics;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn calls_and_adjustments_are_paired() {
        let r = Recorder::default();
        r.record_plugin_invocation("10-a", "CreateContainer", None);
        let mut adj = ContainerAdjustment::default();
        adj.add_annotation("k", "v");
        let asked = AskedFor {
            adjust: Some(&adj),
            updates: 2,
            evictions: 1,
        };
        r.record_plugin_adjustments("10-a", "CreateContainer", asked);
        let err = std::io::Error::other("boom");
        r.record_plugin_invocation("20-b", "CreateContainer", Some(&err));
        let calls = r.since(0);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].adjust.as_ref().unwrap().annotations["k"], "v");
        assert_eq!((calls[0].updates, calls[0].evictions), (2, 1));
        assert_eq!(calls[1].error.as_deref(), Some("boom"));
        assert_eq!(r.since(1).len(), 1);
        assert!(r.since(5).is_empty());
    }

    #[test]
    fn only_plugin_events_of_nri_crates_are_captured() {
        let cap = LogCapture::new(None);
        let sub = tracing_subscriber::registry().with(cap.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(target: "nri_adaptation::x", plugin = "10-a", error = "bad", "failed");
            tracing::warn!(target: "other", plugin = "10-a", "ignored");
            tracing::info!(target: "nri_adaptation::x", "no plugin");
        });
        let ev = cap.events();
        assert_eq!(ev.len(), 1);
        assert_eq!(cap.last_error("10-a").as_deref(), Some("bad"));
    }
}
