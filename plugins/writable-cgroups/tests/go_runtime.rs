//! The writable-cgroups plugin as an external plugin of the Go reference runtime.

mod common;

use std::path::Path;

use common::{args, run_with_go_runtime};
use nri_interop::RuntimeOutput;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-writable-cgroups");

const DELEGATE: &str =
    "36 35 98:0 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
const NO_DELEGATE: &str =
    "36 35 98:0 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n";

fn cgroup_mount(options: &[&str]) -> Value {
    json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
           "options": options})
}

fn ctr(name: &str, mounts: Value) -> Value {
    json!({"id": name, "pod_sandbox_id": "pod0", "name": name, "state": 1, "mounts": mounts})
}

fn scenario() -> Value {
    let ro = json!([{"destination": "/proc", "type": "proc", "source": "proc"},
                    cgroup_mount(&["ro", "nosuid", "noexec", "nodev"])]);
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "p", "uid": "u0", "namespace": "ns",
                  "annotations": {
                      "writable-cgroups.noderesource.dev/pod": "true",
                      "writable-cgroups.noderesource.dev/container.off": "false"
                  }}],
        "containers": [
            ctr("on", ro.clone()),
            ctr("off", ro),
            ctr("already", json!([cgroup_mount(&["rw", "nosuid"])])),
            ctr("nomount", json!([]))
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "on"},
            {"op": "CreateContainer", "container": "off"},
            {"op": "CreateContainer", "container": "already"},
            {"op": "CreateContainer", "container": "nomount"},
            {"op": "stop"}
        ]
    })
}

fn run(dir: &Path, mountinfo: &str) -> (RuntimeOutput, String) {
    let file = dir.join("mountinfo");
    std::fs::write(&file, mountinfo).unwrap();
    let file = file.to_str().unwrap().to_owned();
    run_with_go_runtime(dir, &scenario(), BIN, &args(&["-host-mount-file", &file]))
}

fn create<'a>(out: &'a RuntimeOutput, name: &str) -> &'a Value {
    out.steps()
        .iter()
        .find(|s| s["op"] == "CreateContainer" && s["container"] == name)
        .unwrap_or_else(|| panic!("no CreateContainer {name}: {:#}", out.json))
}

#[test]
fn annotated_containers_get_a_read_write_cgroup_mount() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run(dir.path(), DELEGATE);
    assert_eq!(out.json["plugins"], json!(["10-writable-cgroups"]));
    assert!(log.contains("enabling writable cgroups support"), "{log}");

    let on = create(&out, "on");
    assert_eq!(on["error"], "", "{log}");
    // The plugin sends the new mount and the removal of the old one; the Go
    // adaptation consumes the removal and keeps the new mount.
    assert_eq!(
        on["result"]["adjust"]["mounts"],
        json!([cgroup_mount(&["nosuid", "noexec", "nodev", "rw"])]),
        "{:#}",
        out.json
    );
    for name in ["off", "already"] {
        let step = create(&out, name);
        assert_eq!(step["error"], "");
        assert!(
            step["result"]["adjust"].get("mounts").is_none(),
            "{name}: {step}"
        );
    }
    let error = create(&out, "nomount")["error"].as_str().unwrap();
    assert!(
        error.contains("no /sys/fs/cgroup mount found to modify, this is unexpected"),
        "{error}"
    );
}

#[test]
fn nothing_changes_without_nsdelegate_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run(dir.path(), NO_DELEGATE);
    assert!(log.contains("disabling writable cgroups"), "{log}");
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    for name in ["on", "off", "already", "nomount"] {
        let step = create(&out, name);
        assert!(
            step["result"]["adjust"].get("mounts").is_none(),
            "{name}: {step}"
        );
    }
}
