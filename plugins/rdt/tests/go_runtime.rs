//! The plugin binary, connected as an external plugin to the Go reference runtime:
//! RDT annotations of a pod turn into the RDT adjustments of its containers.

mod common;

use std::path::Path;

use common::{args, run_on_go_runtime};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-rdt");

fn scenario() -> Value {
    let ctr = |name: &str| json!({"id": name, "pod_sandbox_id": "pod0", "name": name, "state": 1, "args": ["pause"]});
    json!({
        "pods": [{"id": "pod0", "name": "rdt-example", "uid": "u0", "namespace": "default",
                  "annotations": {
                      "closid.rdt.noderesource.dev/container.db": "gold",
                      "schemata.rdt.noderesource.dev/container.db": "L3:0=ff,MB:0=50",
                      "enablemonitoring.rdt.noderesource.dev/container.db": "true",
                      "enablemonitoring.rdt.noderesource.dev/container.bad": "maybe"
                  }}],
        "containers": [ctr("db"), ctr("web"), ctr("bad")],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "CreateContainer", "container": "db"},
            {"op": "CreateContainer", "container": "web"},
            {"op": "CreateContainer", "container": "bad"},
            {"op": "stop"}
        ]
    })
}

fn step<'a>(steps: &'a [Value], ctr: &str) -> &'a Value {
    steps.iter().find(|s| s["container"] == ctr).unwrap()
}

#[test]
fn rdt_annotations_on_the_go_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (out, stderr) = run_on_go_runtime(
        dir.path(),
        &scenario(),
        Path::new(BIN),
        |socket| args(socket, &[&"-verbose", &"-no-reconnect"]),
        &[],
    );
    assert_eq!(out.json["plugins"], json!(["20-rdt"]), "{stderr}");
    let steps = out.steps();
    let db = step(steps, "db");
    assert_eq!(db["error"], "");
    assert_eq!(
        db["result"]["adjust"],
        json!({"linux": {"rdt": {
            "clos_id": {"value": "gold"},
            "schemata": {"value": ["L3:0=ff", "MB:0=50"]},
            "enable_monitoring": {"value": true}
        }}})
    );
    let web = step(steps, "web");
    assert_eq!(web["error"], "");
    assert!(web["result"]["adjust"].is_null(), "{web:#}");
    let bad = step(steps, "bad");
    assert_eq!(
        bad["error"],
        "rpc error: code = Unknown desc = invalid boolean value \"maybe\" in annotation \
         enablemonitoring.rdt.noderesource.dev/container.bad"
    );
}
