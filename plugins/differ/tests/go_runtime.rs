//! The differ around the Go reference plugin, on the Go reference runtime: one
//! differ process at indices 05 and 15, the plugin at 10 adding an annotation and
//! an environment variable.

mod common;

use common::spawn_ref_plugin;
use nri_interop::harness_bin;
use nri_interop::plugin_tests::{spawn_go_runtime, step, PluginProcess, TIMEOUT};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_nri-differ");

#[test]
fn shows_what_the_plugin_between_its_indices_changed() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "web", "uid": "u0", "namespace": "prod"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1,
                        "env": ["A=B"]}],
        "steps": [
            {"op": "wait_plugins", "count": 3, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    });
    let (runtime, socket) = spawn_go_runtime(dir.path(), &scenario);
    let log_file = dir.path().join("differ.log");
    let socket = socket.to_str().unwrap();
    let mut differ = PluginProcess::spawn(
        BIN,
        &[
            "-socket-path",
            socket,
            "-no-reconnect",
            "-indices",
            "05,15",
            "-log-file",
            log_file.to_str().unwrap(),
        ],
        dir.path(),
        "differ",
    );
    let ref_plugin = harness_bin("nri-ref-plugin");
    let _ref_plugin = spawn_ref_plugin(dir.path(), &ref_plugin, socket);
    let out = runtime.finish(TIMEOUT).unwrap();
    differ.wait_exit(std::time::Duration::from_secs(5));
    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
    assert!(out.status.success(), "{}\n{log}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    let mut plugins: Vec<_> = out.json["plugins"].as_array().unwrap().clone();
    plugins.sort_by_key(|p| p.to_string());
    assert_eq!(
        plugins,
        [json!("05-differ"), json!("10-ref"), json!("15-differ")]
    );

    // The differ itself changes nothing.
    let (create, _) = step(&out, "CreateContainer");
    assert_eq!(
        create["adjust"]["annotations"],
        json!({"differ.example.com/added": "yes"}),
        "{create}"
    );

    for line in [
        "[15] RunPodSandbox: pod: <no changes>",
        "[15] CreateContainer: pod: <no changes>",
        "[15] CreateContainer: container: create: [annotations differ.example.com/added]: \
         From: <nil> -> To: yes",
        "[15] CreateContainer: container: create: [env 1]: From: <nil> -> To: ADDED=1",
        "[15] StartContainer: container: <no changes>",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
    assert!(!log.contains("[05] CreateContainer: container:"), "{log}");
}
