//! Go plugins on our runtime: the reference plugin on the official stub
//! v0.12.5 (`nri-ref-plugin`) and on v0.9.0 (`nri-ref-plugin-old`, no
//! dedicated notification RPCs) register with `nri-rs-ref-runtime`
//! (nri-adaptation) as external and as pre-installed plugins, receive every
//! event they know, and their adjustments, updates, errors, delays beyond
//! the request timeout and crashes have the documented effect.

mod common;

use std::path::Path;

use common::runtimes::{install_go_plugin, spawn_go_plugin, Rt, Running};
use common::{lifecycle, STATE_CHANGE_EVENTS, TIMEOUT};
use nri_interop::{read_event_log, wait_for_events, RuntimeOutput};
use serde_json::{json, Value};

const REF: &str = "nri-ref-plugin";
const OLD: &str = "nri-ref-plugin-old";

fn every_event_steps() -> Value {
    json!([
        {"op": "wait_plugins", "count": 1, "timeout_ms": 20000},
        {"op": "RunPodSandbox", "pod": "pod0"},
        {"op": "UpdatePodSandbox", "pod": "pod0", "linux_resources": {"cpu": {"shares": {"value": 2}}}},
        {"op": "PostUpdatePodSandbox", "pod": "pod0"},
        {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"},
        {"op": "PostCreateContainer", "container": "ctr0"},
        {"op": "StartContainer", "container": "ctr0"},
        {"op": "PostStartContainer", "container": "ctr0"},
        {"op": "wait_updates", "count": 1, "timeout_ms": 20000},
        {"op": "UpdateContainer", "container": "ctr0", "linux_resources": {"cpu": {"shares": {"value": 512}}}},
        {"op": "PostUpdateContainer", "container": "ctr0"},
        {"op": "StopContainer", "container": "ctr0"},
        {"op": "RemoveContainer", "container": "ctr0"},
        {"op": "StopPodSandbox", "pod": "pod0"},
        {"op": "RemovePodSandbox", "pod": "pod0"}
    ])
}

fn scenario(steps: Value) -> Value {
    json!({
        "runtime": {"name": "rust-runtime", "version": "v9.9.9"},
        "request_timeout_ms": 4000,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1, "env": ["A=B"]},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "ctr1", "state": 3}
        ],
        "steps": steps,
    })
}

fn cpu_update(ctr: &str, shares: u64) -> Value {
    json!({"container_id": ctr, "linux": {"resources": {"cpu": {"shares": {"value": shares}}}}})
}

fn scripted_config(log: &Path) -> Value {
    json!({
        "log": log,
        "adjust": {"env": [{"key": "X", "value": "Y"}], "annotations": {"by": "go"}},
        "update": {"UpdateContainer": [cpu_update("ctr1", 30)], "StopContainer": [cpu_update("ctr1", 40)]},
        "unsolicited": [{"after_event": "PostStartContainer",
                         "updates": [cpu_update("ctr1", 50), cpu_update("ctr-x", 1)]}]
    })
}

/// Our runtime on `scenario` with `program` pre-installed once per
/// `(idx-name, config)` of `plugins` (in `dir/plugins`, the configurations
/// in `dir/conf`).
fn run_preinstalled(
    dir: &Path,
    scenario: &Value,
    program: &str,
    plugins: &[(&str, Value)],
) -> RuntimeOutput {
    let plugin_dir = dir.join("plugins");
    let conf_dir = dir.join("conf");
    for (id, config) in plugins {
        install_go_plugin(&plugin_dir, &conf_dir, program, id, config);
    }
    Running::with_plugin_dirs(Rt::Rust, dir, scenario, &plugin_dir, &conf_dir)
}

