//! The network-logger plugin as an external plugin of the Go reference runtime.

mod common;

use common::{assert_pod_events_logged, run_with_go_runtime};
use nri_interop::plugin_tests::pod0_steps;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-network-logger");

#[test]
fn logs_pod_networks_at_sync_and_pod_events_only() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [
            {"id": "pod0", "name": "web", "uid": "u0", "namespace": "prod",
             "ips": ["10.244.1.22", "fd00::16"],
             "linux": {"namespaces": [
                 {"type": "pid", "path": ""},
                 {"type": "network", "path": "/var/run/netns/cni-d3f4"}]}},
            {"id": "pod1", "name": "proxy", "uid": "u1", "namespace": "kube-system"}
        ],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1}],
        "steps": pod0_steps(
            &[
                "RunPodSandbox",
                "CreateContainer",
                "StopContainer",
                "StopPodSandbox",
                "RemovePodSandbox",
            ],
            Value::Null,
        )
    });
    let (out, log) = run_with_go_runtime(dir.path(), &scenario, BIN, &["-idx", "10"]);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert_eq!(out.json["plugins"], json!(["10-network-logger"]));
    let web = "prod/web: namespace=/var/run/netns/cni-d3f4 ips=[10.244.1.22 fd00::16]";
    for line in [
        // The harness synchronizes the pods no step runs: pod1 only.
        "synchronized state with the runtime (1 pods, 0 containers)",
        "pod kube-system/proxy: namespace=<host-network> ips=[]",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
    // Subscribed to the pod events only.
    assert_pod_events_logged(&log, web);
}
