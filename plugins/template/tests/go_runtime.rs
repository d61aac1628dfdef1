//! The template plugin as an external plugin of the Go reference runtime.

mod common;

use common::{run_with_go_runtime, step};
use nri_interop::plugin_tests::{cpu_shares, pod0_steps, POD0_REQUESTS};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-template");

fn scenario() -> Value {
    // Every request, and the pod updated once it runs.
    let mut events = POD0_REQUESTS.to_vec();
    events.insert(1, "UpdatePodSandbox");
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "web", "uid": "u0", "namespace": "prod"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1}],
        "steps": pod0_steps(&events, cpu_shares(512))
    })
}

#[test]
fn logs_every_event_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run_with_go_runtime(
        dir.path(),
        &scenario(),
        BIN,
        &["-name", "template", "-idx", "10"],
    );
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert_eq!(out.json["plugins"], json!(["10-template"]));
    let (create, _) = step(&out, "CreateContainer");
    assert!(
        create.get("adjust").is_none_or(|a| a == &json!({})),
        "unexpected adjustment: {create}"
    );
    for line in [
        "connected to containerd/v2.2.0 as 10-template",
        "synchronized state with the runtime (0 pods, 0 containers)",
        "started pod prod/web",
        "updating pod prod/web",
        "creating container prod/web/server",
        "validating adjustment of container prod/web/server",
        "starting container prod/web/server",
        "updating container prod/web/server",
        "stopped container prod/web/server",
        "removed container prod/web/server",
        "stopped pod prod/web",
        "removed pod prod/web",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
}

#[test]
fn events_flag_limits_the_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run_with_go_runtime(
        dir.path(),
        &scenario(),
        BIN,
        &[
            "-name",
            "template",
            "-idx",
            "10",
            "-events",
            "RunPodSandbox,StopContainer",
        ],
    );
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert!(log.contains("started pod prod/web"), "{log}");
    assert!(log.contains("stopped container prod/web/server"), "{log}");
    assert!(!log.contains("creating container"), "{log}");
    assert!(!log.contains("removed pod"), "{log}");
}

#[test]
fn bad_events_flag_fails_at_start() {
    let out = std::process::Command::new(BIN)
        .args(["-idx", "10", "-events", "NoSuchEvent"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failed to parse events"), "{stderr}");
}