/// Runs the every-event scenario on our runtime with `program` as plugin
/// `10-go`, external or pre-installed; returns the output and the log.
fn run_every_event(program: &str, external: bool) -> (RuntimeOutput, Vec<Value>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("10-go.jsonl");
    let config = scripted_config(&log);
    let sc = scenario(every_event_steps());
    let out = if external {
        let (rt, socket) = Running::spawn_with_socket(Rt::Rust, dir.path(), &sc, &[]);
        let mut plugin = spawn_go_plugin(program, dir.path(), &socket, "go", "10", &config);
        let mut out = rt.finish(TIMEOUT);
        out.stderr.push_str("\n--- plugin:\n");
        out.stderr.push_str(&plugin.stderr());
        // An external plugin sees the runtime go away and exits.
        assert!(
            plugin.wait_timeout(TIMEOUT).success(),
            "{}",
            plugin.stderr()
        );
        out
    } else {
        run_preinstalled(dir.path(), &sc, program, &[("10-go", config.clone())])
    };
    let events = read_event_log(&log).unwrap();
    (out, events, config)
}

fn check_runtime_side(out: &RuntimeOutput, events: &[Value]) {
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.failed_steps().is_empty(),
        "{:?}\n{}",
        out.failed_steps(),
        out.stderr
    );
    assert_eq!(out.json["plugins"], json!(["10-go"]));
    let create = &out.step("CreateContainer").unwrap()["result"]["adjust"];
    assert_eq!(create["env"], json!([{"key": "X", "value": "Y"}]));
    assert_eq!(create["annotations"], json!({"by": "go"}));
    assert_eq!(
        out.step("UpdateContainer").unwrap()["result"]["update"],
        json!([cpu_update("ctr1", 30)])
    );
    assert_eq!(
        out.step("StopContainer").unwrap()["result"]["update"],
        json!([cpu_update("ctr1", 40)])
    );
    // The unsolicited update: ctr-x is unknown to the runtime, so it failed.
    assert_eq!(
        out.json["update_calls"],
        json!([{"updates": [cpu_update("ctr1", 50), cpu_update("ctr-x", 1)],
                "failed": [cpu_update("ctr-x", 1)]}])
    );
    let reply = events
        .iter()
        .find(|e| e["event"] == "UpdateContainers")
        .unwrap();
    assert_eq!(reply["failed"], json!([cpu_update("ctr-x", 1)]));

    let configure = common::entry(events, "Configure");
    assert_eq!(configure["runtime"], "rust-runtime");
    assert_eq!(configure["version"], "v9.9.9");
    assert_eq!(configure["request_timeout_ms"], 4000);
    // Later events carry the container as adjusted at creation.
    let start = common::entry(events, "StartContainer");
    assert!(
        start["container"]["env"]
            .as_array()
            .unwrap()
            .contains(&json!("X=Y")),
        "{start}"
    );
    assert_eq!(start["container"]["annotations"]["by"], "go");
}

#[test]
fn reference_plugin_receives_every_event_external_and_pre_installed() {
    for external in [true, false] {
        let (out, events, config) = run_every_event(REF, external);
        check_runtime_side(&out, &events);
        assert_eq!(
            lifecycle(&events),
            [&nri_interop::LIFECYCLE_V012[..], &["Shutdown"]].concat(),
            "external: {external}"
        );
        // Every event came through its own RPC.
        for e in events.iter().filter(|e| e.get("rpc").is_some()) {
            assert_eq!(e["rpc"], e["event"], "{e}");
        }
        let configure = common::entry(&events, "Configure");
        assert_eq!(configure["nri_version"], nri_api::NRI_VERSION);
        let expected_config = if external {
            String::new()
        } else {
            // The drop-in file, as written.
            serde_json::to_string_pretty(&config).unwrap()
        };
        assert_eq!(
            configure
                .get("config")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim_end(),
            expected_config,
        );
        let validate = common::entry(&events, "ValidateContainerAdjustment");
        assert_eq!(
            validate["validate"]["plugins"],
            json!([{"name": "go", "index": "10"}])
        );
        assert_eq!(
            out.json["synchronize"].as_array().unwrap().len(),
            if external { 2 } else { 1 }
        );
    }
}

