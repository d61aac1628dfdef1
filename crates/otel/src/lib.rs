//! OpenTelemetry export of the NRI trace spans.
//!
//! `nri-adaptation` runs every runtime request in a `nri.request` span and
//! every plugin call in a `nri.plugin_call` span; `nri-stub` runs every
//! request a plugin handles in a `nri.plugin_request` span. These are plain
//! `tracing` spans that carry their W3C ids as fields (`trace_id`,
//! `span_id`, `parent_span_id`), and those ids are the ones that cross the
//! wire in ttRPC metadata (`traceparent`). [`OtelLayer`] is a
//! `tracing-subscriber` layer that turns them into OpenTelemetry spans
//! **with exactly those ids**, so that:
//!
//! * a request the runtime made within its own trace (its CRI span passed
//!   with `with_trace_parent`) is exported in that trace, as a child of the
//!   runtime's span;
//! * a plugin's `nri.plugin_request` span is exported as a child of the
//!   runtime's `nri.plugin_call` span, in the same trace, whether the
//!   runtime is ours or containerd with `otelttrpc` interceptors.
//!
//! Spans opened inside one of those spans (a plugin handler's own spans,
//! for instance) are exported as its children; other spans are left alone.
//!
//! [`otlp`] builds the layer with an OTLP/HTTP (protobuf) exporter behind
//! OpenTelemetry's batch span processor; [`OtelLayer::new`] takes any
//! [`SpanProcessor`] (the tests use the SDK's in-memory exporter).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # fn main() -> Result<(), nri_otel::Error> {
//! let (layer, export) = nri_otel::otlp("http://127.0.0.1:4318", "my-runtime")?;
//! tracing_subscriber::registry().with(layer).init();
//! // ... run the runtime; at exit, send what is still buffered:
//! export.shutdown();
//! # Ok(())
//! # }
//! ```
//!
//! The ids are not re-derived from OpenTelemetry's own context: the
//! OpenTelemetry SDK tracer always draws new span ids, and the exported
//! span of a plugin call must carry the span id that was sent to the
//! plugin. That is why this crate builds the exported span data itself
//! instead of going through a tracer (or `tracing-opentelemetry`).

mod http;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks,
    SpanProcessor,
};
use opentelemetry_sdk::Resource;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Record};
use tracing::{Id, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

pub use http::PlainHttpClient;
pub use opentelemetry_sdk;

/// The path OTLP/HTTP receivers take traces on.
pub const TRACES_PATH: &str = "/v1/traces";

/// The prefix of the names of the spans NRI emits; the attributes of these
/// spans are named after their fields with the same prefix (`nri.plugin`,
/// `nri.event`, `nri.pod`, `nri.container`, `nri.outcome`).
pub const SPAN_PREFIX: &str = "nri.";

/// Why the export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not an `http://` URL or `host:port`.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The OTLP exporter refused the configuration.
    #[error("OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The full URL traces are posted to, from an endpoint given as
/// `host:port`, `http://host:port` (the traces path is added) or a URL with
/// a path (used as is). Only plain HTTP is supported: point it at a
/// collector on the node (or a sidecar) that forwards over TLS if needed.
///
/// ```
/// use nri_otel::traces_url;
///
/// assert_eq!(traces_url("127.0.0.1:4318").unwrap(), "http://127.0.0.1:4318/v1/traces");
/// assert_eq!(traces_url("http://collector:4318/").unwrap(), "http://collector:4318/v1/traces");
/// assert_eq!(traces_url("http://c:80/otlp/traces").unwrap(), "http://c:80/otlp/traces");
/// assert!(traces_url("https://collector:4318").is_err());
/// assert!(traces_url("").is_err());
/// ```
pub fn traces_url(endpoint: &str) -> Result<String, Error> {
    let bad = |reason: &str| Error::Endpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let trimmed = endpoint.trim();
    if trimmed.is_empty() {
        return Err(bad("empty"));
    }
    let rest = match trimmed.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => {
            return Err(bad(&format!(
                "scheme {scheme:?} is not supported (plain http only; use a local collector)"
            )))
        }
        None => trimmed,
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    http::host_port(authority).map_err(|e| bad(&e))?;
    let path = if path.is_empty() || path == "/" {
        TRACES_PATH
    } else {
        path
    };
    Ok(format!("http://{authority}{path}"))
}

/// An endpoint as given, if [`traces_url`] takes it: a command-line value
/// parser (clap's `value_parser = nri_otel::parse_endpoint`).
///
/// ```
/// assert_eq!(nri_otel::parse_endpoint("127.0.0.1:4318").unwrap(), "127.0.0.1:4318");
/// assert!(nri_otel::parse_endpoint("grpc://c:4317").is_err());
/// ```
pub fn parse_endpoint(endpoint: &str) -> Result<String, Error> {
    traces_url(endpoint).map(|_| endpoint.to_string())
}

/// Sets up export to an OTLP/HTTP receiver (protobuf, e.g. an OpenTelemetry
/// collector's `otlphttp` receiver on port 4318): the layer to add to the
/// `tracing` subscriber, and the handle that flushes and stops the export.
/// `endpoint` as in [`traces_url`]; `service_name` becomes the resource's
/// `service.name`.
///
/// Spans are batched by OpenTelemetry's batch span processor (its own
/// thread; a full queue drops spans rather than slowing NRI down) and posted
/// with a 10 s timeout.
///
/// ```
/// let (layer, export) = nri_otel::otlp("127.0.0.1:4318", "nri-hostd").unwrap();
/// # drop(layer);
/// export.shutdown();
/// assert!(nri_otel::otlp("https://collector", "x").is_err());
/// ```
pub fn otlp(endpoint: &str, service_name: &str) -> Result<(OtelLayer, ExportHandle), Error> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};

    let url = traces_url(endpoint)?;
    let timeout = Duration::from_secs(10);
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(PlainHttpClient::new(timeout))
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(timeout)
        .build()?;
    let processor = BatchSpanProcessor::builder(exporter).build();
    Ok(OtelLayer::with_service(processor, service_name))
}

