//! The plugin binary, connected as an external plugin to the Go reference runtime:
//! annotations of a pod turn into the adjustments of its containers.

mod common;

use std::path::Path;

use common::{os_args, run_on_go_runtime};
use nri_stub::api::{MpolFlag, MpolMode};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-device-injector");

fn scenario() -> Value {
    let annotations = json!({
        "devices.noderesource.dev/container.c0":
            "- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3\n  file_mode: 0666\n",
        "devices.nri.io/pod": "- path: /dev/nri-zero\n  type: c\n  major: 1\n  minor: 5\n",
        "network-devices.noderesource.dev/container.c0": "- hostIf: ens2.100\n  Name: netdev0\n",
        "cdi-devices.noderesource.dev/container.c1": "- vendor0.com/device=zero\n",
        "sysctl.noderesource.dev/container.c1": "net.core.somaxconn: 256\n",
        "mounts.noderesource.dev/container.c2":
            "- source: /home\n  destination: /host-home\n  type: bind\n  options:\n  - bind\n  - ro\n",
        "memory-policy.nri.io/container.c2":
            "mode: MPOL_INTERLEAVE\nnodes: \"0,1\"\nflags: [MPOL_F_STATIC_NODES]\n",
        "io-priority.noderesource.dev/container.c2": "class: IOPRIO_CLASS_BE\npriority: 4\n",
        "memory-policy.noderesource.dev/container.bad": "mode: MPOL_NONSENSE\n",
    });
    let ctr = |name: &str| json!({"id": name, "pod_sandbox_id": "pod0", "name": name, "state": 1, "args": ["sh"]});
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "bbdev0", "uid": "u0", "namespace": "default",
                  "annotations": annotations}],
        "containers": [ctr("c0"), ctr("c1"), ctr("c2"), ctr("c3"), ctr("bad")],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "c0"},
            {"op": "CreateContainer", "container": "c1"},
            {"op": "CreateContainer", "container": "c2"},
            {"op": "CreateContainer", "container": "c3"},
            {"op": "CreateContainer", "container": "bad"},
            {"op": "stop"}
        ]
    })
}

fn adjust_of<'a>(steps: &'a [Value], ctr: &str) -> &'a Value {
    let step = steps
        .iter()
        .find(|s| s["op"] == "CreateContainer" && s["container"] == ctr)
        .unwrap();
    assert_eq!(step["error"], "", "{step:#}");
    &step["result"]["adjust"]
}

fn zero_device() -> Value {
    json!({"path": "/dev/nri-zero", "type": "c", "major": 1, "minor": 5})
}

#[test]
fn annotations_become_adjustments_on_the_go_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (out, stderr) = run_on_go_runtime(
        dir.path(),
        &scenario(),
        Path::new(BIN),
        |socket| os_args(&[&"-idx", &"10", &"-socket-path", &socket, &"-no-reconnect"]),
        &[],
    );
    assert_eq!(
        out.json["plugins"],
        json!(["10-device-injector"]),
        "{stderr}"
    );
    let steps = out.steps();

    assert_eq!(
        adjust_of(steps, "c0"),
        &json!({"linux": {
            "devices": [{"path": "/dev/nri-null", "type": "c", "major": 1, "minor": 3,
                         "file_mode": {"value": 0o666}}],
            "net_devices": {"ens2.100": {"name": "netdev0"}}
        }})
    );
    assert_eq!(
        adjust_of(steps, "c1"),
        &json!({
            "linux": {"devices": [zero_device()], "sysctl": {"net.core.somaxconn": "256"}},
            "CDI_devices": [{"name": "vendor0.com/device=zero"}]
        })
    );
    assert_eq!(
        adjust_of(steps, "c2"),
        &json!({
            "mounts": [{"destination": "/host-home", "type": "bind", "source": "/home",
                        "options": ["bind", "ro"]}],
            "linux": {
                "devices": [zero_device()],
                "io_priority": {"class": 2, "priority": 4},
                "memory_policy": {"mode": MpolMode::MpolInterleave as i32, "nodes": "0,1",
                                  "flags": [MpolFlag::MpolFStaticNodes as i32]}
            }
        })
    );
    // Only the pod-wide (legacy key) device applies to c3.
    assert_eq!(
        adjust_of(steps, "c3"),
        &json!({"linux": {"devices": [zero_device()]}})
    );

    let bad = steps.iter().find(|s| s["container"] == "bad").unwrap();
    assert_eq!(
        bad["error"],
        "rpc error: code = Unknown desc = invalid memory policy: invalid memory policy mode \"MPOL_NONSENSE\"",
        "{bad:#}"
    );
}
