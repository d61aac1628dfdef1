//! A runtime's trace through the integration: lifecycle calls made within
//! `with_trace_parent` reach the plugin in the runtime's trace.

mod support;

use nri_api::*;
use nri_integration::{with_trace_parent, TraceContext};
use nri_interop::fixtures::Traced;
use support::*;

/// Records the trace context of the events it receives.
fn traced() -> Traced {
    Traced::new(EventMask::from_events(&[
        Event::CreateContainer,
        Event::StopContainer,
        Event::RemoveContainer,
    ]))
}

#[tokio::test]
async fn lifecycle_calls_continue_the_runtime_trace() {
    let env = Env::new();
    let domain = TestDomain::new("ns").with("pod0", &[]);
    let nri = env.start(&[domain]).await;
    let plugin = traced();
    let _p = run_stub(plugin.clone(), "traced", "10", &env.socket());
    wait_plugins(&nri, &["10-traced"]).await;
    let (p0, c1) = (pod("pod0"), container("ctr1", "pod0"));

    let parent = TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=x"),
    );
    bounded(with_trace_parent(
        parent.clone(),
        nri.create_container(&p0, &c1),
    ))
    .await
    .unwrap();
    let parent = parent.unwrap();
    // Both calls of an undo, in one trace of the runtime.
    let undo = TraceContext::generate();
    bounded(with_trace_parent(
        undo.clone(),
        nri.undo_create_container(&p0, &c1),
    ))
    .await
    .unwrap();
    let seen = plugin.take();
    let events: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        events,
        ["CreateContainer", "StopContainer", "RemoveContainer"]
    );
    let tc: Vec<&TraceContext> = seen
        .iter()
        .map(|(e, t)| t.as_ref().unwrap_or_else(|| panic!("{e}: no trace")))
        .collect();
    assert_eq!(tc[0].trace_id(), parent.trace_id());
    assert_ne!(tc[0].span_id(), parent.span_id());
    assert_eq!(tc[0].tracestate(), Some("vendor=x"));
    for t in &tc[1..] {
        assert_eq!(t.trace_id(), undo.trace_id());
    }
    assert_ne!(tc[1].span_id(), tc[2].span_id());

    // No (or an invalid) parent, and nothing records the runtime's spans:
    // no trace is kept, so none is sent.
    let c2 = container("ctr2", "pod0");
    bounded(with_trace_parent(
        TraceContext::parse("not a traceparent", None),
        nri.create_container(&p0, &c2),
    ))
    .await
    .unwrap();
    let seen = plugin.take();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].1.is_none(), "a trace kept nowhere: {:?}", seen[0].1);

    // The same with the runtime's spans recorded: a new trace per request.
    let recorded = tracing_subscriber::fmt()
        .with_writer(std::io::sink)
        .finish();
    let c3 = container("ctr3", "pod0");
    {
        let _guard = tracing::subscriber::set_default(recorded);
        bounded(with_trace_parent(
            TraceContext::parse("not a traceparent", None),
            nri.create_container(&p0, &c3),
        ))
        .await
        .unwrap();
    }
    let seen = plugin.take();
    let tc = seen[0].1.as_ref().expect("a trace of its own");
    assert_ne!(tc.trace_id(), parent.trace_id());
    assert_ne!(tc.trace_id(), undo.trace_id());
    nri.stop().await;
}
