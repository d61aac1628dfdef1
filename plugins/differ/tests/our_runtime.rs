//! The differ around the Go reference plugin, on our runtime side (`nri-adaptation`).

mod common;

use common::spawn_ref_plugin;

use nri_interop::harness_bin;
use nri_interop::plugin_tests::{
    container, pod, run_pod_and_create, start_adaptation, wait_plugins, PluginProcess,
};

const BIN: &str = env!("CARGO_BIN_EXE_nri-differ");

#[tokio::test]
async fn shows_the_changes_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    // Built (blocking) before the adaptation runs on this test's runtime.
    let ref_plugin = harness_bin("nri-ref-plugin");
    let nri = start_adaptation(dir.path()).await;
    let socket = dir.path().join("nri.sock");
    let socket = socket.to_str().unwrap();
    let log_file = dir.path().join("differ.log");
    let differ = PluginProcess::spawn(
        BIN,
        &[
            "-socket-path",
            socket,
            "-indices",
            "05,15",
            "-yaml",
            "-output",
            log_file.to_str().unwrap(),
        ],
        dir.path(),
        "differ",
    );
    let _ref_plugin = spawn_ref_plugin(dir.path(), &ref_plugin, socket);
    wait_plugins(&nri, &["05-differ", "10-ref", "15-differ"], &differ).await;

    let pod = pod("pod0", "web", &[]);
    let reply = run_pod_and_create(&nri, &pod, &container("server", &pod)).await;
    nri.stop().await;

    let adjust = reply.adjust.unwrap();
    assert_eq!(adjust.annotations["differ.example.com/added"], "yes");

    let log = std::fs::read_to_string(&log_file).unwrap();
    for line in [
        "[15] RunPodSandbox: pod: <no changes>",
        "[15] CreateContainer: pod: <no changes>",
        "[15] CreateContainer: container: +   differ.example.com/added: yes",
        "[15] CreateContainer: container: + - ADDED=1",
        "[15] CreateContainer: container:   name: server",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
}
