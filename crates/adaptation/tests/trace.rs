//! Trace context from the adaptation to plugins: each runtime request is one trace
//! (the runtime's, given with `with_trace_parent`, or a new one), and every plugin
//! call sends its own child context as `traceparent` metadata, which an nri-stub
//! plugin reads from its `Context`; unless the trace is kept nowhere (no parent,
//! the runtime's spans not recorded).

mod support;

use nri_adaptation::{with_trace_parent, TraceContext};
use nri_api::*;
use nri_interop::fixtures::{CapturedLines, Traced};
use support::*;

/// Records the trace context of the events it receives.
fn traced() -> Traced {
    Traced::new(EventMask::from_events(&[
        Event::CreateContainer,
        Event::StartContainer,
        Event::ValidateContainerAdjustment,
    ]))
}

fn create() -> CreateContainerRequest {
    CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container("ctr0", "pod0")),
    }
}

#[tokio::test]
async fn plugin_calls_continue_the_runtime_trace() {
    // One test, so that no other test's subscriber (or lack of one) runs
    // at the same time: first a runtime whose spans nothing records.
    {
        let env = Env::new();
        let nri = env.start().await;
        let plugin = traced();
        let _stub = run_stub(plugin.clone(), "traced", "10", &env.socket());
        wait_plugins(&nri, &["10-traced"]).await;
        unrecorded_runtime_sends_only_a_given_trace(&nri, &plugin).await;
        nri.stop().await;
    }

    // Then one whose spans are recorded.
    let lines = CapturedLines::default();
    let _guard = tracing::subscriber::set_default(lines.subscriber());

    let env = Env::new();
    let nri = env.start().await;
    let plugin = traced();
    let _stub = run_stub(plugin.clone(), "traced", "10", &env.socket());
    wait_plugins(&nri, &["10-traced"]).await;

    // With a parent: CreateContainer and its validation are in the parent's trace,
    // each call with a span id of its own, and the tracestate goes along.
    let parent = TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=x"),
    )
    .unwrap();
    bounded(with_trace_parent(
        parent.clone(),
        nri.create_container(create()),
    ))
    .await
    .unwrap();
    let seen = plugin.take();
    let events: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(events, ["CreateContainer", "ValidateContainerAdjustment"]);
    let (create_tc, validate_tc) = (
        seen[0].1.clone().expect("trace context sent"),
        seen[1].1.clone().expect("trace context sent"),
    );
    for tc in [&create_tc, &validate_tc] {
        assert_eq!(tc.trace_id(), parent.trace_id());
        assert_ne!(tc.span_id(), parent.span_id());
        assert_eq!(tc.tracestate(), Some("vendor=x"));
        assert!(tc.is_sampled());
    }
    assert_ne!(create_tc.span_id(), validate_tc.span_id());

    // Without a parent: each runtime request is a new trace.
    bounded(nri.start_container(StartContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container("ctr0", "pod0")),
    }))
    .await
    .unwrap();
    bounded(nri.create_container(create())).await.unwrap();
    let seen = plugin.take();
    let ids: Vec<[u8; 16]> = seen
        .iter()
        .map(|(_, tc)| tc.as_ref().expect("trace context sent").trace_id())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_ne!(ids[0], parent.trace_id());
    assert_ne!(
        ids[0], ids[1],
        "StartContainer and CreateContainer: two traces"
    );
    assert_eq!(
        ids[1], ids[2],
        "CreateContainer and its validation: one trace"
    );

    nri.stop().await;

    // The spans: one nri.request per runtime request, one nri.plugin_call per call,
    // with the fields and the outcome.
    let log = lines.text();
    let closed = |name: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains(&format!("{name}{{")) && l.contains("close"))
            .map(str::to_string)
            .collect()
    };
    let call = closed("nri.plugin_call")
        .into_iter()
        .find(|l| l.contains(&format!("span_id={}", create_tc.span_id_hex())))
        .unwrap_or_else(|| panic!("{log}"));
    for field in [
        "plugin=\"10-traced\"".to_string(),
        "event=\"CreateContainer\"".to_string(),
        "pod=\"pod0\"".to_string(),
        "container=\"ctr0\"".to_string(),
        format!("trace_id={}", parent.trace_id_hex()),
        "outcome=\"ok\"".to_string(),
    ] {
        assert!(call.contains(&field), "{field} missing: {call}");
    }
    let request = closed("nri.request")
        .into_iter()
        .filter(|l| !l.contains("nri.plugin_call"))
        .find(|l| l.contains(&format!("parent_span_id={}", parent.span_id_hex())))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        request.contains("event=\"CreateContainer\"")
            && request.contains(&format!("trace_id={}", parent.trace_id_hex()))
            && request.contains("outcome=\"ok\""),
        "{request}"
    );
    // The plugin call's parent is the request's span.
    let request_span = request
        .split("span_id=")
        .nth(1)
        .and_then(|s| s.get(..16))
        .unwrap();
    assert!(
        call.contains(&format!("parent_span_id={request_span}")),
        "{call}\n{request}"
    );

    // Every plugin call's parent span is emitted: a runtime request's span,
    // or none for the calls of no request (Configure, Synchronize,
    // Shutdown), which start traces of their own.
    let field = |line: &str, name: &str| -> String {
        let at = line
            .find(&format!(" {name}="))
            .unwrap_or_else(|| panic!("{name} missing: {line}"));
        let value = &line[at + name.len() + 2..];
        value
            .split([' ', '}'])
            .next()
            .unwrap_or_default()
            .trim_matches('"')
            .to_string()
    };
    let requests: Vec<String> = closed("nri.request")
        .iter()
        .filter(|l| !l.contains("nri.plugin_call"))
        .map(|l| field(l, "span_id"))
        .collect();
    // The call's own fields (a line starts with its enclosing spans').
    let calls: Vec<String> = closed("nri.plugin_call")
        .iter()
        .filter_map(|l| l.find("nri.plugin_call{").map(|at| l[at..].to_string()))
        .collect();
    for event in ["Configure", "Synchronize", "Shutdown"] {
        let line = calls
            .iter()
            .find(|l| l.contains(&format!("event=\"{event}\"")))
            .unwrap_or_else(|| panic!("no {event} call: {log}"));
        assert_eq!(field(line, "parent_span_id"), "", "{line}");
    }
    for line in &calls {
        let parent = field(line, "parent_span_id");
        assert!(
            parent.is_empty() || requests.contains(&parent),
            "parent of {line} never emitted"
        );
    }
}

/// With nothing recording the runtime's spans: a request without a parent
/// is a trace kept nowhere, and its plugin calls send no context; one with
/// a parent continues it, its validation too.
async fn unrecorded_runtime_sends_only_a_given_trace(
    nri: &nri_adaptation::Adaptation,
    plugin: &Traced,
) {
    // Without a parent, a trace kept nowhere: the plugin receives no context.
    bounded(nri.create_container(create())).await.unwrap();
    let seen = plugin.take();
    let events: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(events, ["CreateContainer", "ValidateContainerAdjustment"]);
    for (event, tc) in &seen {
        assert!(tc.is_none(), "{event}: {tc:?}");
    }
    // With one, the calls continue the runtime's trace, the validation too.
    let runtime_trace = TraceContext::generate();
    bounded(with_trace_parent(
        runtime_trace.clone(),
        nri.create_container(create()),
    ))
    .await
    .unwrap();
    let seen = plugin.take();
    assert_eq!(seen.len(), 2);
    for (event, tc) in &seen {
        let tc = tc.as_ref().unwrap_or_else(|| panic!("{event}: no context"));
        assert_eq!(tc.trace_id(), runtime_trace.trace_id(), "{event}");
    }
}
