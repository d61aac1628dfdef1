//! Which plugins registered: the adaptation reports each `RegisterPlugin`
//! it accepts as the `tracing` event "plugin registered" (field `plugin`,
//! the full name). This layer hands those names to the recorder, the
//! counterpart of the reference runner's ttRPC server interceptor.

use std::fmt::Debug;
use std::sync::Arc;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use crate::record::Recorder;

/// The message the adaptation logs for an accepted registration.
const REGISTERED: &str = "plugin registered";

pub struct Registrations(pub Arc<Recorder>);

#[derive(Default)]
struct Fields {
    message: String,
    plugin: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "plugin" => self.plugin = value.to_string(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "plugin" => self.plugin = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for Registrations {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !event.metadata().target().starts_with("nri_adaptation") {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message == REGISTERED && !fields.plugin.is_empty() {
            self.0.add_plugin(&fields.plugin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn only_registration_events_of_the_adaptation_count() {
        let rec = Arc::new(Recorder::default());
        let subscriber = tracing_subscriber::registry().with(Registrations(rec.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let name = "10-x".to_string();
            tracing::info!(target: "nri_adaptation::plugin::remote", plugin = %name, "plugin registered");
            tracing::info!(target: "nri_adaptation::plugin", plugin = "20-y", "plugin configured");
            tracing::info!(plugin = "30-z", "plugin registered");
        });
        let mut out = crate::record::Output::default();
        rec.fill(&mut out);
        assert_eq!(out.plugins, ["10-x"]);
    }
}
