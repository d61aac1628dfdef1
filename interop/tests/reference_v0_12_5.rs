//! Where NRI v0.12.4 and v0.12.5 moved, pinned by the Go library itself in
//! both directions: our runtime (`nri-rs-ref-runtime`) with Go plugins, the
//! Go runtime (`nri-ref-runtime`) with our plugin (`nri-rs-test-plugin`),
//! and the Go runtime with Go plugins for the reference's own outcome.
//!
//! 1. A validator that announced `keep_connected` and times out fails the
//!    creation and stays connected.
//! 2. A plugin that answers with a `DeadlineExceeded` status made an ordinary
//!    error: the call fails and the plugin stays, whatever its policy.
//! 3. An oversized mux frame is refused in the reference's words.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::runtimes::{Rt, Running};
use common::{rust_plugin_bin, PluginProcess, TIMEOUT};
use nri_interop::{harness_bin, read_event_log, run_harness, write_json, RuntimeOutput};
use serde_json::{json, Value};

/// Which plugin program plays the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Go,
    Rust,
}

impl Side {
    fn bin(self) -> PathBuf {
        match self {
            Side::Go => harness_bin("nri-ref-plugin"),
            Side::Rust => rust_plugin_bin(),
        }
    }
}

/// The three pairings: the reference with itself, and each side of ours
/// with the other side of the reference.
const PAIRS: [(Rt, Side); 3] = [
    (Rt::Go, Side::Go),
    (Rt::Rust, Side::Go),
    (Rt::Go, Side::Rust),
];

fn scenario(steps: Value) -> Value {
    json!({
        "runtime": {"name": "v0125", "version": "v1.0.0"},
        "request_timeout_ms": 500,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"}],
        "containers": [
            {"id": "ctr0", "pod_sandbox_id": "pod0", "name": "ctr0", "state": 1},
            {"id": "ctr1", "pod_sandbox_id": "pod0", "name": "ctr1", "state": 1}
        ],
        "steps": steps,
    })
}

/// Runs `steps` on `rt` with one external plugin `00-p` of `side`
/// configured by `config`; returns the runtime's output and the plugin's log.
fn run(rt: Rt, side: Side, config: Value, steps: Value) -> (RuntimeOutput, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("plugin.jsonl");
    let mut config = config;
    config["log"] = json!(log);
    let (running, socket) = Running::spawn_with_socket(rt, dir.path(), &scenario(steps), &[]);
    let config_file = write_json(dir.path(), "plugin.json", &config).unwrap();
    let plugin = PluginProcess::spawn(
        &side.bin(),
        &[
            "-config".as_ref(),
            config_file.as_os_str(),
            "-socket".as_ref(),
            socket.as_os_str(),
            "-name".as_ref(),
            "p".as_ref(),
            "-idx".as_ref(),
            "00".as_ref(),
        ],
        &dir.path().join("plugin.stderr"),
    );
    let out = running.finish(TIMEOUT);
    drop(plugin);
    let events = read_event_log(&log).unwrap_or_default();
    (out, events)
}

fn count(events: &[Value], name: &str) -> usize {
    events.iter().filter(|e| e["event"] == name).count()
}

fn wait_plugin() -> Value {
    json!({"op": "wait_plugins", "count": 1, "timeout_ms": 20000})
}

fn validator(keep_connected: bool) -> Value {
    json!({"events": ["ValidateContainerAdjustment"],
           "delay_ms": {"ValidateContainerAdjustment": 2000},
           "failure_policy": {"fail_request": false, "keep_connected": keep_connected}})
}

