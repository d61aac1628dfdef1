//! The Go reference plugin (official `containerd/nri` stub, from the interop
//! harness) driven by `nri-sim`: launched as a command plugin, connected as
//! an external plugin to `nri-sim serve`, hanging, and sending updates on
//! its own.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::run_scenario;

fn go_plugin() -> String {
    nri_interop::harness_bin("nri-ref-plugin")
        .display()
        .to_string()
}

#[test]
fn a_go_plugin_launched_as_a_command_plugin_adjusts_containers() {
    let yaml = format!(
        r#"
default_validator: {{enable: true, rejectOCIHookAdjustment: true}}
plugins:
  - name: goref
    index: "30"
    command: ["{}"]
    config:
      events: [CreateContainer, StopContainer]
      adjust:
        env: [{{key: FROM_GO, value: "yes"}}]
        annotations: {{go.example/seen: "true"}}
pods: [{{name: p}}]
containers: [{{name: app}}]
steps:
  - run_pod: p
  - create: app
    expect:
      called: [goref, default-validator]
      owners: {{env/FROM_GO: goref}}
      env: {{FROM_GO: "yes"}}
      annotations: {{go.example/seen: "true"}}
  - start: app
  - stop: app
    expect: {{called: [30-goref]}}
"#,
        go_plugin()
    );
    let (_d, run) = run_scenario(&yaml, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["plugins"][1]["name"], "30-goref");
    assert_eq!(doc["plugins"][1]["kind"], "launched");
    assert_eq!(
        doc["containers"][0]["spec"]["annotations"]["go.example/seen"],
        "true"
    );
}

#[test]
fn a_hanging_go_plugin_is_reported_as_a_timeout() {
    let yaml = format!(
        r#"
timeouts: {{request: 400ms}}
plugins:
  - name: slowgo
    index: "40"
    command: ["{}"]
    config:
      events: [CreateContainer, UpdateContainer]
      delay_ms: {{UpdateContainer: 60000}}
pods: [{{name: p}}]
containers: [{{name: app}}]
steps:
  - run_pod: p
  - create: app
  - update: app
    resources: {{cpu_shares: 10}}
"#,
        go_plugin()
    );
    let started = Instant::now();
    let (_d, run) = run_scenario(&yaml, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("step 3 (update app): plugin 40-slowgo did not answer UpdateContainer within the request timeout (400ms); it was disconnected"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("disconnected during the run"),
        "{}",
        run.stdout
    );
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the run waited for the plugin"
    );
}

#[test]
fn a_go_plugin_asks_for_an_update_on_its_own() {
    let yaml = format!(
        r#"
plugins:
  - name: nudger
    index: "10"
    command: ["{}"]
    config:
      events: [PostStartContainer]
      unsolicited:
        - after_event: PostStartContainer
          after_ms: 50
          updates: [{{container_id: app, linux: {{resources: {{cpu: {{shares: {{value: 77}}}}}}}}}}]
pods: [{{name: p}}]
containers: [{{name: app}}]
steps:
  - run_pod: p
  - create: app
  - start: app
  - wait_update: {{count: 1}}
    timeout: 10s
expect:
  app: {{resources: {{cpu_shares: 77}}}}
"#,
        go_plugin()
    );
    let (_d, run) = run_scenario(&yaml, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    assert_eq!(doc["steps"][3]["updates"][0]["container"], "app");
    assert_eq!(doc["unsolicited"][0]["kind"], "update");
}

#[test]
fn serve_drives_an_external_go_plugin_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let cfg = dir.path().join("plugin.json");
    std::fs::write(
        &cfg,
        r#"{"events": ["CreateContainer"], "adjust": {"annotations": {"external": "go"}}}"#,
    )
    .unwrap();
    let mut sim = Command::new(common::bin())
        .args([
            "serve",
            "--color",
            "never",
            "--wait-plugins",
            "1",
            "--wait-timeout",
            "30s",
            "--socket",
        ])
        .arg(&socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    nri_interop::wait_for_path(&socket, Duration::from_secs(20)).unwrap();
    let mut plugin = Command::new(go_plugin())
        .args(["-name", "extgo", "-idx", "25", "-config"])
        .arg(&cfg)
        .arg("-socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        let mut stdin = sim.stdin.take().unwrap();
        stdin
            .write_all(b"plugins\nrun_pod web\ncreate app pod=web\nspec app\nquit\n")
            .unwrap();
    }
    let mut out = sim.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = sim.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            sim.kill().unwrap();
            let _ = plugin.kill();
            panic!("serve did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = plugin.kill();
    let _ = plugin.wait();
    let stdout = reader.join().unwrap();
    let mut stderr = String::new();
    sim.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("25-extgo (external) CreateContainer"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("25-extgo CreateContainer"), "{stdout}");
    assert!(
        stdout.contains("+ /annotations: {\"external\":\"go\"}"),
        "{stdout}"
    );
}