#[test]
fn old_plugin_gets_notifications_by_state_change_external_and_pre_installed() {
    for external in [true, false] {
        let (out, events, _) = run_every_event(OLD, external);
        check_runtime_side(&out, &events);
        assert_eq!(
            lifecycle(&events),
            [&nri_interop::lifecycle_v09()[..], &["Shutdown"]].concat(),
            "external: {external}"
        );
        for e in events.iter().filter(|e| e.get("rpc").is_some()) {
            let event = e["event"].as_str().unwrap();
            let want = if STATE_CHANGE_EVENTS.contains(&event) {
                "StateChange"
            } else {
                event
            };
            assert_eq!(e["rpc"], want, "{e}");
        }
        // v0.9.0 does not record the runtime's NRI version.
        assert!(common::entry(&events, "Configure")
            .get("nri_version")
            .is_none());
        let pod_event = common::entry(&events, "RunPodSandbox");
        assert_eq!(pod_event["pod"]["uid"], "uid0");
        let post = common::entry(&events, "PostCreateContainer");
        assert_eq!(post["container"]["id"], "ctr0");
    }
}

/// Three plugins of `program`: `10-err` fails StartContainer, `20-slow`
/// answers PostStartContainer after the request timeout, `30-crash` exits on
/// RemoveContainer. The failing call fails; the others succeed, dropping the
/// slow and the crashed plugin; later calls succeed without them.
fn faults(program: &str, external: bool) {
    let dir = tempfile::tempdir().unwrap();
    let log = |id: &str| dir.path().join(format!("{id}.jsonl"));
    let configs = [
        (
            "10-err",
            json!({"log": log("10-err"), "error": {"StartContainer": "refusing to start"}}),
        ),
        (
            "20-slow",
            json!({"log": log("20-slow"), "delay_ms": {"PostStartContainer": 5000}}),
        ),
        (
            "30-crash",
            json!({"log": log("30-crash"), "exit": {"RemoveContainer": 3}}),
        ),
    ];
    let mut steps = every_event_steps();
    let steps_vec = steps.as_array_mut().unwrap();
    steps_vec[0]["count"] = json!(3);
    steps_vec.retain(|s| s["op"] != "wait_updates");
    let mut sc = scenario(steps);
    sc["request_timeout_ms"] = json!(1500);
    let mut procs = Vec::new();
    let out = if external {
        let (rt, socket) = Running::spawn_with_socket(Rt::Rust, dir.path(), &sc, &[]);
        for (id, config) in &configs {
            let (idx, name) = id.split_once('-').unwrap();
            procs.push(spawn_go_plugin(
                program,
                dir.path(),
                &socket,
                name,
                idx,
                config,
            ));
        }
        rt.finish(TIMEOUT)
    } else {
        run_preinstalled(dir.path(), &sc, program, &configs)
    };
    let what = format!("{program}, external: {external}\n{}", out.stderr);
    assert!(out.status.success(), "{what}");
    let failed = out.failed_steps();
    assert_eq!(failed.len(), 1, "{failed:?} {what}");
    assert_eq!(failed[0].0, "StartContainer");
    assert!(failed[0].1.ends_with("refusing to start"), "{failed:?}");
    assert_eq!(
        out.json["plugins"],
        json!(["10-err", "20-slow", "30-crash"])
    );

    let err = read_event_log(&log("10-err")).unwrap();
    let slow = read_event_log(&log("20-slow")).unwrap();
    let crash = wait_for_events(&log("30-crash"), TIMEOUT, |e| !e.is_empty()).unwrap();
    // The failing plugin stays and sees everything up to the end.
    assert_eq!(lifecycle(&err).last(), Some(&"Shutdown"), "{what}");
    assert!(lifecycle(&err).contains(&"RemovePodSandbox"));
    // The slow one was dropped at its timeout: nothing after PostStartContainer.
    let slow_events = lifecycle(&slow);
    assert_eq!(
        slow_events.last(),
        Some(&"PostStartContainer"),
        "{slow_events:?} {what}"
    );
    // The crashed one: nothing after RemoveContainer, and the call went on.
    assert_eq!(lifecycle(&crash).last(), Some(&"RemoveContainer"), "{what}");
    for op in [
        "PostStartContainer",
        "RemoveContainer",
        "StopPodSandbox",
        "RemovePodSandbox",
    ] {
        assert_eq!(out.step(op).unwrap()["error"], "", "{op} {what}");
    }
    drop(procs);
}

#[test]
fn reference_plugin_errors_timeouts_and_crashes() {
    faults(REF, false);
    faults(REF, true);
}

#[test]
fn old_plugin_errors_timeouts_and_crashes() {
    faults(OLD, false);
    faults(OLD, true);
}