/// Flushes and stops the export of an [`OtelLayer`]; clones share it.
#[derive(Clone)]
pub struct ExportHandle {
    processor: Arc<dyn SpanProcessor>,
}

impl fmt::Debug for ExportHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportHandle").finish_non_exhaustive()
    }
}

impl ExportHandle {
    /// Exports every span ended so far (blocks until done or failed).
    pub fn flush(&self) {
        if let Err(e) = self.processor.force_flush() {
            tracing::debug!(error = %e, "flushing OpenTelemetry spans failed");
        }
    }

    /// Exports what is buffered and stops the export; spans ended later are
    /// dropped.
    pub fn shutdown(&self) {
        if let Err(e) = self.processor.shutdown() {
            tracing::debug!(error = %e, "stopping the OpenTelemetry export failed");
        }
    }
}

/// A `tracing-subscriber` layer that exports the NRI spans (and spans
/// opened inside them) to an OpenTelemetry [`SpanProcessor`], with the W3C
/// ids the spans carry. See the [crate documentation](crate).
///
/// ```
/// use opentelemetry_sdk::trace::{InMemorySpanExporter, SimpleSpanProcessor};
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let exporter = InMemorySpanExporter::default();
/// let (layer, _export) =
///     nri_otel::OtelLayer::with_service(SimpleSpanProcessor::new(exporter.clone()), "doc");
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     let span = tracing::info_span!(
///         "nri.request",
///         event = "CreateContainer",
///         trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
///         span_id = "00f067aa0ba902b7",
///         parent_span_id = "",
///     );
///     drop(span);
/// });
/// let spans = exporter.get_finished_spans().unwrap();
/// assert_eq!(spans[0].name, "nri.request");
/// assert_eq!(spans[0].span_context.span_id().to_string(), "00f067aa0ba902b7");
/// ```
pub struct OtelLayer {
    processor: Arc<dyn SpanProcessor>,
    scope: InstrumentationScope,
}

impl fmt::Debug for OtelLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelLayer").finish_non_exhaustive()
    }
}

impl OtelLayer {
    /// A layer that hands every exported span to `processor` (resource and
    /// batching are the processor's business).
    pub fn new(processor: impl SpanProcessor + 'static) -> (OtelLayer, ExportHandle) {
        let processor: Arc<dyn SpanProcessor> = Arc::new(processor);
        let scope = InstrumentationScope::builder(env!("CARGO_PKG_NAME"))
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        (
            OtelLayer {
                processor: processor.clone(),
                scope,
            },
            ExportHandle { processor },
        )
    }

    /// Like [`new`](Self::new), the processor's resource naming the service
    /// (`service.name`).
    pub fn with_service(
        mut processor: impl SpanProcessor + 'static,
        service_name: &str,
    ) -> (OtelLayer, ExportHandle) {
        let resource = Resource::builder()
            .with_service_name(service_name.to_string())
            .build();
        processor.set_resource(&resource);
        OtelLayer::new(processor)
    }
}

/// A span being recorded for export.
struct Pending {
    name: &'static str,
    nri: bool,
    kind: SpanKind,
    trace_id: TraceId,
    span_id: SpanId,
    parent_span_id: SpanId,
    parent_is_remote: bool,
    attributes: Vec<KeyValue>,
    status: Status,
    events: Vec<Event>,
    start: SystemTime,
}

/// The fields of a span or event.
#[derive(Default)]
struct Fields {
    nri: bool,
    trace_id: Option<TraceId>,
    span_id: Option<SpanId>,
    parent_span_id: Option<SpanId>,
    message: Option<String>,
    attributes: Vec<KeyValue>,
    outcome: Option<String>,
}

