//! The validator with the Go reference runtime: a Go plugin (`nri-ref-plugin`)
//! injects an OCI hook; the validator rejects it when configured to, by its `-config`
//! file (external plugin) or by the runtime's drop-in file (pre-installed).

mod common;

use std::path::Path;

use common::{pre_install, spawn_go_runtime, PluginProcess, TIMEOUT};
use nri_interop::{harness_bin, run_ref_runtime, write_json, RuntimeOutput};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-default-validator");

const REJECTED: &str =
    r#"validation error: plugin "20-hooker" attempted restricted OCI hook injection"#;

fn scenario(plugins: u32) -> Value {
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "web", "uid": "u0", "namespace": "prod"}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1}],
        "steps": [
            {"op": "wait_plugins", "count": plugins, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "container": "ctr0"},
            {"op": "stop"}
        ]
    })
}

/// The Go plugin `20-hooker`, injecting a prestart hook, connected to `socket`.
fn spawn_hooker(dir: &Path, socket: &Path) -> PluginProcess {
    let config = json!({
        "events": ["CreateContainer"],
        "adjust": {"hooks": {"prestart": [{"path": "/bin/true"}]}}
    });
    let config = write_json(dir, "hooker.json", &config).unwrap();
    let bin = harness_bin("nri-ref-plugin");
    PluginProcess::spawn(
        bin.to_str().unwrap(),
        &[
            "-config",
            config.to_str().unwrap(),
            "-socket",
            socket.to_str().unwrap(),
            "-name",
            "hooker",
            "-idx",
            "20",
        ],
        dir,
        "hooker",
    )
}

/// Runs the scenario with the external validator (`-config` holding `config`) and the
/// Go hook injector.
fn run_external(dir: &Path, config: &str) -> RuntimeOutput {
    let config_file = dir.join("validator.yaml");
    std::fs::write(&config_file, config).unwrap();
    let (runtime, socket) = spawn_go_runtime(dir, &scenario(2));
    let _validator = PluginProcess::spawn(
        BIN,
        &[
            "-socket",
            socket.to_str().unwrap(),
            "-config",
            config_file.to_str().unwrap(),
        ],
        dir,
        "validator",
    );
    let _hooker = spawn_hooker(dir, &socket);
    let out = runtime.finish(TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    out
}

fn create_error(out: &RuntimeOutput) -> &str {
    out.step("CreateContainer").unwrap()["error"]
        .as_str()
        .unwrap()
}

#[test]
fn rejects_oci_hook_injection_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_external(dir.path(), "rejectOCIHookAdjustment: true\n");
    assert_eq!(
        out.json["plugins"],
        json!(["00-default-validator", "20-hooker"])
    );
    let error = create_error(&out);
    assert!(error.contains(REJECTED), "{error}");
}

#[test]
fn accepts_hooks_when_not_forbidden_or_disabled() {
    for config in [
        "rejectSysctlAdjustment: true\n",
        "enable: false\nrejectOCIHookAdjustment: true\n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = run_external(dir.path(), config);
        assert_eq!(create_error(&out), "", "{config}");
        let create = out.step("CreateContainer").unwrap();
        assert_eq!(
            create["result"]["adjust"]["hooks"]["prestart"],
            json!([{"path": "/bin/true"}]),
            "{create}"
        );
    }
}

#[test]
fn pre_installed_validator_takes_the_runtime_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let mut runtime_args = pre_install(
        dir.path(),
        BIN,
        "05-validator",
        "rejectOCIHookAdjustment: true\n",
    );

    let socket = dir.path().join("nri.sock");
    let scenario = write_json(dir.path(), "scenario.json", &scenario(2)).unwrap();
    runtime_args.extend(["-socket".into(), socket.clone().into_os_string()]);
    let runtime = std::thread::spawn(move || {
        run_ref_runtime("nri-ref-runtime", &scenario, runtime_args, TIMEOUT)
    });
    nri_interop::wait_for_path(&socket, TIMEOUT).unwrap();
    let _hooker = spawn_hooker(dir.path(), &socket);
    let out = runtime.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.json["plugins"], json!(["05-validator", "20-hooker"]));
    let error = create_error(&out);
    assert!(
        error.contains(
            r#"validation error: plugin "20-hooker" attempted restricted OCI hook injection"#
        ),
        "{error}"
    );
}
