//! The NRI spans of a real runtime and a real plugin, exported through
//! `OtelLayer` into the OpenTelemetry SDK's in-memory exporter: names,
//! attributes, kinds, status, and one trace from the runtime's parent
//! context down to the plugin handler's own span.

mod support;

use std::collections::HashMap;

use nri_adaptation::with_trace_parent;
use nri_api::*;
use nri_otel::OtelLayer;
use nri_stub::{Context, CreateContainerResult, Plugin};
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SimpleSpanProcessor, SpanData};
use support::*;
use tracing_subscriber::layer::SubscriberExt;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Adjusts CreateContainer inside a span of its own, fails StartContainer.
struct Traced;

#[nri_stub::plugin]
impl Plugin for Traced {
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let _work = tracing::info_span!("handler.work", step = 1_i64).entered();
        tracing::info!(key = "SEEN", "adjusting");
        let mut adjust = ContainerAdjustment::default();
        adjust.add_env("SEEN", "1");
        Ok(adjust.into())
    }
    async fn start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Err("not today".into())
    }
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn attr_str(span: &SpanData, key: &str) -> String {
    attr(span, key)
        .map(|v| v.as_str().into_owned())
        .unwrap_or_default()
}

/// The one span named `name` whose `nri.event` is `event`.
fn find<'a>(spans: &'a [SpanData], name: &str, event: &str) -> &'a SpanData {
    let found: Vec<_> = spans
        .iter()
        .filter(|s| s.name == name && attr_str(s, "nri.event") == event)
        .collect();
    assert_eq!(found.len(), 1, "{name} {event}: {found:#?}");
    found[0]
}

#[tokio::test]
async fn spans_continue_the_runtime_trace_down_to_the_plugin() {
    let exporter = InMemorySpanExporter::default();
    let (layer, export) =
        OtelLayer::with_service(SimpleSpanProcessor::new(exporter.clone()), "nri-test");
    // A current-thread runtime: the adaptation, the plugin and their tasks
    // all run on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = runtime_with_plugin(dir.path(), Traced, "traced").await;

    let parent = nri_adaptation::TraceContext::parse(PARENT, None).unwrap();
    let req = CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
    };
    tokio::time::timeout(WAIT, with_trace_parent(parent, nri.create_container(req)))
        .await
        .unwrap()
        .unwrap();
    let start = StartContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
    };
    // The plugin's failure is logged, not returned (default policy).
    let _ = tokio::time::timeout(WAIT, nri.start_container(start))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, nri.stop()).await.unwrap();
    let _ = tokio::time::timeout(WAIT, plugin).await;
    export.flush();
    let spans = exporter.get_finished_spans().unwrap();

    // One trace from the runtime's parent to the handler's own span.
    let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let request = find(&spans, "nri.request", "CreateContainer");
    assert_eq!(request.span_context.trace_id(), trace);
    assert_eq!(
        request.parent_span_id,
        SpanId::from_hex("00f067aa0ba902b7").unwrap()
    );
    assert!(request.parent_span_is_remote);
    assert_eq!(request.span_kind, SpanKind::Internal);
    assert_eq!(attr_str(request, "nri.pod"), "pod0");
    assert_eq!(attr_str(request, "nri.container"), "ctr0");
    assert_eq!(attr_str(request, "nri.outcome"), "ok");
    assert_eq!(request.status, Status::Unset);
    for id in ["nri.trace_id", "nri.span_id", "nri.parent_span_id"] {
        assert!(attr(request, id).is_none(), "{id} is the span's own id");
    }

    let call = find(&spans, "nri.plugin_call", "CreateContainer");
    assert_eq!(call.span_context.trace_id(), trace);
    assert_eq!(call.parent_span_id, request.span_context.span_id());
    assert!(!call.parent_span_is_remote);
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(attr_str(call, "nri.plugin"), "10-traced");
    assert_eq!(attr_str(call, "nri.pod"), "pod0");
    assert_eq!(attr_str(call, "nri.container"), "ctr0");
    assert_eq!(attr_str(call, "nri.outcome"), "ok");

    // The plugin's span: child of the call, through the traceparent it got.
    let handled = find(&spans, "nri.plugin_request", "CreateContainer");
    assert_eq!(handled.span_context.trace_id(), trace);
    assert_eq!(handled.parent_span_id, call.span_context.span_id());
    assert!(handled.parent_span_is_remote);
    assert_eq!(handled.span_kind, SpanKind::Server);
    assert_eq!(attr_str(handled, "nri.plugin"), "10-traced");
    assert_eq!(attr_str(handled, "nri.container"), "ctr0");
    assert_eq!(attr_str(handled, "nri.outcome"), "ok");

    let work = spans.iter().find(|s| s.name == "handler.work").unwrap();
    assert_eq!(work.span_context.trace_id(), trace);
    assert_eq!(work.parent_span_id, handled.span_context.span_id());
    assert_eq!(attr(work, "step"), Some(&Value::I64(1)));
    assert_eq!(work.events.len(), 1);
    assert_eq!(work.events[0].name, "adjusting");

    // A failed call: error status on both sides, in a new trace.
    let failed = find(&spans, "nri.plugin_call", "StartContainer");
    assert_eq!(attr_str(failed, "nri.outcome"), "error");
    assert_eq!(failed.status, Status::error("error"));
    assert_ne!(failed.span_context.trace_id(), trace);
    let failed_handled = find(&spans, "nri.plugin_request", "StartContainer");
    assert_eq!(failed_handled.status, Status::error("error"));
    assert_eq!(failed_handled.parent_span_id, failed.span_context.span_id());

    // Registration and shutdown calls belong to no runtime request: roots
    // of traces of their own, each answered by the plugin's span.
    for event in ["Configure", "Synchronize", "Shutdown"] {
        let call = find(&spans, "nri.plugin_call", event);
        assert_eq!(call.parent_span_id, SpanId::INVALID, "{event} is a root");
        assert_eq!(attr_str(call, "nri.plugin"), "10-traced");
    }
    for event in ["Configure", "Synchronize"] {
        let call = find(&spans, "nri.plugin_call", event);
        let handled = find(&spans, "nri.plugin_request", event);
        assert_eq!(handled.parent_span_id, call.span_context.span_id());
        assert_eq!(
            handled.span_context.trace_id(),
            call.span_context.trace_id()
        );
    }

    // Every parent is an exported span, or the runtime's own.
    let ids: HashMap<SpanId, &str> = spans
        .iter()
        .map(|s| (s.span_context.span_id(), &*s.name))
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for s in &spans {
        let p = s.parent_span_id;
        assert!(
            p == SpanId::INVALID
                || ids.contains_key(&p)
                || p == SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            "{} {} has a parent that was never exported",
            s.name,
            attr_str(s, "nri.event")
        );
    }
    assert!(spans
        .iter()
        .all(|s| s.instrumentation_scope.name() == "nri-otel"));
}