impl Fields {
    fn new(nri: bool) -> Fields {
        Fields {
            nri,
            ..Fields::default()
        }
    }

    fn key(&self, field: &Field) -> opentelemetry::Key {
        if self.nri {
            opentelemetry::Key::new(format!("{SPAN_PREFIX}{}", field.name()))
        } else {
            opentelemetry::Key::from_static_str(field.name())
        }
    }

    fn put(&mut self, field: &Field, value: Value) {
        self.attributes.push(KeyValue::new(self.key(field), value));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "trace_id" => {
                self.trace_id = TraceId::from_hex(value)
                    .ok()
                    .filter(|t| *t != TraceId::INVALID)
            }
            "span_id" => self.span_id = span_id(value),
            "parent_span_id" => self.parent_span_id = span_id(value),
            "message" => self.message = Some(value.to_string()),
            _ if value.is_empty() => {}
            name => {
                if name == "outcome" {
                    self.outcome = Some(value.to_string());
                }
                self.put(field, Value::from(value.to_string()));
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` fields (the ids among them) arrive here, formatted.
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::I64(i64::try_from(value).unwrap_or(i64::MAX)));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
}

/// A valid span id from its hex form.
fn span_id(hex: &str) -> Option<SpanId> {
    SpanId::from_hex(hex).ok().filter(|s| *s != SpanId::INVALID)
}

/// `outcome` values that mark a span as failed.
fn failed(outcome: &str) -> bool {
    matches!(outcome, "error" | "timeout" | "closed" | "panic")
}

fn kind_of(name: &str) -> SpanKind {
    match name {
        "nri.plugin_call" => SpanKind::Client,
        "nri.plugin_request" => SpanKind::Server,
        _ => SpanKind::Internal,
    }
}

impl Pending {
    fn apply(&mut self, fields: Fields) {
        for kv in fields.attributes {
            match self.attributes.iter_mut().find(|a| a.key == kv.key) {
                Some(a) => *a = kv,
                None => self.attributes.push(kv),
            }
        }
        if let Some(outcome) = fields.outcome {
            self.status = if failed(&outcome) {
                Status::error(outcome)
            } else {
                Status::Unset
            };
        }
    }
}

impl<S> Layer<S> for OtelLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<Pending>()
                .map(|p| (p.trace_id, p.span_id))
        });
        let name = attrs.metadata().name();
        let nri = name.starts_with(SPAN_PREFIX);
        if !nri && parent.is_none() {
            return;
        }
        let mut fields = Fields::new(nri);
        attrs.record(&mut fields);
        let ids = RandomIdGenerator::default();
        let trace_id = fields
            .trace_id
            .or(parent.map(|(t, _)| t))
            .unwrap_or_else(|| ids.new_trace_id());
        let span_id = fields.span_id.unwrap_or_else(|| ids.new_span_id());
        let local_parent = parent
            .filter(|(t, _)| *t == trace_id)
            .map(|(_, s)| s)
            .unwrap_or(SpanId::INVALID);
        let parent_span_id = fields.parent_span_id.unwrap_or(local_parent);
        let mut pending = Pending {
            name,
            nri,
            kind: kind_of(name),
            trace_id,
            span_id,
            parent_span_id,
            parent_is_remote: parent_span_id != SpanId::INVALID && parent_span_id != local_parent,
            attributes: Vec::new(),
            status: Status::Unset,
            events: Vec::new(),
            start: SystemTime::now(),
        };
        pending.apply(fields);
        span.extensions_mut().insert(pending);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(pending) = ext.get_mut::<Pending>() {
            let mut fields = Fields::new(pending.nri);
            values.record(&mut fields);
            pending.apply(fields);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut ext = span.extensions_mut();
        if let Some(pending) = ext.get_mut::<Pending>() {
            let mut fields = Fields::new(false);
            event.record(&mut fields);
            let name = fields
                .message
                .unwrap_or_else(|| event.metadata().name().to_string());
            let mut attributes = fields.attributes;
            attributes.push(KeyValue::new("level", event.metadata().level().as_str()));
            pending
                .events
                .push(Event::new(name, SystemTime::now(), attributes, 0));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(p) = span.extensions_mut().remove::<Pending>() else {
            return;
        };
        let span_context = SpanContext::new(
            p.trace_id,
            p.span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        self.processor.on_end(SpanData {
            span_context,
            parent_span_id: p.parent_span_id,
            parent_span_is_remote: p.parent_is_remote,
            span_kind: p.kind,
            name: Cow::Borrowed(p.name),
            start_time: p.start,
            end_time: SystemTime::now(),
            attributes: p.attributes,
            dropped_attributes_count: 0,
            events: events(p.events),
            links: SpanLinks::default(),
            status: p.status,
            instrumentation_scope: self.scope.clone(),
        });
    }
}

fn events(events: Vec<Event>) -> SpanEvents {
    let mut out = SpanEvents::default();
    out.events = events;
    out
}
