//! The logger with the Go reference runtime: as an external plugin configured by flags,
//! and pre-installed, configured by its drop-in file.

mod common;

use common::{args, pre_install, run_with_go_runtime, step, TIMEOUT};
use nri_interop::{run_ref_runtime, write_json};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_nri-logger");

fn scenario(wait_for_plugin: bool) -> Value {
    let mut steps = vec![];
    if wait_for_plugin {
        steps.push(json!({"op": "wait_plugins", "count": 1, "timeout_ms": 30000}));
    }
    steps.extend([
        json!({"op": "RunPodSandbox", "pod": "pod0"}),
        json!({"op": "CreateContainer", "container": "ctr0"}),
        json!({"op": "StartContainer", "container": "ctr0"}),
        json!({"op": "StopContainer", "container": "ctr0"}),
        json!({"op": "stop"}),
    ]);
    json!({
        "runtime": {"name": "containerd", "version": "v2.2.0"},
        "pods": [{"id": "pod0", "name": "web", "uid": "u0", "namespace": "prod",
                  "labels": {"app": "web"}}],
        "containers": [{"id": "ctr0", "pod_sandbox_id": "pod0", "name": "server", "state": 1,
                        "env": ["SET_ME=old"]}],
        "steps": steps
    })
}

fn logger_value(v: &Value) -> &str {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    assert!(s.starts_with("logger-pid-"), "{s}");
    assert!(s["logger-pid-".len()..].parse::<u32>().is_ok(), "{s}");
    s
}

#[test]
fn external_logger_logs_its_events_and_injects_from_flags() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("logger.log");
    let (out, _) = run_with_go_runtime(
        dir.path(),
        &scenario(true),
        BIN,
        &args(&[
            "-events",
            "RunPodSandbox,CreateContainer",
            "-log-file",
            log_file.to_str().unwrap(),
            "-add-annotation",
            "logger.example.com/pid",
            "-set-env",
            "SET_ME",
        ]),
    );
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert_eq!(out.json["plugins"], json!(["10-logger"]));

    let (create, _) = step(&out, "CreateContainer");
    let adjust = &create["adjust"];
    let value = logger_value(&adjust["annotations"]["logger.example.com/pid"]).to_owned();
    assert_eq!(
        adjust["env"],
        json!([{"key": "SET_ME", "value": value}]),
        "{create}"
    );

    let log = std::fs::read_to_string(&log_file).unwrap();
    for line in [
        "RunPodSandbox: pod:",
        "RunPodSandbox:    name: web",
        "RunPodSandbox:    namespace: prod",
        "CreateContainer: container:",
        "CreateContainer:    name: server",
        "CreateContainer:    - SET_ME=old",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
    assert!(
        !log.contains("StartContainer: pod:"),
        "not subscribed:\n{log}"
    );
    assert!(
        !log.contains("StopContainer: pod:"),
        "not subscribed:\n{log}"
    );
}

#[test]
fn pre_installed_logger_takes_its_drop_in_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("from-config.log");
    let conf = format!(
        "logFile: {}\nevents: [CreateContainer, StopContainer]\n\
         setAnnotation: logger.example.com/set\naddEnv: LOGGER\n",
        log_file.display()
    );
    let runtime_args = pre_install(dir.path(), BIN, "10-logger", &conf);
    let scenario = write_json(dir.path(), "scenario.json", &scenario(false)).unwrap();
    let out = run_ref_runtime("nri-ref-runtime", &scenario, runtime_args, TIMEOUT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json);
    assert_eq!(out.json["plugins"], json!(["10-logger"]));

    let (create, _) = step(&out, "CreateContainer");
    let adjust = &create["adjust"];
    let value = logger_value(&adjust["annotations"]["logger.example.com/set"]).to_owned();
    assert_eq!(
        adjust["env"],
        json!([{"key": "LOGGER", "value": value}]),
        "{create}"
    );

    let log = std::fs::read_to_string(&log_file).unwrap();
    // Logged from Configure on, once the file is open.
    assert!(log.contains("Synchronize: pods:"), "{log}");
    assert!(log.contains("CreateContainer: pod:"), "{log}");
    assert!(log.contains("StopContainer: container:"), "{log}");
    assert!(
        !log.contains("RunPodSandbox: pod:"),
        "not subscribed:\n{log}"
    );
}
