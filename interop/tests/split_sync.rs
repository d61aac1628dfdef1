//! The Go runtime adaptation splits a Synchronize larger than ttRPC's 4 MiB limit
//! into several requests; a plugin on nri-stub gets one `synchronize` call with
//! every pod and container exactly once.

mod common;

use std::collections::BTreeSet;

use common::{entry, ids, lifecycle, spawn_rust_plugin, TIMEOUT};
use nri_interop::read_event_log;
use serde_json::{json, Value};

const PODS: usize = 12;
const CONTAINERS: usize = 600;
const ANNOTATION: usize = 8 * 1024;
const LIMIT: u64 = 4 << 20;

fn scenario() -> Value {
    let pods: Vec<Value> = (0..PODS)
        .map(|p| json!({"id": format!("pod{p}"), "name": format!("pod{p}"), "uid": format!("uid{p}")}))
        .collect();
    let containers: Vec<Value> = (0..CONTAINERS)
        .map(|c| {
            // Distinct payloads, so a duplicated or lost container shows.
            let filler = char::from(b'a' + (c % 26) as u8)
                .to_string()
                .repeat(ANNOTATION);
            json!({"id": format!("ctr{c:03}"), "pod_sandbox_id": format!("pod{}", c % PODS),
                   "name": format!("ctr{c:03}"), "state": 3,
                   "annotations": {"big": filler}})
        })
        .collect();
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        // Generous: a debug build decodes and logs ~5 MB within one request.
        "request_timeout_ms": 20000,
        "pods": pods,
        "containers": containers,
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 40000},
            {"op": "RunPodSandbox", "pod": "pod-new"},
            {"op": "stop"}
        ]
    })
}

#[test]
fn split_synchronize_reaches_the_handler_once_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let mut scenario = scenario();
    scenario["pods"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "pod-new", "name": "pod-new"}));
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime", dir.path(), &scenario);
    let mut plugin = spawn_rust_plugin(
        dir.path(),
        &socket,
        "big",
        "10",
        &json!({"log": log, "events": ["RunPodSandbox"]}),
        &["-record-rpc"],
    );

    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json["steps"]);
    plugin.wait_timeout(TIMEOUT);

    // The runtime completed the plugin's synchronization without error.
    let sync = out.json["synchronize"].as_array().unwrap().last().unwrap();
    // pod-new joins the table only with its RunPodSandbox step.
    assert_eq!(sync["pods"], PODS);
    assert_eq!(sync["containers"], CONTAINERS);
    assert_eq!(sync["error"], "");

    let events = read_event_log(&log).unwrap();
    assert_eq!(
        lifecycle(&events),
        ["Configure", "Synchronize", "RunPodSandbox"],
        "one synchronize call, and the plugin keeps working afterwards"
    );
    let sync = entry(&events, "Synchronize");

    // The runtime really split: several requests came in, each under the limit,
    // all but the last announcing more.
    let parts = sync["sync_requests"].as_array().unwrap();
    assert!(parts.len() >= 2, "not split: {parts:?}");
    let (last, firsts) = parts.split_last().unwrap();
    assert!(firsts.iter().all(|p| p["more"] == true), "{parts:?}");
    assert_eq!(last["more"], false, "{parts:?}");
    assert!(parts.iter().all(|p| p["bytes"].as_u64().unwrap() < LIMIT));
    let sent: u64 = parts
        .iter()
        .map(|p| p["containers"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, CONTAINERS as u64);
    let total: u64 = parts.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    assert!(
        total > LIMIT,
        "the whole state exceeds one message: {total}"
    );

    // The handler saw every pod and container exactly once, with its data.
    let pod_ids = ids(&sync["pods"]);
    let expected_pods: BTreeSet<String> = (0..PODS).map(|p| format!("pod{p}")).collect();
    assert_eq!(pod_ids.len(), PODS);
    assert_eq!(pod_ids.into_iter().collect::<BTreeSet<_>>(), expected_pods);

    let containers = sync["containers"].as_array().unwrap();
    assert_eq!(containers.len(), CONTAINERS);
    let mut seen = BTreeSet::new();
    for ctr in containers {
        let id = ctr["id"].as_str().unwrap();
        assert!(seen.insert(id.to_owned()), "{id} twice");
        let n: usize = id.trim_start_matches("ctr").parse().unwrap();
        assert_eq!(ctr["pod_sandbox_id"], format!("pod{}", n % PODS));
        let big = ctr["annotations"]["big"].as_str().unwrap();
        assert_eq!(big.len(), ANNOTATION, "{id}");
        assert!(big.bytes().all(|b| b == b'a' + (n % 26) as u8), "{id}");
    }
    assert_eq!(seen.len(), CONTAINERS);
}
