//! The plugin binary, connected as an external plugin to the Go reference runtime,
//! with hook files in two directories: matching hooks are injected by stage.

mod common;

use std::path::Path;

use common::{args, run_on_go_runtime};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-hook-injector");

fn write(dir: &Path, name: &str, value: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

fn scenario() -> Value {
    json!({
        "pods": [{"id": "pod0", "name": "hooked", "uid": "u0", "namespace": "default",
                  "annotations": {"com.example.department": "fluid-dynamics"}}],
        "containers": [
            {"id": "bb", "pod_sandbox_id": "pod0", "name": "bb", "state": 1,
             "args": ["busybox", "sleep", "inf"]},
            {"id": "other", "pod_sandbox_id": "pod0", "name": "other", "state": 1,
             "args": ["/bin/sleep", "inf"],
             "mounts": [{"destination": "/data", "source": "/srv", "type": "bind", "options": ["rbind"]}]}
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "CreateContainer", "container": "bb"},
            {"op": "CreateContainer", "container": "other"},
            {"op": "stop"}
        ]
    })
}

#[test]
fn hooks_are_injected_on_the_go_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("demo-hook.sh");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let hook = hook.to_str().unwrap();
    let share = dir.path().join("share");
    let etc = dir.path().join("etc");

    let always = json!({"version": "1.0.0",
        "hook": {"path": hook, "args": ["demo-hook.sh", "always"], "env": ["DEMO_HOOK_ALWAYS_INJECTED=true"]},
        "when": {"always": true}, "stages": ["prestart", "poststop"]});
    write(&share, "00-always-inject.json", &always);
    // Masked by the file of the same name in the override directory.
    write(
        &share,
        "busybox-inject.json",
        &json!({"version": "1.0.0",
        "hook": {"path": hook, "args": ["masked"]}, "when": {"always": true}, "stages": ["poststop"]}),
    );
    write(
        &etc,
        "busybox-inject.json",
        &json!({"version": "1.0.0",
        "hook": {"path": hook, "args": ["demo-hook.sh", "busybox"], "timeout": 3},
        "when": {"commands": ["busybox"]}, "stages": ["createContainer"]}),
    );
    write(
        &etc,
        "Department.json",
        &json!({"version": "1.0.0",
        "hook": {"path": hook, "args": ["demo-hook.sh", "department"]},
        "when": {"annotations": {"^com\\.example\\.department$": "fluid"}, "hasBindMounts": true},
        "stages": ["startContainer"]}),
    );
    write(
        &etc,
        "old.json",
        &json!({"hook": hook, "arguments": ["old"], "hasbindmounts": true,
        "stages": ["poststart"]}),
    );
    write(
        &etc,
        "broken.json",
        &json!({"version": "1.0.0", "hook": {"path": "/nonexistent/x"},
        "stages": ["poststop"]}),
    );

    let (out, stderr) = run_on_go_runtime(
        dir.path(),
        &scenario(),
        Path::new(BIN),
        |socket| {
            args(
                socket,
                &[
                    &"-no-reconnect",
                    &"-hooks-dir",
                    &share,
                    &"-hooks-dir",
                    &etc,
                    &"-disableWatch",
                ],
            )
        },
        &[],
    );
    assert_eq!(out.json["plugins"], json!(["30-hook-injector"]), "{stderr}");
    assert!(
        stderr.contains("broken.json"),
        "the bad file is reported: {stderr}"
    );
    let steps = out.steps();
    let step = |ctr: &str| steps.iter().find(|s| s["container"] == ctr).unwrap();

    let always_hook = json!({"path": hook, "args": ["demo-hook.sh", "always"],
                             "env": ["DEMO_HOOK_ALWAYS_INJECTED=true"]});
    let bb = step("bb");
    assert_eq!(bb["error"], "");
    assert_eq!(
        bb["result"]["adjust"],
        json!({"hooks": {
            "create_runtime": [always_hook],
            "create_container": [{"path": hook, "args": ["demo-hook.sh", "busybox"],
                                  "timeout": {"value": 3}}],
            "poststop": [always_hook]
        }}),
        "{stderr}"
    );
    let other = step("other");
    assert_eq!(other["error"], "");
    assert_eq!(
        other["result"]["adjust"],
        json!({"hooks": {
            "create_runtime": [always_hook],
            "start_container": [{"path": hook, "args": ["demo-hook.sh", "department"]}],
            "poststart": [{"path": hook, "args": [hook, "old"]}],
            "poststop": [always_hook]
        }})
    );
}
