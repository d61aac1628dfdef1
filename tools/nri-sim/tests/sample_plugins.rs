//! The sample plugins of `plugins/` run under the simulator:
//! `scenarios/sample-plugins.yaml` with the ulimit-adjuster and the
//! device-injector built by cargo.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the binaries of the sample plugin packages into this test's target
/// directory and returns that directory's profile folder.
fn build_plugins(packages: &[&str]) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let target = profile_dir.parent().unwrap().to_owned();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target);
    for p in packages {
        cmd.args(["-p", p]);
    }
    if profile == "release" {
        cmd.arg("--release");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir
}

#[test]
fn sample_plugins_adjust_containers_from_annotations() {
    let dir = build_plugins(&["nri-plugin-ulimit-adjuster", "nri-plugin-device-injector"]);
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/sample-plugins.yaml");
    let out = Command::new(common::bin())
        .arg("run")
        .arg(&scenario)
        .args(["--output", "json"])
        .env("ULIMIT_BIN", dir.join("nri-ulimit-adjuster"))
        .env("DEVICE_INJECTOR_BIN", dir.join("nri-device-injector"))
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(doc["passed"], true, "{doc:#}");
    assert_eq!(out.status.code(), Some(0));
    let names: Vec<&str> = doc["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"10-ulimit-adjuster"), "{names:?}");
    assert!(names.contains(&"20-device-injector"), "{names:?}");
}
