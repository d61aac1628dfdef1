//! A plugin on nri-stub next to a plugin on the official Go stub, both external, on
//! the Go runtime adaptation: the runtime calls them in index order (not in the
//! order they connected) and merges both adjustments.

mod common;

use common::{spawn_rust_plugin, TIMEOUT};
use nri_interop::{event_names, wait_for_events, write_json, GoProcess};
use serde_json::{json, Value};

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "pod0"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1}],
        "steps": [
            {"op": "wait_plugins", "count": 2, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    })
}

#[test]
fn go_and_rust_plugins_run_in_index_order_and_both_adjust() {
    let dir = tempfile::tempdir().unwrap();
    // Both plugins append to one log, so it shows the order of their calls.
    let log = dir.path().join("events.jsonl");
    let events = [
        "RunPodSandbox",
        "CreateContainer",
        "StartContainer",
        "ValidateContainerAdjustment",
    ];
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime", dir.path(), &scenario());

    // The Rust plugin connects first but has the higher index.
    let rust_config = json!({
        "log": log, "events": events,
        "adjust": {"annotations": {"rs": "30"}, "env": [{"key": "FROM_RS", "value": "1"}]}
    });
    let _rust = spawn_rust_plugin(dir.path(), &socket, "rs", "30", &rust_config, &[]);
    wait_for_events(&log, TIMEOUT, |e| event_names(e).contains(&"Synchronize")).unwrap();

    let go_config = json!({
        "log": log, "events": events,
        "adjust": {"annotations": {"go": "20"}, "env": [{"key": "FROM_GO", "value": "1"}]}
    });
    let go_config = write_json(dir.path(), "go.json", &go_config).unwrap();
    let _go = GoProcess::spawn(
        "nri-ref-plugin",
        [
            "-config".as_ref(),
            go_config.as_os_str(),
            "-socket".as_ref(),
            socket.as_os_str(),
            "-name".as_ref(),
            "go".as_ref(),
            "-idx".as_ref(),
            "20".as_ref(),
        ],
        &dir.path().join("go.stderr"),
    )
    .unwrap();

    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json["steps"]);
    assert_eq!(out.json["plugins"], json!(["20-go", "30-rs"]));

    // Both adjustments are in the merged result.
    let adjust = &out.step("CreateContainer").unwrap()["result"]["adjust"];
    assert_eq!(
        adjust["annotations"],
        json!({"go": "20", "rs": "30"}),
        "{adjust:#}"
    );
    let mut env: Vec<&str> = adjust["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    env.sort_unstable();
    assert_eq!(env, ["FROM_GO", "FROM_RS"]);

    // Per event, the Go plugin (index 20) was called before the Rust one (30). Go's
    // log lines have no `plugin` field; the Rust plugin's say "30-rs". Validators
    // are called concurrently (the reference runs them in parallel), so for
    // ValidateContainerAdjustment only the set of callers is fixed.
    let log = nri_interop::read_event_log(&log).unwrap();
    for event in events {
        let mut callers: Vec<&Value> = log
            .iter()
            .filter(|e| e["event"] == event)
            .map(|e| &e["plugin"])
            .collect();
        if event == "ValidateContainerAdjustment" {
            callers.sort_by_key(|c| c.is_string());
        }
        assert_eq!(callers, [&Value::Null, &json!("30-rs")], "{event}");
    }

    // Both validators saw the merged adjustment and both plugins, in order.
    for v in log
        .iter()
        .filter(|e| e["event"] == "ValidateContainerAdjustment")
    {
        assert_eq!(
            v["validate"]["plugins"],
            json!([{"name": "go", "index": "20"}, {"name": "rs", "index": "30"}])
        );
        assert_eq!(
            v["validate"]["adjust"]["annotations"],
            adjust["annotations"]
        );
    }
}
