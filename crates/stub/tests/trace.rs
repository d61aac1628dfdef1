//! Trace context from the runtime: a request's `traceparent` metadata reaches the
//! handler's `Context`, and each handled request runs in a `nri.plugin_request` span
//! that records the trace id, the pod, the container and the outcome.

mod support;

use std::sync::{Arc, Mutex};

use nri_api::service::{plugin as method, PLUGIN_SERVICE};
use nri_api::*;
use nri_interop::fixtures::CapturedLines;
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, Plugin, TraceContext};
use support::*;

/// What each handler saw: the container id (or "configure") and the trace context.
type Seen = Vec<(String, Option<TraceContext>)>;

#[derive(Default, Clone)]
struct Tracer {
    seen: Arc<Mutex<Seen>>,
}

#[nri_stub::plugin]
impl Plugin for Tracer {
    async fn configure(
        &self,
        ctx: &Context,
        _info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        let seen = ctx.trace_context().cloned();
        self.seen.lock().unwrap().push(("configure".into(), seen));
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        tracing::info!("creating");
        let seen = ctx.trace_context().cloned();
        self.seen.lock().unwrap().push((ctr.id.clone(), seen));
        if ctr.id == "bad" {
            return Err("refused".into());
        }
        Ok(CreateContainerResult::default())
    }
}

fn create(ctr: &str) -> CreateContainerRequest {
    CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container(ctr, "pod0")),
    }
}

#[tokio::test]
async fn handler_sees_the_runtime_trace_context_and_spans_record_it() {
    let lines = CapturedLines::default();
    let _guard = tracing::subscriber::set_default(lines.subscriber());

    let plugin = Tracer::default();
    let (run, rt, _) = run_registered(plugin.clone(), "tracer", "05", Registration::Accept).await;

    let parent = TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=x"),
    )
    .unwrap();
    let md = parent.to_metadata();
    let timeout = Some(WAIT);
    let _: ConfigureResponse = rt
        .client
        .call_msg_with_metadata(
            PLUGIN_SERVICE,
            method::CONFIGURE,
            &configure_request(),
            timeout,
            &md,
        )
        .await
        .unwrap();
    let _: CreateContainerResponse = rt
        .client
        .call_msg_with_metadata(
            PLUGIN_SERVICE,
            method::CREATE_CONTAINER,
            &create("c1"),
            timeout,
            &md,
        )
        .await
        .unwrap();
    // No metadata, or an invalid traceparent: no trace context.
    let _: CreateContainerResponse = rt
        .call(method::CREATE_CONTAINER, &create("c2"))
        .await
        .unwrap();
    let bad = [("traceparent", "00-xyz"), ("tracestate", "vendor=x")];
    let err = rt
        .client
        .call_msg_with_metadata::<_, CreateContainerResponse, _, _>(
            PLUGIN_SERVICE,
            method::CREATE_CONTAINER,
            &create("bad"),
            timeout,
            &bad,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");

    let seen = plugin.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("configure".to_string(), Some(parent.clone())),
            ("c1".to_string(), Some(parent.clone())),
            ("c2".to_string(), None),
            ("bad".to_string(), None),
        ]
    );
    assert_eq!(seen[1].1.as_ref().unwrap().tracestate(), Some("vendor=x"));

    rt.disappear();
    let _ = run.await;

    let log = lines.text();
    let span_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("nri.plugin_request"))
        .collect();
    // The handler's own event is logged inside the span, with its fields.
    let inside = span_lines
        .iter()
        .find(|l| l.contains("creating") && l.contains("container=\"c1\""))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        inside.contains("trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"")
            && inside.contains("parent_span_id=\"00f067aa0ba902b7\"")
            && inside.contains("plugin=\"05-tracer\"")
            && inside.contains("event=\"CreateContainer\"")
            && inside.contains("pod=\"pod0\""),
        "{inside}"
    );
    // Span close events carry the outcome.
    let closes: Vec<&&str> = span_lines.iter().filter(|l| l.contains("close")).collect();
    assert!(
        closes
            .iter()
            .any(|l| l.contains("container=\"c1\"") && l.contains("outcome=\"ok\"")),
        "{log}"
    );
    assert!(
        closes.iter().any(|l| l.contains("container=\"bad\"")
            && l.contains("outcome=\"error\"")
            && l.contains("trace_id=\"\"")),
        "{log}"
    );
}
