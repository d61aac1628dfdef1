//! `nri-sim replay` and `nri-sim convert` on real recordings: `nri-sim run`
//! is the runtime, the logger sample (in this process, on `nri-stub`) the
//! plugin, and `nri-tap`'s proxy (the library, as in its own tests) sits
//! between them and records. The recording is then replayed against the
//! same plugin (in-process sample and the launched `nri-logger` program),
//! against a differently configured one, truncated and garbage
//! recordings, a split Synchronize, and converted back to a scenario.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Run;
use serde_json::Value;

/// The logger's annotation value holds its process id, which differs from
/// one run to the next: left out of comparisons.
const PID_VALUE: &str = "/response/adjust/annotations/replay-test";

const SCENARIO: &str = r#"
description: recorded through nri-tap
socket: rt.sock
timeouts: {external: 30s}
plugins:
  - {name: logger, index: "10", external: true}
pods:
  - {name: old, existing: true, labels: {tier: db}}
  - {name: web, namespace: shop, annotations: {team: blue}}
containers:
  - {name: db, pod: old, existing: true}
  - name: app
    pod: web
    env: {PORT: "8080"}
    resources: {memory: 256Mi, cpu_shares: 512}
steps:
  - run_pod: web
  - create: app
  - start: app
  - update: app
    resources: {cpu_shares: 1024}
  - stop: app
  - remove: app
  - stop_pod: web
  - remove_pod: web
"#;

/// `count` more existing containers with 100 KiB annotations each: a
/// Synchronize over several messages from 45 on.
fn big_containers(count: usize) -> String {
    let big = "x".repeat(100 * 1024);
    (0..count)
        .map(|i| {
            format!("  - {{name: big{i}, pod: old, existing: true, annotations: {{big: {big}}}}}\n")
        })
        .collect()
}

/// Runs `nri-sim run` on `scenario` with the logger sample (configured
/// with `config`) connected through the tap; returns the directory, the
/// recording and the run.
async fn record(scenario: &str, config: &str) -> (tempfile::TempDir, PathBuf, Run) {
    let config = config.to_string();
    record_with(scenario, move |socket| {
        let plugin = nri_sim::samples::start(
            &nri_sim::samples::SampleRun {
                sample: "logger".into(),
                name: "logger".into(),
                index: "10".into(),
                config,
                config_from: None,
                args: Vec::new(),
            },
            socket,
        )
        .unwrap();
        Box::new(plugin)
    })
    .await
}

