//! `nri-v010-test-clearcfs`: a small NRI v0.1 plugin used by the adapter's tests,
//! modelled on the classic `clearcfs` example: for a `create` request of a container
//! annotated `qos.class: ls` it writes `-1` to `cpu.cfs_quota_us` of the container's
//! cgroup. Its configuration (`conf`) may set `cgroupRoot` (default
//! `/sys/fs/cgroup/cpu`) and `error` (fail with that message); the annotation
//! `v010-test/error` makes it fail with its value too. With
//! `NRI_V010_TEST_LOG` set, it appends each request, as received, to that file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};

fn main() -> ExitCode {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().take(1 << 20).read_to_end(&mut input) {
        eprintln!("reading request: {e}");
        return ExitCode::FAILURE;
    }
    if let Some(log) = std::env::var_os("NRI_V010_TEST_LOG") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(&input).and_then(|()| f.write_all(b"\n")));
        if let Err(e) = appended {
            eprintln!("logging request: {e}");
        }
    }
    let name = std::env::args()
        .next()
        .and_then(|a| a.rsplit('/').next().map(str::to_string))
        .unwrap_or_default();
    let request: Value = match serde_json::from_slice(&input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("decoding request: {e}");
            return ExitCode::FAILURE;
        }
    };
    let version = request["version"].as_str().unwrap_or_default();
    let (error, metadata) = match std::env::args().nth(1).as_deref() {
        Some("invoke") => invoke(&request),
        other => (
            format!("invalid arg {}", other.unwrap_or_default()),
            json!({}),
        ),
    };
    let result = json!({"plugin": name, "version": version, "error": error, "metadata": metadata});
    println!("{result}");
    ExitCode::SUCCESS
}

/// The error text (empty on success) and metadata of one request.
fn invoke(request: &Value) -> (String, Value) {
    let conf = &request["conf"];
    let annotated_error = &request["spec"]["annotations"]["v010-test/error"];
    if let Some(error) = conf["error"].as_str().or(annotated_error.as_str()) {
        return (error.to_string(), json!({}));
    }
    let latency_sensitive = request["spec"]["annotations"]["qos.class"] == "ls";
    if request["state"] != "create" || !latency_sensitive {
        return (String::new(), json!({}));
    }
    let root = conf["cgroupRoot"].as_str().unwrap_or("/sys/fs/cgroup/cpu");
    let cgroup = request["spec"]["cgroupsPath"].as_str().unwrap_or_default();
    let file = PathBuf::from(root)
        .join(cgroup.trim_start_matches('/'))
        .join("cpu.cfs_quota_us");
    match std::fs::write(&file, "-1") {
        Ok(()) => (String::new(), json!({"cfs_quota_us": "-1"})),
        Err(e) => (format!("clearing {}: {e}", file.display()), json!({})),
    }
}
