//! A plugin on nri-stub against an old runtime: the NRI v0.9.0 Go adaptation
//! (`nri-ref-runtime-old`), which delivers most events through the generic
//! `StateChange` request and knows no event newer than v0.9.

mod common;

use common::{entry, lifecycle, spawn_rust_plugin, STATE_CHANGE_EVENTS, TIMEOUT};
use nri_interop::plugin_tests::{cpu_shares, pod0_steps};
use nri_interop::read_event_log;
use serde_json::{json, Value};

/// A CRI-O release built with NRI v0.9.0: the stub infers the runtime's NRI version
/// from it (v0.9 does not report its version in Configure).
fn runtime() -> Value {
    json!({"name": "cri-o", "version": "v1.32.0"})
}

fn scenario(steps: Value) -> Value {
    json!({
        "runtime": runtime(),
        "registration_timeout_ms": 4000,
        "request_timeout_ms": 3000,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "ns0",
                  "labels": {"app": "old"}}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1,
                        "args": ["run"], "env": ["X=1"]}],
        "steps": steps
    })
}

#[test]
fn state_change_events_reach_the_dedicated_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let v09 = nri_interop::lifecycle_v09();
    // Every pod and container event NRI v0.9 knows, in order.
    let steps = pod0_steps(&v09[2..], cpu_shares(256));
    let config = json!({
        "log": log,
        "events": &v09[2..],
        "adjust": {"annotations": {"old.example.com/seen": "yes"}}
    });
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime-old", dir.path(), &scenario(steps));
    let mut plugin = spawn_rust_plugin(dir.path(), &socket, "rs", "10", &config, &["-record-rpc"]);

    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json["steps"]);
    assert_eq!(out.json["plugins"], json!(["10-rs"]));
    assert_eq!(
        out.step("CreateContainer").unwrap()["result"]["adjust"]["annotations"],
        json!({"old.example.com/seen": "yes"})
    );
    let status = plugin.wait_timeout(TIMEOUT);
    assert!(status.success(), "{status}: {}", plugin.stderr());

    let events = read_event_log(&log).unwrap();
    assert_eq!(lifecycle(&events), v09);

    // The runtime did not report its NRI version; the stub inferred it.
    let configure = entry(&events, "Configure");
    assert_eq!(configure["runtime"], "cri-o");
    assert_eq!(configure["nri_version"], "v0.9.0");
    assert_eq!(configure["nri_version_inferred"], true);
    assert_eq!(configure["registration_timeout_ms"], 4000);
    assert_eq!(configure["request_timeout_ms"], 3000);
    assert_eq!(configure["rpc"], "Configure");

    // Each handler ran for an event carried by StateChange, with its data.
    for event in STATE_CHANGE_EVENTS {
        let e = entry(&events, event);
        assert_eq!(e["rpc"], "StateChange", "{event}");
        assert_eq!(e["pod"]["id"], "pod0", "{event}");
        assert_eq!(e["pod"]["labels"], json!({"app": "old"}), "{event}");
        if !event.contains("PodSandbox") {
            assert_eq!(e["container"]["id"], "ctr0", "{event}");
            assert_eq!(e["container"]["args"], json!(["run"]), "{event}");
        }
    }
    for event in ["CreateContainer", "UpdateContainer", "StopContainer"] {
        assert_eq!(entry(&events, event)["rpc"], event);
    }
    assert_eq!(entry(&events, "StartContainer")["container"]["state"], 1);
    assert_eq!(
        entry(&events, "PostStartContainer")["container"]["state"],
        3
    );
    // (v0.9 fills an empty `memory` into the request before sending it.)
    assert_eq!(
        entry(&events, "UpdateContainer")["resources"],
        json!({"cpu": {"shares": {"value": 256}}, "memory": {}})
    );
    assert_eq!(entry(&events, "RemoveContainer")["container"]["state"], 4);
}

#[test]
fn subscribing_to_newer_events_fails_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let steps = json!([
        {"op": "wait_plugins", "count": 1, "timeout_ms": 3000},
        {"op": "stop"}
    ]);
    // No `events`: the plugin subscribes to all its handlers, including
    // ValidateContainerAdjustment, UpdatePodSandbox and PostUpdatePodSandbox.
    let config = json!({"log": log});
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime-old", dir.path(), &scenario(steps));
    let mut plugin = spawn_rust_plugin(dir.path(), &socket, "rs", "10", &config, &[]);

    // The plugin gives up with the stub's error...
    let status = plugin.wait_timeout(TIMEOUT);
    assert!(!status.success(), "plugin should fail: {}", plugin.stderr());
    let events = read_event_log(&log).unwrap();
    let error = entry(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    for needed in [
        "cri-o v1.32.0",
        "NRI v0.9.0 (inferred)",
        "cannot deliver the events",
        "UpdatePodSandbox",
        "PostUpdatePodSandbox",
        "ValidateContainerAdjustment",
        "v0.10.0",
    ] {
        assert!(error.contains(needed), "{needed:?} missing in {error:?}");
    }
    assert!(
        !error.contains("CreateContainer"),
        "only the events v0.9 lacks: {error}"
    );
    assert!(
        plugin.stderr().contains("cannot deliver the events"),
        "{}",
        plugin.stderr()
    );

    // ...which the runtime received as the Configure failure, instead of the
    // subscription it would refuse ("invalid plugin events").
    let out = runtime.finish(TIMEOUT).unwrap();
    assert_eq!(out.json["plugins"], json!(["10-rs"]), "it registered");
    let failed = out.failed_steps();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "wait_plugins");
    assert!(
        out.stderr.contains("cannot deliver the events"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("invalid plugin events"),
        "{}",
        out.stderr
    );
}
