//! The scenario shipped for the `annotate` example plugin
//! (`scenarios/annotate.yaml`, used in docs/plugin-ci.md) passes with the
//! plugin built by cargo.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `nri-stub`'s `annotate` example into this test's target directory.
fn build_example() -> PathBuf {
    common::cargo_build(&["--example", "annotate"])
        .join("examples")
        .join("annotate")
}

#[test]
fn the_annotate_scenario_passes() {
    let bin = build_example();
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/annotate.yaml");
    let out = Command::new(common::bin())
        .arg("run")
        .arg(&scenario)
        .args(["--output", "json"])
        .env("ANNOTATE_BIN", &bin)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(doc["passed"], true, "{doc:#}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(doc["plugins"][1]["name"], "10-annotate");
    assert_eq!(doc["plugins"][1]["kind"], "launched");
}
