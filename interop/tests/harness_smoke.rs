//! Go with Go: the reference runtime and the reference plugin run one
//! scenario together, proving the harness itself works.

use std::time::Duration;

use nri_interop::{
    event_names, read_event_log, run_harness, wait_for_path, write_json, GoProcess, RefRuntime,
};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(60);

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "registration_timeout_ms": 5000,
        "request_timeout_ms": 2000,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1,
             "args": ["sleep", "10"], "env": ["A=B"]},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "ctr1", "state": 3}
        ],
        "fail_updates": ["ctr-x"],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 20000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "PostStartContainer", "container": "ctr0"},
            {"op": "UpdateContainer", "container": "ctr0",
             "linux_resources": {"cpu": {"shares": {"value": 512}}}},
            {"op": "StopContainer", "container": "ctr0"},
            {"op": "RemoveContainer", "container": "ctr0"},
            {"op": "wait_updates", "count": 1, "timeout_ms": 20000}
        ]
    })
}

fn plugin_config(log: &std::path::Path) -> Value {
    json!({
        "log": log,
        "adjust": {"env": [{"key": "INJECTED", "value": "1"}], "annotations": {"owner": "smoke"}},
        "update": {
            "Synchronize": [{"container_id": "ctr1",
                             "linux": {"resources": {"cpu": {"shares": {"value": 10}}}}}]
        },
        "error": {"StopContainer": "refusing to stop"},
        "unsolicited": [{
            "after_event": "PostStartContainer",
            "updates": [{"container_id": "ctr1"}, {"container_id": "ctr-x"}]
        }]
    })
}

#[test]
fn reference_runtime_and_plugin_run_a_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let log = dir.path().join("plugin.jsonl");
    let scenario = write_json(dir.path(), "scenario.json", &scenario()).unwrap();
    let config = write_json(dir.path(), "plugin.json", &plugin_config(&log)).unwrap();

    let runtime = RefRuntime::spawn(
        "nri-ref-runtime",
        &scenario,
        ["-socket".as_ref(), socket.as_os_str()],
    )
    .unwrap();
    wait_for_path(&socket, TIMEOUT).unwrap();
    let mut plugin = GoProcess::spawn(
        "nri-ref-plugin",
        [
            "-config".as_ref(),
            config.as_os_str(),
            "-socket".as_ref(),
            socket.as_os_str(),
            "-name".as_ref(),
            "smoke".as_ref(),
            "-idx".as_ref(),
            "10".as_ref(),
        ],
        &dir.path().join("plugin.stderr"),
    )
    .unwrap();

    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "runtime failed: {}", out.stderr);

    // Every step but the refused StopContainer succeeded.
    assert_eq!(
        out.failed_steps(),
        [(
            "StopContainer".to_owned(),
            "rpc error: code = Unknown desc = refusing to stop".to_owned()
        )],
        "{:#}",
        out.json
    );
    assert_eq!(out.json["plugins"], json!(["10-smoke"]));

    // The plugin's adjustment came back from CreateContainer.
    let create = out.step("CreateContainer").unwrap();
    assert_eq!(
        create["result"]["adjust"],
        json!({"annotations": {"owner": "smoke"}, "env": [{"key": "INJECTED", "value": "1"}]})
    );

    // The synchronize of the plugin saw the pre-existing container ctr1 and
    // returned its update. (The first SyncFn call is the start-up one for
    // pre-installed plugins, of which there are none.)
    let syncs = out.json["synchronize"].as_array().unwrap();
    let last = syncs.last().unwrap();
    assert_eq!(last["containers"], 1);
    assert_eq!(last["updates"][0]["container_id"], "ctr1");

    // The unsolicited update arrived; the unknown container failed.
    assert_eq!(
        out.json["update_calls"],
        json!([{
            "updates": [{"container_id": "ctr1"}, {"container_id": "ctr-x"}],
            "failed": [{"container_id": "ctr-x"}]
        }])
    );

    // The plugin saw the events in order, each through its dedicated RPC,
    // and exits when the runtime goes away.
    plugin.wait_timeout(TIMEOUT).unwrap();
    let events = read_event_log(&log).unwrap();
    let lifecycle: Vec<&str> = event_names(&events)
        .into_iter()
        .filter(|e| *e != "UpdateContainers")
        .collect();
    assert_eq!(
        lifecycle,
        [
            "Configure",
            "Synchronize",
            "RunPodSandbox",
            "CreateContainer",
            "ValidateContainerAdjustment",
            "StartContainer",
            "PostStartContainer",
            "UpdateContainer",
            "StopContainer",
            "RemoveContainer",
            "closed",
            "exit"
        ]
    );
    let configure = &events[0];
    assert_eq!(configure["runtime"], "containerd");
    assert_eq!(configure["request_timeout_ms"], 2000);
    let update = events
        .iter()
        .find(|e| e["event"] == "UpdateContainer")
        .unwrap();
    assert_eq!(update["rpc"], "UpdateContainer");
    assert_eq!(update["resources"]["cpu"]["shares"]["value"], 512);
    assert_eq!(update["container"]["state"], 3, "container is running");
    let unsolicited = events
        .iter()
        .find(|e| e["event"] == "UpdateContainers")
        .unwrap();
    assert_eq!(unsolicited["failed"], json!([{"container_id": "ctr-x"}]));
}

#[test]
fn wire_vectors_encoded_by_go_decode_in_go() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_harness("nri-wire-vectors", ["encode"], TIMEOUT).unwrap();
    assert!(run.status.success(), "{}", run.stderr);
    let vectors = run.json().unwrap();
    let cases = vectors["cases"].as_array().unwrap();

    // A request larger than 4096 bytes leaves Go in several mux frames, the
    // first one exactly 4096 bytes long.
    let sync = cases
        .iter()
        .find(|c| c["name"] == "synchronize_large")
        .unwrap();
    let frames = sync["client_to_server_frames"].as_array().unwrap();
    assert!(frames.len() > 1, "{frames:?}");
    assert_eq!(frames[0]["len"], 4096);

    let input = json!({"cases": cases.iter().map(|c| json!({
        "name": c["name"], "client_to_server_hex": c["client_to_server_hex"]
    })).collect::<Vec<_>>()});
    let input = write_json(dir.path(), "decode.json", &input).unwrap();
    let run = run_harness(
        "nri-wire-vectors",
        ["decode".as_ref(), input.as_os_str()],
        TIMEOUT,
    )
    .unwrap();
    assert!(run.status.success(), "{}", run.stderr);
    let decoded = run.json().unwrap();
    let decoded = decoded["cases"].as_array().unwrap();
    assert_eq!(decoded.len(), cases.len());
    for (enc, dec) in cases.iter().zip(decoded) {
        assert_eq!(dec["error"], "", "{}", enc["name"]);
        if enc["method"] == "NoSuchMethod" {
            assert_eq!(dec["requests"], json!([]));
            assert_eq!(dec["responses"][0]["status"]["code"], 12);
            continue;
        }
        assert_eq!(dec["requests"][0]["method"], enc["method"]);
        assert_eq!(
            dec["requests"][0]["request_json"], enc["request_json"],
            "{}",
            enc["name"]
        );
    }
}
