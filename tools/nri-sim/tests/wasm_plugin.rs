//! WebAssembly plugins in scenarios (`- wasm: FILE`): the Go-built test
//! modules of the interop harness (`interop/wasm-plugins`, `GOOS=wasip1
//! GOARCH=wasm -buildmode=c-shared`) run by the simulated runtime.

#![cfg(feature = "wasm")]

mod common;

use std::path::PathBuf;

use common::run_scenario;

fn module(program: &str) -> PathBuf {
    let path = nri_interop::wasm_plugin(program);
    // Compile once into the default cache of compiled modules, which the
    // simulator's runtime then loads from (the first compile of a Go module
    // takes seconds).
    nri_adaptation::nri_wasm::WasmPlugin::load(
        &path,
        program,
        &nri_adaptation::nri_wasm::WasmOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{program}: {e}"));
    path
}

#[test]
fn a_wasm_plugin_adjusts_fails_and_traps_with_the_report_of_other_plugins() {
    let yaml = format!(
        r#"
plugins:
  - wasm: "{}"
    name: scripted
    index: "30"
    config: {{tag: from-the-scenario}}
pods: [{{name: p}}]
containers: [{{name: app}}, {{name: fail-me}}, {{name: trap-me}}, {{name: after}}]
steps:
  - run_pod: p
  - create: app
    expect:
      called: [30-scripted]
      owners: {{env/NRI_WASM_TAG: scripted}}
      env: {{NRI_WASM_TAG: from-the-scenario}}
      annotations: {{nri-wasm/adjusted: app}}
  - create: fail-me
    expect:
      error: "refusing to create fail-me"
      plugin_failures: [scripted]
  - create: trap-me
    expect:
      error: "trap requested by trap-me"
      plugin_failures: [scripted]
  - create: after
    expect:
      called: [scripted]
      annotations: {{nri-wasm/adjusted: after}}
"#,
        module("nri-wasm-scripted").display()
    );
    let (_d, run) = run_scenario(&yaml, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let plugins = doc["plugins"].as_array().expect("plugins");
    assert_eq!(plugins.len(), 1, "{plugins:?}");
    assert_eq!(plugins[0]["name"], "30-scripted");
    assert_eq!(plugins[0]["kind"], "wasm");
    // Configure answered no events: subscribed to all of them.
    let events: Vec<&str> = plugins[0]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(events.contains(&"CreateContainer"), "{events:?}");
    assert!(events.contains(&"RemovePodSandbox"), "{events:?}");
    let app = doc["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "app")
        .expect("app");
    assert_eq!(app["spec"]["annotations"]["nri-wasm/adjusted"], "app");
    assert_eq!(
        app["spec"]["linux"]["resources"]["cpu"]["shares"], 123,
        "{app}"
    );
    // The plugin stayed through its error and its trap.
    assert_eq!(plugins[0]["disconnected"], false);
}

#[test]
fn identity_comes_from_the_file_name_and_plugin_dir_modules_run_too() {
    let dir = tempfile::tempdir().unwrap();
    let logger = module("nri-wasm-logger");
    // `NN-name.wasm`: index and name from the file name.
    std::fs::copy(&logger, dir.path().join("20-wlog.wasm")).unwrap();
    // A module of `plugin_dir`, mode 0755 as the runtime wants it.
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir(&plugin_dir).unwrap();
    std::fs::copy(module("nri-wasm-scripted"), plugin_dir.join("40-dirmod")).unwrap();
    let yaml = r#"
plugin_dir: ./plugins
plugins:
  - wasm: ./20-wlog.wasm
pods: [{name: p}]
containers: [{name: app}]
steps:
  - run_pod: p
  - create: app
    expect:
      called: [20-wlog, 40-dirmod]
      annotations: {nri-wasm/adjusted: app}
  - stop: app
  - remove: app
"#;
    std::fs::write(dir.path().join("scenario.yaml"), yaml).unwrap();
    let run = common::run_in(
        dir.path(),
        &["run", "scenario.yaml", "-o", "json"],
        std::time::Duration::from_secs(120),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = run.json();
    let kinds: Vec<(String, String)> = doc["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["kind"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("20-wlog".to_string(), "wasm".to_string()),
            ("40-dirmod".to_string(), "wasm".to_string())
        ]
    );
}

#[test]
fn a_file_that_is_no_module_is_a_setup_error_naming_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("not.wasm"), "#!/bin/sh\n").unwrap();
    std::fs::write(
        dir.path().join("scenario.yaml"),
        "plugins: [{wasm: ./not.wasm}]\nsteps: []\n",
    )
    .unwrap();
    let run = common::run_in(
        dir.path(),
        &["run", "scenario.yaml"],
        std::time::Duration::from_secs(60),
    );
    assert_ne!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("\"50-not\"") && run.stderr.contains("is not a WebAssembly module"),
        "{}",
        run.stderr
    );
}
