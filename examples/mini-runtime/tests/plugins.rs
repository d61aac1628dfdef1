//! `nri-mini-runtime` end to end: the Go reference plugin (`nri-ref-plugin`
//! of the interop harness, built on the official `containerd/nri` stub)
//! connects to the runtime's socket, the nri-stub example plugin `annotate`
//! is launched from the plugin directory, and the `config.json` files the
//! runtime writes carry what both asked for.

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::{
    build_annotate_example, container_events, read_json, read_log, runtime_bin, wait_for_path,
    Process, TIMEOUT,
};

/// Writes `script` and starts the runtime on it, listening on
/// `<dir>/nri.sock`, with `<dir>/plugins` as its plugin directory.
fn start_runtime(dir: &Path, script: &str) -> Process {
    let script_path = dir.join("script.txt");
    std::fs::write(&script_path, script).unwrap();
    let (socket, plugins, state) = (dir.join("nri.sock"), dir.join("plugins"), dir.join("state"));
    std::fs::create_dir_all(&plugins).unwrap();
    let runtime = Process::spawn(
        &runtime_bin(),
        &[
            "--socket".as_ref(),
            socket.as_os_str(),
            "--plugin-dir".as_ref(),
            plugins.as_os_str(),
            "--state-dir".as_ref(),
            state.as_os_str(),
            script_path.as_os_str(),
        ],
        dir,
        "runtime",
    );
    wait_for_path(&socket, &runtime);
    runtime
}

/// Starts `nri-ref-plugin` (Go) as the external plugin `20-gocfg`.
fn start_go_plugin(dir: &Path, config: &Value) -> Process {
    let config_path = dir.join("gocfg.json");
    std::fs::write(&config_path, serde_json::to_vec(config).unwrap()).unwrap();
    let socket = dir.join("nri.sock");
    Process::spawn(
        &nri_interop::harness_bin("nri-ref-plugin"),
        &[
            "-config".as_ref(),
            config_path.as_os_str(),
            "-socket".as_ref(),
            socket.as_os_str(),
            "-name".as_ref(),
            "gocfg".as_ref(),
            "-idx".as_ref(),
            "20".as_ref(),
        ],
        dir,
        "gocfg",
    )
}

fn has_env(spec: &Value, entry: &str) -> bool {
    spec["process"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e == entry)
}

#[test]
fn go_and_rust_plugins_adjust_and_update_the_written_specs() {
    let annotate = build_annotate_example();
    // Build the Go plugin before the runtime starts waiting for it.
    nri_interop::harness_bin("nri-ref-plugin");
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::copy(&annotate, dir.join("plugins").join("10-annotate")).unwrap();

    let log = dir.join("gocfg.jsonl");
    let go_config = json!({
        "events": ["CreateContainer", "StartContainer", "UpdateContainer",
                   "StopContainer", "RemoveContainer"],
        "log": log,
        "adjust": {
            "annotations": {"go.example.com/seen": "yes"},
            "env": [{"key": "FROM_GO", "value": "1"}],
            "mounts": [{"destination": "/data", "type": "bind", "source": "/srv/data",
                        "options": ["bind", "ro"]}],
            "linux": {"resources": {"memory": {"limit": {"value": 268435456}}}}
        },
        // In every StopContainer reply: an update of c0.
        "update": {"StopContainer": [
            {"container_id": "c0", "linux": {"resources": {"pids": {"limit": 64}}}}
        ]},
        // On its own, once c0 started: another update of c0.
        "unsolicited": [{"after_event": "StartContainer", "after_ms": 0, "updates": [
            {"container_id": "c0", "linux": {"resources": {"cpu": {
                "quota": {"value": 50000}, "period": {"value": 100000}}}}}
        ]}]
    });
    let script = "\
        # both plugins connected and synchronized
        wait-plugins 2 60000
        pod p0 --label app=web
        create p0 c0 --name web --env A=B --annotation team=blue
        create p0 c1 --name sidecar
        start c0
        wait-updates 1 60000
        update c0 --cpu-shares 512
        stop c0
        remove c1
    ";
    let mut runtime = start_runtime(dir, script);
    let mut go = start_go_plugin(dir, &go_config);

    let status = runtime.wait(TIMEOUT);
    let stdout = runtime.stdout();
    assert!(
        status.success(),
        "{status}\nstdout:\n{stdout}\nstderr:\n{}\ngo plugin:\n{}",
        runtime.stderr(),
        go.stderr()
    );
    // The Go plugin leaves once the runtime closed the connection.
    assert!(go.wait(TIMEOUT).success(), "{}", go.stderr());

    // One line per step, plugin-requested updates in between.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"wait-plugins 2: plugins 10-annotate, 20-gocfg")
    );
    let state = dir.join("state");
    let c0_path = state.join("c0").join("config.json");
    assert!(
        lines.contains(
            &format!(
                "create c0: created, adjusted annotations=2 env=2 linux mounts=1 -> {}",
                c0_path.display()
            )
            .as_str()
        ),
        "{stdout}"
    );
    assert!(lines.contains(&format!("plugin update c0: wrote {}", c0_path.display()).as_str()));
    assert!(
        lines.contains(
            &format!(
                "update c0: resources updated as requested -> {}",
                c0_path.display()
            )
            .as_str()
        ),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"done: 9 steps, 0 failed"), "{stdout}");

    // c0: the script's values, both plugins' adjustments, the script's
    // update, and both updates of the Go plugin.
    let c0 = read_json(&c0_path);
    assert_eq!(
        c0["annotations"],
        json!({
            "team": "blue",
            "annotate.example.com/by": "10-annotate",
            "go.example.com/seen": "yes"
        })
    );
    for env in ["A=B", "ANNOTATED_CONTAINER=web", "FROM_GO=1"] {
        assert!(has_env(&c0, env), "{env} missing: {:#}", c0["process"]);
    }
    let mounts = c0["mounts"].as_array().unwrap();
    assert!(
        mounts.contains(&json!({"destination": "/data", "type": "bind",
                                "source": "/srv/data", "options": ["bind", "ro"]})),
        "{mounts:#?}"
    );
    let resources = &c0["linux"]["resources"];
    assert_eq!(
        resources["memory"],
        json!({"limit": 268435456, "swap": 268435456})
    );
    assert_eq!(
        resources["cpu"],
        json!({"shares": 512, "quota": 50000, "period": 100000})
    );
    assert_eq!(resources["pids"], json!({"limit": 64}));
    // Untouched parts of the default spec stay.
    assert_eq!(c0["root"], json!({"path": "rootfs", "readonly": true}));
    assert_eq!(c0["linux"]["cgroupsPath"], "/mini-runtime/p0/c0");

    // c1 was removed, with its state.
    assert!(!state.join("c1").exists());

    // What the Go plugin saw: the events, and the containers as adjusted.
    let events = read_log(&log);
    assert_eq!(
        container_events(&events),
        [
            ("CreateContainer", "c0"),
            ("CreateContainer", "c1"),
            ("StartContainer", "c0"),
            ("UpdateContainer", "c0"),
            ("StopContainer", "c0"),
            ("StopContainer", "c1"),
            ("RemoveContainer", "c1"),
        ]
        .map(|(e, c)| (e.to_string(), c.to_string()))
    );
    let start = events
        .iter()
        .find(|e| e["event"] == "StartContainer")
        .unwrap();
    let env = start["container"]["env"].as_array().unwrap();
    assert!(env.contains(&json!("FROM_GO=1")) && env.contains(&json!("ANNOTATED_CONTAINER=web")));
    let update = events
        .iter()
        .find(|e| e["event"] == "UpdateContainers")
        .unwrap();
    assert_eq!(update["failed"], Value::Null, "{update}");
}

