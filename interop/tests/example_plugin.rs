//! The nri-stub example plugin (`crates/stub/examples/annotate.rs`), built with
//! cargo and launched by the Go runtime adaptation as a pre-installed plugin,
//! adjusts the containers the runtime creates.

mod common;

use common::{build_example, go_runtime_with_plugin_dir, install_plugin};
use serde_json::json;

#[test]
fn annotate_example_adjusts_containers_of_the_go_runtime() {
    let example = build_example("annotate");
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    install_plugin(&plugins, "10-annotate", &example);
    let scenario = json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "pod0", "namespace": "default"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "nginx", "state": 1,
             "env": ["A=B"]},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "sidecar", "state": 1}
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "CreateContainer", "container": "ctr1"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    });
    let out = go_runtime_with_plugin_dir(dir.path(), &plugins, &scenario);
    assert_eq!(out.json["plugins"], json!(["10-annotate"]));

    let creates: Vec<_> = out
        .steps()
        .iter()
        .filter(|s| s["op"] == "CreateContainer")
        .collect();
    assert_eq!(creates.len(), 2);
    for (step, name) in creates.iter().zip(["nginx", "sidecar"]) {
        assert_eq!(
            step["result"]["adjust"],
            json!({
                "annotations": {"annotate.example.com/by": "10-annotate"},
                "env": [{"key": "ANNOTATED_CONTAINER", "value": name}]
            }),
            "{step:#}"
        );
    }
}
