//! `nri-sim serve --output json`: a plugin (the ulimit-adjuster sample,
//! run by this test on `nri-stub`) connects to the simulator's socket, and
//! every command's result is a JSON document on its own line.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn serve_prints_json_lines_for_a_connecting_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let scenario = dir.path().join("pods.yaml");
    std::fs::write(
        &scenario,
        r#"
pods:
  - name: web
    annotations:
      ulimits.noderesource.dev/container.app: |
        - {type: RLIMIT_NPROC, hard: 64, soft: 32}
containers: [{name: app, pod: web}]
"#,
    )
    .unwrap();
    let mut sim = Command::new(common::bin())
        .arg("serve")
        .arg(&scenario)
        .args([
            "--output",
            "json",
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

    let plugin = common::spawn_limits_plugin(socket.clone());

    let stdout = BufReader::new(sim.stdout.take().unwrap());
    let mut stdin = sim.stdin.take().unwrap();
    let mut docs = Vec::new();
    let mut sent = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(doc["schema"], "nri-sim/v1", "{line}");
        if doc["type"] == "ready" && !sent {
            stdin
                .write_all(b"run_pod web\ncreate app\nupdate_pod web memory=1Gi\nplugins\nspec app\nfly away\nquit\n")
                .unwrap();
            sent = true;
        }
        docs.push(doc);
    }
    drop(stdin);
    let status = sim.wait().unwrap();
    drop(plugin);
    assert!(status.success(), "{docs:#?}");

    let types: Vec<&str> = docs.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["ready", "step", "step", "step", "plugins", "spec", "error", "report"],
        "{docs:#?}"
    );
    assert_eq!(docs[0]["plugins"][0]["name"], "15-limits");
    assert_eq!(docs[0]["plugins"][0]["kind"], "external");
    let create = &docs[2]["step"];
    assert_eq!(create["action"], "create");
    assert_eq!(create["calls"][0]["plugin"], "15-limits");
    assert_eq!(create["changes"][0]["field"], "Rlimits");
    assert_eq!(docs[3]["step"]["action"], "update_pod");
    assert_eq!(docs[3]["step"]["ok"], true);
    assert_eq!(
        docs[5]["container"]["spec"]["process"]["rlimits"][0]["type"],
        "RLIMIT_NPROC"
    );
    assert!(docs[6]["error"]
        .as_str()
        .unwrap()
        .contains("unknown command `fly`"));
    let report = &docs[7]["report"];
    assert_eq!(report["schema"], "nri-sim/v1");
    assert_eq!(report["passed"], true);
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);
    assert_eq!(report["containers"][0]["name"], "app");
}