#[test]
fn evictions_failures_and_exits() {
    nri_interop::harness_bin("nri-ref-plugin");
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let log = dir.join("gocfg.jsonl");
    let go_config = json!({
        "events": ["CreateContainer", "UpdateContainer", "StopContainer", "RemoveContainer"],
        "log": log,
        // Every creation evicts c0 (which fails while c0 does not exist).
        "evict": {"CreateContainer": [{"container_id": "c0", "reason": "make room"}]},
        "error": {"UpdateContainer": "refusing"}
    });
    let script = "\
        wait-plugins 1 60000
        pod p0
        create p0 c0
        create p0 c1
        update c1 --memory-limit 1048576
        exit c1
        remove c1
        remove-pod p0
    ";
    let mut runtime = start_runtime(dir, script);
    let mut go = start_go_plugin(dir, &go_config);
    let status = runtime.wait(TIMEOUT);
    let stdout = runtime.stdout();
    assert_eq!(status.code(), Some(1), "{stdout}\n{}", runtime.stderr());
    assert!(go.wait(TIMEOUT).success(), "{}", go.stderr());

    let lines: Vec<&str> = stdout.lines().collect();
    let state = dir.join("state");
    assert!(
        lines.contains(
            &format!(
            "create c0: created, adjusted nothing (0 plugin updates and 1 evictions failed) -> {}",
            state.join("c0").join("config.json").display()
        )
            .as_str()
        ),
        "{stdout}"
    );
    assert!(lines.contains(&"plugin eviction c0: make room"), "{stdout}");
    assert!(lines.contains(&"evict c0: stopped and removed"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("update c1: FAILED: ") && l.contains("refusing")),
        "{stdout}"
    );
    assert!(lines.contains(&"remove-pod p0: removed"), "{stdout}");
    assert_eq!(lines.last(), Some(&"done: 8 steps, 1 failed"), "{stdout}");
    assert!(!state.join("c0").exists() && !state.join("c1").exists());

    // The evicted c0 was stopped and removed for plugins; the exit of c1
    // and its removal make one StopContainer, never two.
    let events = container_events(&read_log(&log));
    let count =
        |event: &str, id: &str| events.iter().filter(|(e, c)| e == event && c == id).count();
    assert_eq!(count("StopContainer", "c0"), 1, "{events:?}");
    assert_eq!(count("RemoveContainer", "c0"), 1, "{events:?}");
    assert_eq!(count("StopContainer", "c1"), 1, "{events:?}");
    assert_eq!(count("RemoveContainer", "c1"), 1, "{events:?}");
}
