//! `nri-sim serve --metrics-addr`: a plugin connects, a container is
//! created, and a scrape of `/metrics` shows the calls it received.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One HTTP GET of `url` (`http://IP:PORT/PATH`): status line and body.
fn scrape(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /{path} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn serve_exposes_metrics_of_the_plugin_calls() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let mut sim = Command::new(common::bin())
        .args(["serve", "--output", "json", "--wait-plugins", "1"])
        .args(["--wait-timeout", "30s", "--metrics-addr", "0", "--socket"])
        .arg(&socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _plugin = common::spawn_limits_plugin(socket.clone());

    let mut stdout = BufReader::new(sim.stdout.take().unwrap()).lines();
    let mut stdin = sim.stdin.take().unwrap();
    let mut next = || -> serde_json::Value {
        let line = stdout.next().expect("serve ended").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let ready = next();
    assert_eq!(ready["type"], "ready", "{ready}");
    let url = ready["metrics"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    stdin
        .write_all(b"run_pod web\ncreate app pod=web\n")
        .unwrap();
    stdin.flush().unwrap();
    for _ in 0..2 {
        let step = next();
        assert_eq!(step["type"], "step", "{step}");
        assert_eq!(step["step"]["ok"], true, "{step}");
    }
    let (status, body) = scrape(&url);
    assert_eq!(status, "HTTP/1.1 200 OK");
    for line in [
        r#"nri_plugin_invocations_total{plugin="15-limits",operation="CreateContainer",status="success",error=""} 1"#,
        r#"nri_plugin_invocations_total{plugin="15-limits",operation="Synchronize",status="success",error=""} 1"#,
        r#"nri_plugin_latency_seconds_count{plugin="15-limits",operation="CreateContainer"} 1"#,
        r#"nri_plugin_registrations_total{plugin="15-limits"} 1"#,
        "nri_active_plugins_total 1",
    ] {
        assert!(body.lines().any(|l| l == line), "{line} not in\n{body}");
    }
    assert!(body.ends_with("# EOF\n"));
    let (missing, _) = scrape(&url.replace("/metrics", "/"));
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");

    stdin.write_all(b"quit\n").unwrap();
    drop(stdin);
    assert!(sim.wait().unwrap().success());
}
