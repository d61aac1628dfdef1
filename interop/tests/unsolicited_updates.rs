//! A plugin on nri-stub asks the Go runtime adaptation on its own to update
//! containers (`UpdateContainers`): the runtime applies the updates, and the
//! plugin gets back the ones that failed.

mod common;

use common::{entry, spawn_rust_plugin, TIMEOUT};
use nri_interop::read_event_log;
use serde_json::{json, Value};

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "pod0"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "ctr1", "state": 3},
            {"id": "ctr-fail", "pod_sandbox_id": "pod0", "name": "ctr-fail", "state": 3}
        ],
        "fail_updates": ["ctr-fail"],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "wait_updates", "count": 1, "timeout_ms": 30000},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "PostStartContainer", "container": "ctr0"},
            {"op": "wait_updates", "count": 2, "timeout_ms": 30000},
            {"op": "PostUpdateContainer", "container": "ctr1"},
            {"op": "PostUpdateContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    })
}

fn first_updates() -> Value {
    json!([
        {"container_id": "ctr1", "linux": {"resources": {"cpu": {"shares": {"value": 333}}}}},
        {"container_id": "ctr-fail", "linux": {"resources": {"cpu": {"shares": {"value": 7}}}}},
        {"container_id": "ctr-unknown"}
    ])
}

fn second_updates() -> Value {
    json!([
        {"container_id": "ctr0", "linux": {"resources": {"memory": {"limit": {"value": 67108864}}}}}
    ])
}

#[test]
fn unsolicited_updates_reach_the_runtime_and_failures_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let config = json!({
        "log": log,
        "events": ["PostStartContainer", "PostUpdateContainer"],
        "unsolicited": [
            // Evictions travel too; Go's adaptation drops them before the runtime.
            {"after_event": "Synchronize", "updates": first_updates(),
             "evict": [{"container_id": "ctr1", "reason": "testing"}]},
            {"after_event": "PostStartContainer", "after_ms": 10, "updates": second_updates()}
        ]
    });
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime", dir.path(), &scenario());
    let mut plugin = spawn_rust_plugin(dir.path(), &socket, "upd", "10", &config, &[]);

    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json["steps"]);
    plugin.wait_timeout(TIMEOUT);

    // The runtime got both calls, in order, and failed the update of the container
    // it refuses and of the one it does not know.
    let failed = json!([first_updates()[1], first_updates()[2]]);
    assert_eq!(
        out.json["update_calls"],
        json!([
            {"updates": first_updates(), "failed": failed},
            {"updates": second_updates(), "failed": []}
        ]),
        "{:#}",
        out.json
    );

    // The plugin got the failed updates back.
    let events = read_event_log(&log).unwrap();
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "UpdateContainers")
        .collect();
    assert_eq!(calls.len(), 2, "{events:#?}");
    assert_eq!(calls[0]["updates"], first_updates());
    assert_eq!(calls[0]["failed"], failed);
    assert_eq!(calls[0].get("error"), None);
    assert_eq!(calls[1]["updates"], second_updates());
    assert_eq!(calls[1]["failed"], json!([]));
    assert_eq!(calls[1].get("error"), None);

    // The runtime applied the successful updates: later events carry them.
    let post_updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "PostUpdateContainer")
        .collect();
    assert_eq!(post_updates.len(), 2);
    assert_eq!(post_updates[0]["container"]["id"], "ctr1");
    assert_eq!(
        post_updates[0]["container"]["linux"]["resources"]["cpu"]["shares"]["value"],
        333
    );
    assert_eq!(post_updates[1]["container"]["id"], "ctr0");
    assert_eq!(
        post_updates[1]["container"]["linux"]["resources"]["memory"]["limit"]["value"],
        67108864
    );
    // The second call was made from the PostStartContainer handler's trigger.
    assert_eq!(
        entry(&events, "PostStartContainer")["container"]["id"],
        "ctr0"
    );
}
