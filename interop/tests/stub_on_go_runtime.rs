//! A plugin built on nri-stub, run by the Go runtime adaptation (v0.12.5), both as
//! an external plugin connecting to the runtime's socket and as a pre-installed
//! plugin the runtime launches: it registers, gets its configuration, the existing
//! pods and containers, all 14 events with the right data, and its answers show up
//! in what the runtime does.

mod common;

use std::path::Path;

use common::{entry, ids, install_plugin, lifecycle, rust_plugin_bin, spawn_rust_plugin, TIMEOUT};
use nri_interop::{read_event_log, wait_for_events, write_json, RefRuntime, RuntimeOutput};
use serde_json::{json, Value};

const RESOURCES: &str = r#"{
    "cpu": {"shares": {"value": 512}, "quota": {"value": 20000}, "period": {"value": 100000}},
    "memory": {"limit": {"value": 134217728}}
}"#;

fn pod0() -> Value {
    json!({"id": "pod0", "name": "web", "uid": "uid-0", "namespace": "prod",
           "labels": {"app": "web"}, "annotations": {"team": "blue"}})
}

fn ctr0() -> Value {
    json!({"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1,
           "labels": {"tier": "front"}, "annotations": {"ctr-note": "hello"},
           "args": ["/bin/server", "--port", "80"], "env": ["A=B", "PATH=/bin"]})
}

fn scenario() -> Value {
    let resources: Value = serde_json::from_str(RESOURCES).unwrap();
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "registration_timeout_ms": 4000,
        "request_timeout_ms": 3000,
        "pods": [
            pod0(),
            {"id": "pod-pre", "name": "existing", "uid": "uid-pre", "namespace": "kube-system",
             "labels": {"k": "v"}}
        ],
        "containers": [
            ctr0(),
            {"id": "ctr-pre", "pod_sandbox_id": "pod-pre", "name": "old", "state": 3,
             "args": ["sleep", "inf"]}
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "UpdatePodSandbox", "pod": "pod0",
             "overhead_linux_resources": {"cpu": {"shares": {"value": 10}}},
             "linux_resources": {"memory": {"limit": {"value": 1073741824}}}},
            {"op": "PostUpdatePodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "PostCreateContainer", "container": "ctr0"},
            {"op": "StartContainer", "container": "ctr0"},
            {"op": "PostStartContainer", "container": "ctr0"},
            {"op": "UpdateContainer", "container": "ctr0", "linux_resources": resources},
            {"op": "PostUpdateContainer", "container": "ctr0"},
            {"op": "StopContainer", "container": "ctr0"},
            {"op": "RemoveContainer", "container": "ctr0"},
            {"op": "StopPodSandbox", "pod": "pod0"},
            {"op": "RemovePodSandbox", "pod": "pod0"},
            {"op": "stop"}
        ]
    })
}

fn adjustment() -> Value {
    json!({
        "annotations": {"rs.example.com/adjusted": "yes"},
        "env": [{"key": "RS_PLUGIN", "value": "on"}],
        "mounts": [{"destination": "/mnt/rs", "type": "bind", "source": "/tmp/rs",
                    "options": ["bind", "ro"]}],
        "linux": {"resources": {"memory": {"limit": {"value": 268435456}}}}
    })
}

fn plugin_config(log: &Path) -> Value {
    json!({
        "log": log,
        "adjust": adjustment(),
        "update": {
            "Synchronize": [{"container_id": "ctr-pre",
                             "linux": {"resources": {"cpu": {"shares": {"value": 200}}}}}],
            "UpdateContainer": [{"container_id": "ctr0",
                                 "linux": {"resources": {"cpu": {"shares": {"value": 1024}}}}}],
            "StopContainer": [{"container_id": "ctr-pre",
                               "linux": {"resources": {"memory": {"limit": {"value": 536870912}}}}}]
        }
    })
}

const ALL_EVENTS: [&str; 16] = nri_interop::LIFECYCLE_V012;

