//! `nri-tap` between the Go reference on both sides: the Go runtime
//! (`nri-ref-runtime`, official `pkg/adaptation`) and the Go test plugin
//! (`nri-ref-plugin`, official stub) give the same results through the tap
//! as without it, and the recording holds every event.

mod common;

use std::path::{Path, PathBuf};

use nri_interop::plugin_tests::{cpu_shares, pod0_steps, POD0_REQUESTS};
use nri_interop::RuntimeOutput;
use serde_json::{json, Value};

use common::*;

const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The events of the scenario, each answered by the plugin: the pod is not
/// stopped.
fn events() -> &'static [&'static str] {
    &POD0_REQUESTS[..6]
}

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "registration_timeout_ms": 4000,
        "request_timeout_ms": 3000,
        "pods": [{"id": "pod0", "name": "web", "uid": "uid-0", "namespace": "prod"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1,
             "args": ["/bin/server"], "env": ["A=B"]},
            {"id": "ctr-pre", "pod_sandbox_id": "pod0", "name": "old", "state": 3}
        ],
        "steps": pod0_steps(events(), cpu_shares(512))
    })
}

fn plugin_config(log: &Path) -> Value {
    json!({
        "log": log,
        "adjust": {
            "annotations": {"go.example.com/adjusted": "yes"},
            "env": [{"key": "GO_PLUGIN", "value": "on"}],
            "linux": {"resources": {"memory": {"limit": {"value": 268435456}}}}
        },
        "update": {
            "Synchronize": [{"container_id": "ctr-pre",
                             "linux": {"resources": {"cpu": {"shares": {"value": 200}}}}}],
            "UpdateContainer": [{"container_id": "ctr0",
                                 "linux": {"resources": {"cpu": {"shares": {"value": 1024}}}}}]
        }
    })
}

/// Runs the Go runtime and the Go plugin; with `tap`, the plugin connects
/// to a tap (recording to `dir/rec.jsonl`) in front of the runtime.
fn run(dir: &Path, tap: bool) -> (RuntimeOutput, Option<PathBuf>) {
    let log = dir.join("events.jsonl");
    let (runtime, socket) = spawn_runtime_with_socket("nri-ref-runtime", dir, &scenario());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let recording = dir.join("rec.jsonl");
    let plugin_socket = if tap {
        let tap_socket = dir.join("tap.sock");
        let listener = rt
            .block_on(async { nri_tap::proxy::listen(&tap_socket) })
            .unwrap();
        let (rec, _writer) = rt
            .block_on(nri_tap::record::Recorder::to_path(
                &recording,
                nri_tap::record::Options::default(),
            ))
            .unwrap();
        rt.spawn(nri_tap::proxy::serve(listener, socket, rec));
        tap_socket
    } else {
        socket
    };
    let go_plugin = nri_interop::harness_bin("nri-ref-plugin");
    let mut plugin = spawn_plugin(
        &go_plugin,
        dir,
        &plugin_socket,
        "go",
        "10",
        &plugin_config(&log),
        &[],
    );
    let out = runtime.finish(TIMEOUT).unwrap();
    let status = plugin.wait_timeout(TIMEOUT);
    assert!(status.success(), "{status}: {}", plugin.stderr());
    if tap {
        // Both peers are gone: the session's last line follows.
        let deadline = std::time::Instant::now() + TIMEOUT;
        while !std::fs::read_to_string(&recording)
            .unwrap_or_default()
            .contains(r#""type":"close""#)
        {
            assert!(std::time::Instant::now() < deadline, "no close line");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    (out, tap.then_some(recording))
}

#[test]
fn go_runtime_and_go_plugin_through_the_tap_match_the_direct_run() {
    let direct_dir = tempfile::tempdir().unwrap();
    let (direct, _) = run(direct_dir.path(), false);
    assert!(direct.status.success(), "{}", direct.stderr);
    let tapped_dir = tempfile::tempdir().unwrap();
    let (tapped, recording) = run(tapped_dir.path(), true);
    assert!(tapped.status.success(), "{}", tapped.stderr);
    assert_eq!(tapped.json, direct.json);
    // The plugin's answers reached the runtime.
    let text = serde_json::to_string(&tapped.json).unwrap();
    assert!(text.contains("go.example.com/adjusted"), "{text}");

    let text = std::fs::read_to_string(recording.unwrap()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let methods: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "response" && l["dir"] == "plugin->runtime")
        .filter_map(|l| l["method"].as_str())
        .collect();
    for m in ["Configure", "Synchronize"].iter().chain(events()) {
        assert!(methods.contains(m), "{m} not in {methods:?}");
    }
    let register = lines
        .iter()
        .find(|l| l["method"] == "RegisterPlugin" && l["type"] == "request")
        .unwrap();
    assert_eq!(register["plugin"], "10-go");
    let create = lines
        .iter()
        .find(|l| l["method"] == "CreateContainer" && l["type"] == "response")
        .unwrap();
    assert_eq!(
        create["response"]["adjust"]["annotations"]["go.example.com/adjusted"],
        "yes"
    );
    assert!(lines.iter().all(|l| l["type"] != "malformed"), "{text}");
}
