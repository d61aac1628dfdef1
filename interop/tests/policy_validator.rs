//! `nri-policy` (plugins/policy) as an external validator of the Go reference
//! runtime adaptation: a Go plugin (`nri-ref-plugin`, `20-vendor`) adds an
//! environment variable and a read-write bind mount of the host's `/`; under a
//! policy that allows the variable only, the Go runtime's CreateContainer
//! fails with the policy's refusal word for word; allowed adjustments pass;
//! audit mode lets the container through and records who set what.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nri_interop::plugin_tests::{spawn_go_runtime, PluginProcess, TIMEOUT};
use nri_interop::{harness_bin, write_json, RuntimeOutput};
use serde_json::{json, Value};

/// Builds `nri-policy` (once per test process) with the cargo that builds
/// this test, into the same target directory.
fn policy_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_policy_bin).clone()
}

fn build_policy_bin() -> PathBuf {
    nri_interop::workspace::binary("nri-policy").unwrap()
}

fn scenario() -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "web", "uid": "u0", "namespace": "payments"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1}],
        "steps": [
            {"op": "wait_plugins", "count": 2, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    })
}

/// The Go plugin `20-vendor`, making `adjust`, connected to `socket`.
fn spawn_vendor(dir: &Path, socket: &Path, adjust: Value) -> PluginProcess {
    let config = json!({"events": ["CreateContainer"], "adjust": adjust});
    let config = write_json(dir, "vendor.json", &config).unwrap();
    let bin = harness_bin("nri-ref-plugin");
    PluginProcess::spawn(
        bin.to_str().unwrap(),
        &[
            "-config",
            config.to_str().unwrap(),
            "-socket",
            socket.to_str().unwrap(),
            "-name",
            "vendor",
            "-idx",
            "20",
        ],
        dir,
        "vendor",
    )
}

fn env_and_root_mount() -> Value {
    json!({
        "env": [{"key": "VENDOR_TOKEN", "value": "abc"}],
        "mounts": [{"destination": "/host", "type": "bind", "source": "/",
                    "options": ["rbind", "rw"]}]
    })
}

const POLICY: &str = "\
mode: MODE
default: deny
auditFile: AUDIT
rules:
  - name: vendor-env
    plugins: {names: [vendor]}
    workload: {namespaces: [payments]}
    allow:
      env: ['VENDOR_*']
  - name: no-host-root
    deny:
      mounts: [{sources: [/], access: rw}]
";

/// Runs the scenario with `nri-policy` (policy `POLICY` in `mode`) and the Go
/// plugin making `adjust`; returns the runtime's output, the policy file and
/// the audit file.
fn run(dir: &Path, mode: &str, adjust: Value) -> (RuntimeOutput, PathBuf, PathBuf) {
    let audit = dir.join("audit.jsonl");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        POLICY
            .replace("MODE", mode)
            .replace("AUDIT", audit.to_str().unwrap()),
    )
    .unwrap();
    // Built before the runtime starts waiting for its plugins.
    let bin = policy_bin();
    let (runtime, socket) = spawn_go_runtime(dir, &scenario());
    let _validator = PluginProcess::spawn(
        bin.to_str().unwrap(),
        &[
            "-socket",
            socket.to_str().unwrap(),
            "-policy",
            policy.to_str().unwrap(),
            "-idx",
            "90",
        ],
        dir,
        "policy",
    );
    let _vendor = spawn_vendor(dir, &socket, adjust);
    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    (out, policy, audit)
}

fn create(out: &RuntimeOutput) -> &Value {
    out.step("CreateContainer").unwrap()
}

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn refuses_the_root_mount_with_the_policys_words() {
    let dir = tempfile::tempdir().unwrap();
    let (out, policy, audit) = run(dir.path(), "enforce", env_and_root_mount());
    assert_eq!(
        out.json["plugins"],
        json!(["20-vendor", "90-policy-validator"])
    );
    let error = create(&out)["error"].as_str().unwrap();
    let expected = format!(
        "validation error: plugin \"20-vendor\" may not set mounts \"/host\" \
         (source \"/\", type \"bind\", rw): denied by rule \"no-host-root\" ({}:10)",
        policy.display()
    );
    assert!(error.contains(&expected), "{error}\nexpected: {expected}");

    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let rec = &lines[0];
    assert_eq!(rec["verdict"], "refused");
    assert_eq!(rec["container"]["name"], "server");
    assert_eq!(rec["pod"]["namespace"], "payments");
    let set = rec["set"].as_array().unwrap();
    assert!(
        set.contains(
            &json!({"plugin": "20-vendor", "field": "env", "key": "VENDOR_TOKEN",
                             "value": "abc", "removed": false})
        ),
        "{set:?}"
    );
    assert!(
        set.iter()
            .any(|s| s["plugin"] == "20-vendor" && s["field"] == "mounts" && s["key"] == "/host"),
        "{set:?}"
    );
}

#[test]
fn allows_what_the_policy_allows() {
    let dir = tempfile::tempdir().unwrap();
    let adjust = json!({"env": [{"key": "VENDOR_TOKEN", "value": "abc"}]});
    let (out, _, audit) = run(dir.path(), "enforce", adjust);
    let step = create(&out);
    assert_eq!(step["error"].as_str().unwrap_or(""), "", "{step}");
    assert_eq!(
        step["result"]["adjust"]["env"],
        json!([{"key": "VENDOR_TOKEN", "value": "abc"}]),
        "{step}"
    );
    assert_eq!(audit_lines(&audit)[0]["verdict"], "allowed");
}

#[test]
fn refuses_what_no_rule_allows_under_default_deny() {
    let dir = tempfile::tempdir().unwrap();
    let adjust = json!({"env": [{"key": "PATH", "value": "/evil"}]});
    let (out, policy, _) = run(dir.path(), "enforce", adjust);
    let error = create(&out)["error"].as_str().unwrap();
    let expected = format!(
        "validation error: plugin \"20-vendor\" may not set env \"PATH\" = \"/evil\": \
         no rule allows it (default: deny, {}:2)",
        policy.display()
    );
    assert!(error.contains(&expected), "{error}\nexpected: {expected}");
}

#[test]
fn audit_mode_lets_the_container_through_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _, audit) = run(dir.path(), "audit", env_and_root_mount());
    let step = create(&out);
    assert_eq!(step["error"].as_str().unwrap_or(""), "", "{step}");
    assert_eq!(
        step["result"]["adjust"]["mounts"][0]["source"], "/",
        "{step}"
    );
    let rec = &audit_lines(&audit)[0];
    assert_eq!(rec["verdict"], "would_refuse");
    assert_eq!(rec["violations"][0]["plugin"], "20-vendor");
    assert_eq!(rec["violations"][0]["rule"], "no-host-root");
}