fn two_creations() -> Value {
    json!([
        wait_plugin(),
        {"op": "RunPodSandbox", "pod": "pod0"},
        {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"},
        {"op": "CreateContainer", "pod": "pod0", "container": "ctr1"},
        {"op": "stop"}
    ])
}

#[test]
fn a_validator_announcing_keep_connected_stays_after_a_timeout() {
    const TIMED_OUT: &str = "validator plugin 00-p failed: context deadline exceeded";
    for (rt, side) in PAIRS {
        let what = format!("{rt:?} runtime, {side:?} validator");
        let (out, events) = run(rt, side, validator(true), two_creations());
        let ctr0 = &out.json["steps"][2];
        let ctr1 = &out.json["steps"][3];
        assert_eq!(ctr0["error"], TIMED_OUT, "{what}: {ctr0}\n{}", out.stderr);
        // Still connected: the second creation is validated (and times out) too.
        assert_eq!(ctr1["error"], TIMED_OUT, "{what}: {ctr1}\n{}", out.stderr);
        assert_eq!(count(&events, "ValidateContainerAdjustment"), 2, "{what}");
    }
}

#[test]
fn a_validator_without_keep_connected_is_closed_after_a_timeout() {
    for (rt, side) in PAIRS {
        let what = format!("{rt:?} runtime, {side:?} validator");
        let (out, events) = run(rt, side, validator(false), two_creations());
        assert_eq!(
            out.json["steps"][2]["error"],
            "validator plugin 00-p failed: context deadline exceeded",
            "{what}\n{}",
            out.stderr
        );
        // Closed: the second creation has no validator left.
        assert_eq!(out.json["steps"][3]["error"], "", "{what}\n{}", out.stderr);
        assert_eq!(count(&events, "ValidateContainerAdjustment"), 1, "{what}");
    }
}

#[test]
fn a_deadline_exceeded_answer_fails_the_call_and_keeps_the_plugin() {
    let steps = json!([
        wait_plugin(),
        {"op": "RunPodSandbox", "pod": "pod0"},
        {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"},
        {"op": "StartContainer", "container": "ctr0"},
        {"op": "PostStartContainer", "container": "ctr0"},
        {"op": "StopContainer", "container": "ctr0"},
        {"op": "stop"}
    ]);
    let policies = [
        None,
        Some(json!({"fail_request": false, "keep_connected": false})),
        Some(json!({"fail_request": true, "keep_connected": false})),
        Some(json!({"fail_request": false, "keep_connected": true})),
        Some(json!({"fail_request": true, "keep_connected": true})),
    ];
    for (rt, side) in PAIRS {
        for policy in &policies {
            let what = format!("{rt:?} runtime, {side:?} plugin, policy {policy:?}");
            let mut config = json!({
                "events": ["StartContainer", "PostStartContainer", "StopContainer"],
                "error": {"StartContainer": "backend too slow"},
                "error_code": {"StartContainer": "DeadlineExceeded"},
            });
            if let Some(p) = policy {
                config["failure_policy"] = p.clone();
            }
            let (out, events) = run(rt, side, config, steps.clone());
            assert_eq!(
                out.json["steps"][3]["error"],
                "rpc error: code = DeadlineExceeded desc = backend too slow",
                "{what}\n{}",
                out.stderr
            );
            // The plugin stays connected and gets the later events.
            assert_eq!(out.json["steps"][4]["error"], "", "{what}");
            assert_eq!(
                count(&events, "PostStartContainer"),
                1,
                "{what}: {events:?}"
            );
            assert_eq!(count(&events, "StopContainer"), 1, "{what}: {events:?}");
        }
    }
}

/// The largest mux frame payload a peer accepts, plus one.
const OVERSIZED: u32 = 10 + (4 << 20) + 1;

/// A mux frame header for conn 1 announcing `OVERSIZED` bytes.
fn oversized_header() -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&1u32.to_be_bytes());
    h[4..].copy_from_slice(&OVERSIZED.to_be_bytes());
    h
}

/// Plays the runtime for one plugin of `side`: accepts its connection,
/// answers its first bytes with an oversized frame header and returns the
/// plugin's standard error once it has exited.
fn oversized_frame_to_plugin(side: Side) -> String {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let log = dir.path().join("plugin.jsonl");
    let config = write_json(dir.path(), "plugin.json", &json!({"log": log})).unwrap();
    let stderr = dir.path().join("plugin.stderr");
    let mut plugin = PluginProcess::spawn(
        &side.bin(),
        &[
            "-config".as_ref(),
            config.as_os_str(),
            "-socket".as_ref(),
            socket.as_os_str(),
            "-name".as_ref(),
            "p".as_ref(),
            "-idx".as_ref(),
            "10".as_ref(),
        ],
        &stderr,
    );
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(TIMEOUT)).unwrap();
    // Its registration request, then the frame it must refuse.
    let mut first = [0u8; 8];
    conn.read_exact(&mut first).unwrap();
    conn.write_all(&oversized_header()).unwrap();
    // A plugin that keeps reconnecting (ours by default) is stopped once
    // it has said why it gave up on the first connection.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let text = std::fs::read_to_string(&stderr).unwrap_or_default();
        if text.contains("maximum is") || Instant::now() > deadline {
            plugin.kill();
            return plugin.stderr();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Connects to the runtime's socket and sends an oversized frame header;
/// returns once the runtime has closed the connection.
fn oversized_frame_to_runtime(socket: &Path) {
    let mut conn = UnixStream::connect(socket).unwrap();
    conn.set_read_timeout(Some(TIMEOUT)).unwrap();
    conn.write_all(&oversized_header()).unwrap();
    let mut rest = Vec::new();
    // EOF: the runtime tore the connection down without reading a payload.
    conn.read_to_end(&mut rest).unwrap();
}

#[test]
fn an_oversized_mux_frame_is_refused_in_the_reference_words() {
    // Go's own words: its multiplexer fed the same frame header.
    let go = run_harness("nri-wire-vectors", ["oversized"], TIMEOUT)
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(go["announced"], OVERSIZED);
    let expected = go["error"].as_str().unwrap().to_string();
    assert_eq!(
        expected,
        format!(
            "conn 1: frame payload {OVERSIZED} bytes, maximum is {}",
            OVERSIZED - 1
        )
    );
    // Our stub's mux says the same.
    let ours = oversized_frame_to_plugin(Side::Rust);
    assert!(ours.contains(&expected), "Rust plugin:\n{ours}");

    // Our runtime's mux too (Go's runtime logs only that the plugin's
    // connection closed).
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([{"op": "wait_plugins", "count": 1, "timeout_ms": 1500}]);
    let (running, socket) = Running::spawn_with_socket(Rt::Rust, dir.path(), &scenario(steps), &[]);
    oversized_frame_to_runtime(&socket);
    let out = running.finish(TIMEOUT);
    assert!(
        out.stderr.contains(&expected),
        "Rust runtime:\n{}",
        out.stderr
    );
}