/// What the runtime did with the plugin's answers.
fn check_runtime_output(out: &RuntimeOutput) {
    assert!(out.status.success(), "runtime failed: {}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert_eq!(out.json["plugins"], json!(["10-rs"]));

    // The CreateContainer adjustment reached the runtime unchanged.
    let create = out.step("CreateContainer").unwrap();
    assert_eq!(create["result"]["adjust"], adjustment(), "{:#}", create);

    // The UpdateContainer answer was merged over the requested update of ctr0.
    let update = out.step("UpdateContainer").unwrap();
    let mut expected: Value = serde_json::from_str(RESOURCES).unwrap();
    expected["cpu"]["shares"]["value"] = json!(1024);
    assert_eq!(
        update["result"]["update"],
        json!([{"container_id": "ctr0", "linux": {"resources": expected}}]),
        "{update:#}"
    );
    // The StopContainer answer updates another container.
    let stop = out.step("StopContainer").unwrap();
    assert_eq!(
        stop["result"]["update"],
        json!([{"container_id": "ctr-pre",
                "linux": {"resources": {"memory": {"limit": {"value": 536870912}}}}}]),
        "{stop:#}"
    );

    // Synchronize offered the pre-existing pod and container, and the plugin's
    // update came back and was applied. (The last SyncFn call is the plugin's: the
    // one at start-up for pre-installed plugins, else the external plugin's.)
    let sync = out.json["synchronize"]
        .as_array()
        .and_then(|s| s.last())
        .unwrap_or_else(|| panic!("{:#}", out.json));
    assert_eq!((&sync["pods"], &sync["containers"]), (&json!(1), &json!(1)));
    assert_eq!(sync["error"], "");
    assert_eq!(
        sync["updates"],
        json!([{"container_id": "ctr-pre",
                "linux": {"resources": {"cpu": {"shares": {"value": 200}}}}}])
    );
    assert_eq!(sync["failed"], json!([]));
}

/// What the plugin saw.
fn check_plugin_log(events: &[Value], expect_config: &str) {
    assert_eq!(lifecycle(events), ALL_EVENTS);
    for e in events
        .iter()
        .filter(|e| e["event"] != "exit" && e["event"] != "closed")
    {
        assert_eq!(e["plugin"], "10-rs", "{e}");
    }

    let configure = entry(events, "Configure");
    assert_eq!(configure["config"], expect_config);
    assert_eq!(configure["runtime"], "containerd");
    assert_eq!(configure["version"], "v2.2.0");
    assert_eq!(
        configure["nri_version"], "v0.12.5",
        "as the Go runtime reports it"
    );
    assert_eq!(configure["nri_version_inferred"], false);
    assert_eq!(configure["registration_timeout_ms"], 4000);
    assert_eq!(configure["request_timeout_ms"], 3000);

    let sync = entry(events, "Synchronize");
    assert_eq!(ids(&sync["pods"]), ["pod-pre"]);
    assert_eq!(ids(&sync["containers"]), ["ctr-pre"]);
    assert_eq!(sync["pods"][0]["namespace"], "kube-system");
    assert_eq!(sync["pods"][0]["labels"], json!({"k": "v"}));
    assert_eq!(sync["containers"][0]["state"], 3);
    assert_eq!(sync["containers"][0]["args"], json!(["sleep", "inf"]));

    // Pod events carry the pod as the scenario defines it.
    for event in [
        "RunPodSandbox",
        "UpdatePodSandbox",
        "PostUpdatePodSandbox",
        "StopPodSandbox",
        "RemovePodSandbox",
    ] {
        let pod = &entry(events, event)["pod"];
        for field in ["id", "name", "uid", "namespace", "labels", "annotations"] {
            assert_eq!(pod[field], pod0()[field], "{event}.pod.{field}");
        }
    }
    let update_pod = entry(events, "UpdatePodSandbox");
    assert_eq!(
        update_pod["overhead_resources"],
        json!({"cpu": {"shares": {"value": 10}}})
    );
    assert_eq!(
        update_pod["resources"],
        json!({"memory": {"limit": {"value": 1073741824}}})
    );

    // Container events carry the container and its pod.
    for event in ALL_EVENTS.iter().skip(5).filter(|e| {
        !matches!(
            **e,
            "ValidateContainerAdjustment" | "StopPodSandbox" | "RemovePodSandbox"
        )
    }) {
        let e = entry(events, event);
        assert_eq!(e["pod"]["id"], "pod0", "{event}");
        let ctr = &e["container"];
        for field in ["id", "pod_sandbox_id", "name", "labels", "args"] {
            assert_eq!(ctr[field], ctr0()[field], "{event}.container.{field}");
        }
        assert_eq!(ctr["annotations"]["ctr-note"], "hello", "{event}");
    }
    let create = &entry(events, "CreateContainer")["container"];
    assert_eq!(create["env"], json!(["A=B", "PATH=/bin"]));
    assert_eq!(create["annotations"], json!({"ctr-note": "hello"}));

    // The runtime applied the adjustment to the container it then reports.
    let post_create = &entry(events, "PostCreateContainer")["container"];
    assert_eq!(post_create["state"], 1);
    assert_eq!(
        post_create["annotations"],
        json!({"ctr-note": "hello", "rs.example.com/adjusted": "yes"})
    );
    assert_eq!(
        post_create["env"],
        json!(["A=B", "PATH=/bin", "RS_PLUGIN=on"])
    );
    assert_eq!(
        post_create["linux"]["resources"]["memory"]["limit"]["value"],
        268435456
    );

    // The validator saw the merged adjustment and who made it.
    let validate = &entry(events, "ValidateContainerAdjustment")["validate"];
    assert_eq!(validate["container"]["id"], "ctr0");
    assert_eq!(
        validate["adjust"]["annotations"],
        adjustment()["annotations"]
    );
    assert_eq!(validate["plugins"], json!([{"name": "rs", "index": "10"}]));

    assert_eq!(entry(events, "StartContainer")["container"]["state"], 1);
    assert_eq!(entry(events, "PostStartContainer")["container"]["state"], 3);
    let update = entry(events, "UpdateContainer");
    assert_eq!(update["container"]["state"], 3);
    assert_eq!(
        update["resources"],
        serde_json::from_str::<Value>(RESOURCES).unwrap()
    );
    // After UpdateContainer the runtime stores the update the plugin asked for.
    assert_eq!(
        entry(events, "PostUpdateContainer")["container"]["linux"]["resources"]["cpu"]["shares"]
            ["value"],
        1024
    );
    assert_eq!(entry(events, "StopContainer")["container"]["state"], 3);
    assert_eq!(entry(events, "RemoveContainer")["container"]["state"], 4);
}

#[test]
fn external_rust_plugin_on_go_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let (runtime, socket) =
        common::spawn_runtime_with_socket("nri-ref-runtime", dir.path(), &scenario());
    let mut plugin = spawn_rust_plugin(dir.path(), &socket, "rs", "10", &plugin_config(&log), &[]);

    let out = runtime.finish(TIMEOUT).unwrap();
    check_runtime_output(&out);

    // Losing the runtime ends the plugin's run cleanly.
    let status = plugin.wait_timeout(TIMEOUT);
    assert!(status.success(), "{status}: {}", plugin.stderr());
    let events = read_event_log(&log).unwrap();
    assert_eq!(
        nri_interop::event_names(&events)[ALL_EVENTS.len()..],
        ["closed", "exit"]
    );
    // An external plugin gets no configuration from the runtime.
    check_plugin_log(&events, "");
}

