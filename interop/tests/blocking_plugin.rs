//! A plugin on nri-stub's blocking stub (`crates/stub/examples/annotate_blocking.rs`),
//! built with cargo and launched by the Go runtime adaptation (official
//! `pkg/adaptation`) as a pre-installed plugin: it is named by the runtime,
//! connects through the socket handed over to it, is synchronized with the
//! runtime's containers and adjusts the containers the runtime creates.

mod common;

use common::{build_example, go_runtime_with_plugin_dir, install_plugin};
use serde_json::json;

#[test]
fn blocking_plugin_adjusts_containers_of_the_go_runtime() {
    let example = build_example("annotate_blocking");
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    // Installed under another name than it gives itself: the runtime's name wins.
    install_plugin(&plugins, "20-lean", &example);
    let scenario = json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "pod0", "namespace": "default"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "nginx", "state": 2},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "sidecar", "state": 2},
            {"id": "ctr2", "pod_sandbox_id": "pod0", "name": "new", "state": 1}
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "CreateContainer", "container": "ctr2"},
            {"op": "StartContainer", "container": "ctr2"},
            {"op": "stop"}
        ]
    });
    let out = go_runtime_with_plugin_dir(dir.path(), &plugins, &scenario);
    assert_eq!(out.json["plugins"], json!(["20-lean"]));

    let create = out
        .steps()
        .iter()
        .find(|s| s["op"] == "CreateContainer")
        .expect("a CreateContainer step");
    let sync = out.json["synchronize"]
        .as_array()
        .and_then(|s| s.last())
        .expect("a synchronization");
    let synchronized = sync["containers"].as_u64().expect("container count");
    assert!(synchronized >= 2, "{sync:#}");
    assert_eq!(
        create["result"]["adjust"],
        json!({
            "annotations": {
                "annotate.example.com/blocking": "yes",
                "annotate.example.com/synchronized": synchronized.to_string()
            },
            "env": [{"key": "ANNOTATED_CONTAINER", "value": "new"}]
        }),
        "{create:#}"
    );
}
