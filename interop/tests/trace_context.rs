//! Trace context across the wire, between both runtimes and both kinds of plugins.
//!
//! The Go reference runtime (`nri-ref-runtime`, adaptation v0.12.5) installs
//! containerd's `otelttrpc` client interceptor with an OpenTelemetry SDK tracer and
//! runs each scenario step in a span; our runtime (`nri-rs-ref-runtime`,
//! nri-adaptation) runs each step with a new parent context given to
//! `with_trace_parent`. Both record the step's trace id in their output. The Go
//! plugin (`nri-ref-plugin`, official stub, `otelttrpc` server interceptor) logs the
//! trace id of its handler's span; the Rust plugin (`nri-rs-test-plugin`, nri-stub)
//! logs the trace id of `Context::trace_context`. Every event a step causes must
//! arrive in that step's trace:
//!
//! * Go runtime -> Rust plugin: a trace started in a Go runtime with `otelttrpc`
//!   continues into an nri-stub plugin;
//! * Rust runtime -> Go plugin: a trace started in nri-adaptation continues into a
//!   Go plugin using `otelttrpc`;
//! * Rust -> Rust and Go -> Go, for reference.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::runtimes::{Rt, Running};
use common::{rust_plugin_bin, spawn_plugin, TIMEOUT};
use nri_interop::plugin_tests::{cpu_shares, pod0_steps, POD0_REQUESTS};
use nri_interop::{harness_bin, read_event_log, RuntimeOutput};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy)]
enum Plugin {
    Go,
    Rust,
}

impl Plugin {
    fn bin(self) -> PathBuf {
        match self {
            Plugin::Go => harness_bin("nri-ref-plugin"),
            Plugin::Rust => rust_plugin_bin(),
        }
    }
}

/// Steps whose plugin calls must carry the step's trace.
const TRACED: [&str; 8] = POD0_REQUESTS;

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "request_timeout_ms": 4000,
        "trace": true,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1}],
        "steps": pod0_steps(&TRACED, cpu_shares(512))
    })
}

/// Runs the scenario on `rt` with `plugin` as external plugin `10-tr`; returns the
/// runtime's output and the plugin's event log.
fn run(rt: Rt, plugin: Plugin) -> (RuntimeOutput, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("10-tr.jsonl");
    let config = json!({"log": log, "trace": true});
    let (running, socket) = Running::spawn_with_socket(rt, dir.path(), &scenario(), &[]);
    let mut process = spawn_plugin(&plugin.bin(), dir.path(), &socket, "tr", "10", &config, &[]);
    let mut out = running.finish(TIMEOUT);
    process.wait_timeout(TIMEOUT);
    out.stderr.push_str("\n--- plugin:\n");
    out.stderr.push_str(&process.stderr());
    let events = read_event_log(&log).unwrap();
    (out, events)
}

fn is_hex_id(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

/// Every traced step has a trace of its own, and every event it caused arrived in
/// that trace, with the id of the caller's span.
fn check(rt: Rt, plugin: Plugin) {
    let (out, events) = run(rt, plugin);
    let ctx = format!(
        "{rt:?} runtime, {plugin:?} plugin\n{:#}\n{}",
        out.json, out.stderr
    );
    assert!(out.status.success(), "{ctx}");
    assert_eq!(out.failed_steps(), [], "{ctx}");

    // Step -> trace id, as the runtime recorded it.
    let mut traces: HashMap<String, String> = HashMap::new();
    for op in TRACED {
        let step = out
            .step(op)
            .unwrap_or_else(|| panic!("no step {op}: {ctx}"));
        let id = step["trace_id"].as_str().unwrap_or_default().to_string();
        assert!(is_hex_id(&id, 32), "{op}: trace id {id:?}: {ctx}");
        traces.insert(id, op.to_string());
    }
    assert_eq!(traces.len(), TRACED.len(), "one trace per step: {ctx}");

    // Event -> trace id, as the plugin received it.
    let mut seen = Vec::new();
    for e in &events {
        let event = e["event"].as_str().unwrap_or_default();
        if !TRACED.contains(&event) && event != "ValidateContainerAdjustment" {
            continue;
        }
        let id = e["trace_id"].as_str().unwrap_or_default();
        let parent = e["parent_span_id"].as_str().unwrap_or_default();
        assert!(
            is_hex_id(parent, 16),
            "{event}: parent span {parent:?}: {e}\n{ctx}"
        );
        let step = traces
            .get(id)
            .unwrap_or_else(|| panic!("{event}: trace id {id:?} is no step's: {e}\n{ctx}"));
        let expected = if event == "ValidateContainerAdjustment" {
            "CreateContainer"
        } else {
            event
        };
        assert_eq!(
            step, expected,
            "{event} arrived in the trace of {step}: {ctx}"
        );
        seen.push(event.to_string());
    }
    for op in TRACED {
        assert!(
            seen.iter().any(|e| e == op),
            "{op} not logged: {seen:?}\n{ctx}"
        );
    }
}

#[test]
fn go_runtime_trace_continues_into_rust_plugin() {
    check(Rt::Go, Plugin::Rust);
}

#[test]
fn rust_runtime_trace_continues_into_go_plugin() {
    check(Rt::Rust, Plugin::Go);
}

#[test]
fn rust_runtime_trace_continues_into_rust_plugin() {
    check(Rt::Rust, Plugin::Rust);
}

#[test]
fn go_runtime_trace_continues_into_go_plugin() {
    check(Rt::Go, Plugin::Go);
}