#[test]
fn pre_installed_rust_plugin_on_go_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let conf = dir.path().join("conf.d");
    std::fs::create_dir_all(&conf).unwrap();
    let log = dir.path().join("events.jsonl");
    install_plugin(&plugins, "10-rs", &rust_plugin_bin());
    let conf_file = write_json(&conf, "10-rs.conf", &plugin_config(&log)).unwrap();
    let conf_text = std::fs::read_to_string(&conf_file).unwrap();

    let scenario_path = write_json(dir.path(), "scenario.json", &scenario()).unwrap();
    let runtime = RefRuntime::spawn(
        "nri-ref-runtime",
        &scenario_path,
        [
            "-plugin-dir".as_ref(),
            plugins.as_os_str(),
            "-plugin-config-dir".as_ref(),
            conf.as_os_str(),
        ],
    )
    .unwrap();
    let out = runtime.finish(TIMEOUT).unwrap();
    check_runtime_output(&out);

    // The runtime stops a launched plugin by killing it; the log is complete once
    // RemovePodSandbox is in.
    let events = wait_for_events(&log, TIMEOUT, |e| {
        e.iter().any(|e| e["event"] == "RemovePodSandbox")
    })
    .unwrap();
    // The drop-in file reached the plugin as its configuration.
    check_plugin_log(&events, &conf_text);
}
