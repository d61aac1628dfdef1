//! The ulimit adjuster as an external plugin of the Go reference runtime: the rlimits
//! annotated on the pod reach the runtime's CreateContainer result, bad annotations
//! fail the creation of their container only.

mod common;

use common::{run_with_go_runtime, step};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-ulimit-adjuster");

fn ctr(id: &str) -> Value {
    json!({"id": id, "pod_sandbox_id": "pod0", "name": id, "state": 1})
}

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "sleep", "uid": "u0", "namespace": "default",
                  "annotations": {
                      "ulimits.noderesource.dev/container.web":
                          "- type: memlock\n  hard: 987654\n  soft: 645321\n- type: RLIMIT_NOFILE\n  hard: 4096\n  soft: 1024\n- type: nproc\n  hard: 9000\n",
                      "ulimits.nri.containerd.io/container.legacy": "- {type: rlimit_core, hard: 10, soft: 5}",
                      "ulimits.noderesource.dev/container.badtype": "- {type: ULIMIT_NOFILE, hard: 10, soft: 5}",
                      "ulimits.noderesource.dev/container.badorder": "- {type: stack, hard: 1, soft: 5}",
                      "ulimits.noderesource.dev/container.garbage": "{not: a list}"
                  }}],
        "containers": [ctr("web"), ctr("legacy"), ctr("badtype"), ctr("badorder"),
                       ctr("garbage"), ctr("plain")],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "web"},
            {"op": "CreateContainer", "container": "legacy"},
            {"op": "CreateContainer", "container": "badtype"},
            {"op": "CreateContainer", "container": "badorder"},
            {"op": "CreateContainer", "container": "garbage"},
            {"op": "CreateContainer", "container": "plain"},
            {"op": "stop"}
        ]
    })
}

fn create_step<'a>(out: &'a nri_interop::RuntimeOutput, name: &str) -> &'a Value {
    out.steps()
        .iter()
        .find(|s| s["op"] == "CreateContainer" && s["container"] == name)
        .unwrap_or_else(|| panic!("no CreateContainer {name}: {:#}", out.json))
}

#[test]
fn annotated_rlimits_reach_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run_with_go_runtime(
        dir.path(),
        &scenario(),
        BIN,
        &["-name", "ulimit-adjuster", "-idx", "10", "-verbose"],
    );
    assert_eq!(out.json["plugins"], json!(["10-ulimit-adjuster"]));
    let (_, err) = step(&out, "RunPodSandbox");
    assert_eq!(err, "");

    let web = create_step(&out, "web");
    assert_eq!(web["error"], "", "{log}");
    assert_eq!(
        web["result"]["adjust"]["rlimits"],
        json!([
            {"type": "RLIMIT_MEMLOCK", "hard": 987654, "soft": 645321},
            {"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 1024},
            {"type": "RLIMIT_NPROC", "hard": 9000}
        ])
    );

    let legacy = create_step(&out, "legacy");
    assert_eq!(legacy["error"], "");
    assert_eq!(
        legacy["result"]["adjust"]["rlimits"],
        json!([{"type": "RLIMIT_CORE", "hard": 10, "soft": 5}])
    );

    let plain = create_step(&out, "plain");
    assert_eq!(plain["error"], "");
    assert!(
        plain["result"]["adjust"].get("rlimits").is_none(),
        "{plain}"
    );

    for (name, message) in [
        ("badtype", r#"failed to parse type: "ULIMIT_NOFILE""#),
        (
            "badorder",
            r#"ulimit "RLIMIT_STACK" must have hard limit >= soft limit"#,
        ),
        ("garbage", "expected a list, got a mapping"),
    ] {
        let step = create_step(&out, name);
        let error = step["error"].as_str().unwrap();
        assert!(error.contains(message), "{name}: {error}");
    }
}