/// Like [`record`], with the plugin `start` connects to the socket it is
/// given (what it returns is dropped once the run ended).
async fn record_with(
    scenario: &str,
    start: impl FnOnce(&Path) -> Box<dyn std::any::Any + Send>,
) -> (tempfile::TempDir, PathBuf, Run) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    std::fs::write(path.join("scenario.yaml"), scenario).unwrap();
    let recording = path.join("rec.jsonl");
    let tap_socket = path.join("tap.sock");
    let listener = nri_tap::proxy::listen(&tap_socket).unwrap();
    let (rec, writer) =
        nri_tap::record::Recorder::to_path(&recording, nri_tap::record::Options::default())
            .await
            .unwrap();
    let tap = tokio::spawn(nri_tap::proxy::serve(listener, path.join("rt.sock"), rec));

    let run_dir = path.clone();
    let sim = tokio::task::spawn_blocking(move || {
        common::run_in(
            &run_dir,
            &["run", "scenario.yaml", "--output", "json"],
            Duration::from_secs(120),
        )
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !path.join("rt.sock").exists() {
        assert!(tokio::time::Instant::now() < deadline, "no runtime socket");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let plugin = start(&tap_socket);
    let run = sim.await.unwrap();
    drop(plugin);
    // The connection's close line is the last one of the session.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&recording).unwrap_or_default();
        if text.contains(r#""type":"close""#) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "recording: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tap.abort();
    let _ = tap.await;
    writer.await.unwrap().unwrap();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    (dir, recording, run)
}

fn sim(dir: &Path, args: &[&str]) -> Run {
    common::run_in(dir, args, Duration::from_secs(120))
}

/// `nri-sim replay REC --sample logger --config CONFIG EXTRA...`.
fn replay_logger(dir: &Path, rec: &str, config: &str, extra: &[&str]) -> Run {
    let mut args = vec!["replay", rec, "--sample", "logger", "--config", config];
    args.extend_from_slice(extra);
    sim(dir, &args)
}

fn lines(recording: &Path) -> Vec<Value> {
    std::fs::read_to_string(recording)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The events (runtime→plugin requests but Configure and Synchronize) of
/// the recording, in order.
fn recorded_events(recording: &Path) -> Vec<String> {
    lines(recording)
        .iter()
        .filter(|l| l["type"] == "request" && l["dir"] == "runtime->plugin")
        .map(|l| l["method"].as_str().unwrap().to_string())
        .filter(|m| !["Configure", "Synchronize", "Shutdown"].contains(&m.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reports_same_and_different_answers() {
    let (dir, recording, _) = record(SCENARIO, "addAnnotation: replay-test").await;
    let d = dir.path();
    let rec = recording.to_str().unwrap();

    // The same plugin: the same answers (but for the pid in the value).
    let same = replay_logger(
        d,
        rec,
        "addAnnotation: replay-test",
        &["--ignore", PID_VALUE, "--output", "json"],
    );
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    let doc = same.json();
    assert_eq!(doc["schema"], "nri-sim/v1");
    assert_eq!(doc["type"], "replay");
    assert_eq!(doc["plugin"], "10-logger");
    assert_eq!(doc["passed"], true);
    let methods: Vec<&str> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods[..2], ["Configure", "Synchronize"], "{methods:?}");
    assert!(methods.contains(&"CreateContainer"), "{methods:?}");
    assert_eq!(doc["plugin_requests"][0]["method"], "RegisterPlugin");
    assert_eq!(doc["plugin_requests"][0]["same"], true);

    // Without --ignore the pid in the annotation value is a difference.
    let pid = replay_logger(d, rec, "addAnnotation: replay-test", &["--color", "never"]);
    assert_eq!(pid.code, 1, "{}\n{}", pid.stdout, pid.stderr);
    assert!(
        pid.stdout.contains("≠   4. CreateContainer app"),
        "{}",
        pid.stdout
    );
    assert!(
        pid.stdout
            .contains("~ /response/adjust/annotations/replay-test: \"logger-pid-"),
        "{}",
        pid.stdout
    );
    assert!(pid.stdout.contains("DIFFERENT 1 of"), "{}", pid.stdout);

    // Another annotation: reported with method and field, status 1.
    let other = replay_logger(
        d,
        rec,
        "addAnnotation: other-key",
        &["--ignore", PID_VALUE, "--output", "json"],
    );
    assert_eq!(other.code, 1, "{}\n{}", other.stdout, other.stderr);
    let doc = other.json();
    assert_eq!(doc["passed"], false);
    let differing: Vec<&Value> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["same"] == false)
        .collect();
    assert_eq!(differing.len(), 1, "{doc:#}");
    let m = differing[0];
    assert_eq!(m["method"], "CreateContainer");
    assert_eq!(m["subject"], "app");
    assert_eq!(
        m["diff"][0]["path"],
        "/response/adjust/annotations/other-key"
    );
    assert_eq!(m["diff"][0]["op"], "added");
    assert!(
        m["recorded"]["response"]["adjust"]["annotations"]["replay-test"]
            .as_str()
            .unwrap()
            .starts_with("logger-pid-")
    );

    // Picking a plugin that is not there lists those that are.
    let none = sim(
        d,
        &["replay", rec, "--plugin", "nope", "--sample", "logger"],
    );
    assert_eq!(none.code, 2);
    assert!(
        none.stderr
            .contains("no plugin \"nope\" (recorded: 10-logger)"),
        "{}",
        none.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_launches_a_plugin_program() {
    let logger = common::workspace_binary("nri-logger");
    let (dir, recording, _) = record(SCENARIO, "addAnnotation: replay-test").await;
    let rec = recording.to_str().unwrap();
    let logger = logger.to_str().unwrap();
    let same = sim(
        dir.path(),
        &[
            "replay",
            rec,
            "--ignore",
            PID_VALUE,
            "--color",
            "never",
            "--",
            logger,
            "-add-annotation",
            "replay-test",
        ],
    );
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    assert!(
        same.stdout.contains("against launched: "),
        "{}",
        same.stdout
    );
    assert!(same.stdout.contains("SAME"), "{}", same.stdout);

    let other = sim(
        dir.path(),
        &[
            "replay", rec, "--ignore", PID_VALUE, "--output", "json", "--", logger, "-add-env",
            "REPLAYED",
        ],
    );
    assert_eq!(other.code, 1, "{}\n{}", other.stdout, other.stderr);
    let doc = other.json();
    let create = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == "CreateContainer")
        .unwrap();
    let paths: Vec<&str> = create["diff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/response/adjust/env"), "{create:#}");

    // A program that is no plugin: a set-up error with its stderr.
    let bad = sim(
        dir.path(),
        &[
            "replay",
            rec,
            "--wait-timeout",
            "5s",
            "--",
            "sh",
            "-c",
            "echo not a plugin >&2; exit 3",
        ],
    );
    assert_eq!(bad.code, 2, "{}\n{}", bad.stdout, bad.stderr);
    assert!(
        bad.stderr.contains("before it registered"),
        "{}",
        bad.stderr
    );
    assert!(bad.stderr.contains("not a plugin"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_recordings_are_clear_errors() {
    let (dir, recording, _) = record(SCENARIO, "").await;
    let d = dir.path();
    let text = std::fs::read_to_string(&recording).unwrap();
    let cut = d.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() * 2 / 3]).unwrap();
    let line = text[..text.len() * 2 / 3].lines().count();
    let run = sim(d, &["replay", "cut.jsonl", "--sample", "logger"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "cut.jsonl:{line}: not a recording line (the recording looks truncated)"
        )),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);

    std::fs::write(d.join("garbage.jsonl"), [0u8, 159, 146, 150, b'\n', b'{']).unwrap();
    for args in [
        &[
            "replay",
            "garbage.jsonl",
            "--sample",
            "logger",
            "--output",
            "json",
        ][..],
        &["convert", "garbage.jsonl"][..],
    ] {
        let run = sim(d, args);
        assert_eq!(run.code, 2, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        if args[0] == "replay" {
            let doc = run.json();
            assert_eq!(doc["passed"], false);
            assert!(
                doc["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("garbage.jsonl:1: not a recording line"),
                "{doc}"
            );
        } else {
            assert!(
                run.stderr.contains("garbage.jsonl:1: not a recording line"),
                "{}",
                run.stderr
            );
        }
    }
    // No plugin connects: a set-up error, and the socket is removed.
    let run = sim(
        d,
        &[
            "replay",
            "rec.jsonl",
            "--socket",
            "none.sock",
            "--wait-timeout",
            "1s",
        ],
    );
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("no plugin connected to none.sock within 1s"),
        "{}",
        run.stderr
    );
    assert!(!d.join("none.sock").exists());

    let run = sim(d, &["replay", "missing.jsonl", "--sample", "logger"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot read missing.jsonl"),
        "{}",
        run.stderr
    );

    // A recording cut at a line boundary: the requests without an answer
    // are differences.
    let cut_at = text
        .lines()
        .position(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["type"] == "response" && v["method"] == "StopContainer"
        })
        .unwrap();
    let whole_lines: String = text
        .lines()
        .take(cut_at)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("short.jsonl"), whole_lines).unwrap();
    let run = sim(
        d,
        &[
            "replay",
            "short.jsonl",
            "--sample",
            "logger",
            "--color",
            "never",
        ],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("no recorded answer"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_synchronize_replays() {
    let scenario = SCENARIO
        .replace("{external: 30s}", "{external: 30s, request: 30s}")
        .replace(
            "containers:\n",
            &format!("containers:\n{}", big_containers(48)),
        );
    let (dir, recording, _) = record(&scenario, "").await;
    let syncs = lines(&recording)
        .iter()
        .filter(|l| l["type"] == "request" && l["method"] == "Synchronize")
        .count();
    assert!(syncs >= 2, "{syncs}");
    let run = sim(
        dir.path(),
        &[
            "replay",
            recording.to_str().unwrap(),
            "--sample",
            "logger",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = run.json();
    let replayed = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "Synchronize")
        .count();
    assert_eq!(replayed, syncs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_gives_a_scenario_that_runs_the_same_events() {
    let (dir, recording, _) = record(SCENARIO, "").await;
    let d = dir.path();
    let run = sim(d, &["convert", recording.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout;
    assert!(
        text.starts_with("# nri-sim scenario converted from"),
        "{text}"
    );
    let converted = d.join("converted.yaml");
    std::fs::write(&converted, &text).unwrap();
    let check = sim(d, &["check", "converted.yaml"]);
    assert_eq!(check.code, 0, "{}\n{text}", check.stderr);
    assert!(
        check.stdout.contains("2 pod(s), 2 container(s), 8 step(s)"),
        "{}\n{text}",
        check.stdout
    );

    // With the plugin added, `run` sends it the same events.
    std::fs::write(
        &converted,
        format!("{text}plugins:\n  - {{sample: logger, index: \"10\"}}\n"),
    )
    .unwrap();
    let run = sim(d, &["run", "converted.yaml", "--output", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events: Vec<String> = run.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["calls"].as_array().unwrap().clone())
        .filter(|c| c["plugin"] == "10-logger")
        .map(|c| c["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, recorded_events(&recording), "{text}");
}

/// Asks for more CPU shares for every container that started, on its own
/// (UpdateContainers), and adjusts nothing.
struct Updater {
    shares: u64,
}

#[nri_stub::plugin]
impl nri_stub::Plugin for Updater {
    async fn post_start_container(
        &self,
        ctx: &nri_stub::Context,
        _pod: &nri_api::PodSandbox,
        ctr: &nri_api::Container,
    ) -> nri_stub::HandlerResult<()> {
        let mut u = nri_api::ContainerUpdate::for_container(ctr.id.clone());
        u.linux_resources_mut().cpu = Some(nri_api::LinuxCpu {
            shares: Some(nri_api::OptionalUInt64 { value: self.shares }),
            ..Default::default()
        });
        let _ = ctx.update_containers(vec![u], Vec::new()).await;
        Ok(())
    }
}

/// Runs the updater as external plugin `20-updater` on
/// `socket`, once the socket exists.
fn spawn_updater(socket: PathBuf, shares: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            if tokio::time::Instant::now() > deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let stub = nri_stub::Stub::builder(Updater { shares })
            .name("updater")
            .index("20")
            .socket_path(&socket)
            .build()
            .unwrap();
        let _ = stub.run().await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_requests_of_an_external_plugin_are_compared() {
    let scenario = SCENARIO.replace(
        "{name: logger, index: \"10\", external: true}",
        "{name: updater, index: \"20\", external: true}",
    );
    let (dir, recording, run) = record_with(&scenario, |socket| {
        Box::new(spawn_updater(socket.to_path_buf(), 512))
    })
    .await;
    assert!(
        run.stdout.contains("\"kind\": \"update\""),
        "{}",
        run.stdout
    );
    let d = dir.path().to_path_buf();
    let rec = recording.to_str().unwrap().to_string();

    for (shares, code) in [(512, 0), (1024, 1)] {
        let socket = d.join(format!("replay-{shares}.sock"));
        let plugin = spawn_updater(socket.clone(), shares);
        let (dd, rec, sock) = (d.clone(), rec.clone(), socket.to_str().unwrap().to_string());
        let run = tokio::task::spawn_blocking(move || {
            sim(
                &dd,
                &["replay", &rec, "--socket", &sock, "--output", "json"],
            )
        })
        .await
        .unwrap();
        plugin.abort();
        assert_eq!(run.code, code, "{}\n{}", run.stdout, run.stderr);
        let doc = run.json();
        assert_eq!(doc["target"], format!("external: {}", socket.display()));
        let updates: Vec<&Value> = doc["plugin_requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "UpdateContainers")
            .collect();
        assert_eq!(updates.len(), 1, "{doc:#}");
        if code == 0 {
            assert_eq!(updates[0]["same"], true);
        } else {
            assert!(
                doc["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|m| m["same"] == true),
                "{doc:#}"
            );
            let change = &updates[0]["diff"][0];
            assert_eq!(
                change["path"], "/request/update[app]/linux/resources/cpu/shares/value",
                "{doc:#}"
            );
            assert_eq!(change["old"], 512);
            assert_eq!(change["new"], 1024);
        }
    }
}
