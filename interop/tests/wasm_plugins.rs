//! WebAssembly plugins written in Go (`interop/wasm-plugins`, built with
//! `GOOS=wasip1 GOARCH=wasm -buildmode=c-shared`) installed in the plugin
//! directory of the Go adaptation (`nri-ref-runtime`, wazero) and of ours
//! (`nri-rs-ref-runtime`, nri-wasm): the same scenarios must give the same
//! results. `nri-wasm-logger` logs every event through the host's log
//! function; `nri-wasm-scripted` adjusts, updates, fails, rejects, hangs and
//! traps, depending on the container's name.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::runtimes::{Rt, Running};
use common::TIMEOUT;
use nri_interop::{wasm_plugin, RuntimeOutput};
use serde_json::{json, Value};

const LOGGER: &str = "nri-wasm-logger";
const SCRIPTED: &str = "nri-wasm-scripted";
/// The Rust port of the reference's `wasm` sample (`plugins/wasm-logger`,
/// on `nri-wasm-guest`).
const RUST_LOGGER: &str = "nri-plugin-wasm-logger";

/// Builds `plugins/wasm-logger` for `wasm32-wasip1` (release: a small module,
/// quick to build) with the cargo that builds this test, into the same target
/// directory, once per test process; returns the module. Fails, with what to
/// do, when the target is not installed.
fn rust_wasm_logger() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let sysroot = Command::new("rustc")
                .args(["--print", "sysroot"])
                .output()
                .expect("run rustc --print sysroot");
            let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
            assert!(
                sysroot.join("lib/rustlib/wasm32-wasip1").is_dir(),
                "the Rust target wasm32-wasip1 is not installed in {} (needed to build the \
                 Rust WebAssembly plugin): rustup target add wasm32-wasip1",
                sysroot.display()
            );
            let (target, _) = common::target_and_profile();
            let out = Command::new(env!("CARGO"))
                .args(["build", "--quiet", "--release", "--target", "wasm32-wasip1"])
                .args(["-p", RUST_LOGGER])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("CARGO_TARGET_DIR", &target)
                .output()
                .expect("run cargo");
            assert!(
                out.status.success(),
                "cargo build --target wasm32-wasip1 -p {RUST_LOGGER} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let module = target.join("wasm32-wasip1/release/nri_plugin_wasm_logger.wasm");
            assert!(module.is_file(), "{} missing", module.display());
            module
        })
        .clone()
}

/// The module of a test plugin: the Rust-built one, or a Go-built one of
/// `interop/wasm-plugins`.
fn module_of(program: &str) -> PathBuf {
    if program == RUST_LOGGER {
        rust_wasm_logger()
    } else {
        wasm_plugin(program)
    }
}

/// Compiles each module once per test process into the default cache of
/// compiled modules, which our runtime then loads from: tests running in
/// parallel would otherwise each compile the same 10 MB modules.
fn warm_cache() {
    static WARM: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    WARM.get_or_init(|| {
        use nri_adaptation::nri_wasm::{WasmOptions, WasmPlugin};
        for program in [LOGGER, SCRIPTED] {
            WasmPlugin::load(&wasm_plugin(program), program, &WasmOptions::default())
                .unwrap_or_else(|e| panic!("{program}: {e}"));
        }
    });
}

/// Installs the plugins (`(file name, program, config)`) and runs the
/// scenario on `rt`.
fn run(rt: Rt, base: &Path, scenario: &Value, plugins: &[(&str, &str, Value)]) -> RuntimeOutput {
    warm_cache();
    let dir = base.join(rt.name());
    let plugin_dir = dir.join("plugins");
    let conf_dir = dir.join("conf");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    std::fs::create_dir_all(&conf_dir).unwrap();
    for (file, program, config) in plugins {
        common::install_plugin(&plugin_dir, file, &module_of(program));
        if !config.is_null() {
            std::fs::write(conf_dir.join(format!("{file}.conf")), config.to_string()).unwrap();
        }
    }
    Running::with_plugin_dirs(rt, &dir, scenario, &plugin_dir, &conf_dir)
}

/// Pre-installed plugins are configured and synchronized before the first
/// step runs, so the scenarios need no `wait_plugins` step.
fn scenario(request_timeout_ms: u64, containers: Value, steps: Value) -> Value {
    json!({
        "runtime": {"name": "wasm-runtime", "version": "v1.2.3"},
        "request_timeout_ms": request_timeout_ms,
        "pods": [{"id": "pod0", "name": "pod0", "uid": "uid0", "namespace": "default"}],
        "containers": containers,
        "steps": steps,
    })
}

/// Steps that send every event: pod0 runs and is updated, ctr0 goes
/// through its whole life; then `more`, then pod0 stops and is removed.
fn every_event<const N: usize>(more: [Value; N]) -> Value {
    let mut steps = vec![
        json!({"op": "RunPodSandbox", "pod": "pod0"}),
        json!({"op": "UpdatePodSandbox", "pod": "pod0", "linux_resources": {"cpu": {"shares": {"value": 2}}}}),
        json!({"op": "PostUpdatePodSandbox", "pod": "pod0"}),
        json!({"op": "CreateContainer", "pod": "pod0", "container": "ctr0"}),
        json!({"op": "PostCreateContainer", "container": "ctr0"}),
        json!({"op": "StartContainer", "container": "ctr0"}),
        json!({"op": "PostStartContainer", "container": "ctr0"}),
        json!({"op": "UpdateContainer", "container": "ctr0", "linux_resources": {"cpu": {"shares": {"value": 512}}}}),
        json!({"op": "PostUpdateContainer", "container": "ctr0"}),
        json!({"op": "StopContainer", "container": "ctr0"}),
        json!({"op": "RemoveContainer", "container": "ctr0"}),
    ];
    steps.extend(more);
    steps.push(json!({"op": "StopPodSandbox", "pod": "pod0"}));
    steps.push(json!({"op": "RemovePodSandbox", "pod": "pod0"}));
    Value::Array(steps)
}

fn ctr(id: &str, state: i64) -> Value {
    json!({"id": id, "pod_sandbox_id": "pod0", "name": id, "state": state})
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// Runs on both runtimes; returns (go, rust).
fn both(scenario: &Value, plugins: &[(&str, &str, Value)]) -> (RuntimeOutput, RuntimeOutput) {
    let base = tempfile::tempdir().unwrap();
    let go = run(Rt::Go, base.path(), scenario, plugins);
    let rs = run(Rt::Rust, base.path(), scenario, plugins);
    assert!(go.status.success(), "go: {}", go.stderr);
    assert!(rs.status.success(), "rust: {}", rs.stderr);
    (go, rs)
}

/// The two runtimes' output documents are equal.
fn assert_same(go: &RuntimeOutput, rs: &RuntimeOutput) {
    assert_eq!(
        go.json,
        rs.json,
        "output documents differ\n--- go:\n{}\n--- rust:\n{}\n--- go stderr:\n{}\n--- rust stderr:\n{}",
        pretty(&go.json),
        pretty(&rs.json),
        go.stderr,
        rs.stderr
    );
}

fn step<'a>(out: &'a RuntimeOutput, op: &str, container: &str) -> &'a Value {
    out.steps()
        .iter()
        .find(|s| s["op"] == op && s["container"] == container)
        .unwrap_or_else(|| panic!("no step {op} {container} in {}", pretty(&out.json)))
}

#[test]
fn logger_and_scripted_plugin_give_the_same_results_on_both_runtimes() {
    let sc = scenario(
        4000,
        json!([
            ctr("ctr0", 0),
            ctr("ctr1", 2),
            ctr("ctr-fail", 0),
            ctr("ctr-reject", 0)
        ]),
        every_event([
            json!({"op": "CreateContainer", "pod": "pod0", "container": "ctr-fail"}),
            json!({"op": "CreateContainer", "pod": "pod0", "container": "ctr-reject"}),
        ]),
    );
    let plugins = [
        ("10-logger", LOGGER, Value::Null),
        ("20-scripted", SCRIPTED, json!({"tag": "from-conf-d"})),
    ];
    let (go, rs) = both(&sc, &plugins);
    assert_same(&go, &rs);

    // What the documents agree on is what the plugins asked for.
    let adjust = &step(&rs, "CreateContainer", "ctr0")["result"]["adjust"];
    assert_eq!(
        adjust["annotations"]["nri-wasm/adjusted"], "ctr0",
        "{adjust}"
    );
    assert_eq!(
        adjust["env"],
        json!([{"key": "NRI_WASM_TAG", "value": "from-conf-d"}])
    );
    assert_eq!(adjust["mounts"][0]["destination"], "/nri-wasm", "{adjust}");
    assert_eq!(adjust["linux"]["resources"]["cpu"]["shares"]["value"], 123);
    assert_eq!(
        adjust["linux"]["resources"]["memory"]["limit"]["value"],
        256 << 20
    );
    assert_eq!(
        step(&rs, "UpdateContainer", "ctr0")["result"]["update"][0]["container_id"],
        "ctr1"
    );
    assert_eq!(
        step(&rs, "StopContainer", "ctr0")["result"]["update"][0]["linux"]["resources"]["cpu"]
            ["shares"]["value"],
        88
    );
    let failed = step(&rs, "CreateContainer", "ctr-fail")["error"].to_string();
    assert!(failed.contains("refusing to create ctr-fail"), "{failed}");
    let rejected = step(&rs, "CreateContainer", "ctr-reject")["error"].to_string();
    assert!(
        rejected.contains("rejecting the adjustment of ctr-reject"),
        "{rejected}"
    );

    // The logger's messages reach both runtimes' logs.
    for (name, out) in [("go", &go), ("rust", &rs)] {
        for msg in [
            "nri-wasm-logger: Configure runtime=wasm-runtime/v1.2.3",
            "nri-wasm-logger: Synchronize pods=",
            "nri-wasm-logger: CreateContainer ctr0",
            "nri-wasm-logger: ValidateContainerAdjustment ctr0",
            "nri-wasm-logger: RemovePodSandbox pod0",
            "nri-wasm-scripted: configured with tag \\\"from-conf-d\\\"",
        ] {
            let msg = if name == "rust" {
                msg.replace("\\\"", "\"")
            } else {
                msg.to_string()
            };
            assert!(
                out.stderr.contains(&msg),
                "{name}: no {msg:?} in\n{}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_hanging_plugin_times_out_and_is_dropped_on_both_runtimes() {
    let sc = scenario(
        1000,
        json!([ctr("ctr-hang", 0), ctr("ctr0", 0)]),
        json!([
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr-hang"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"}
        ]),
    );
    let plugins = [("20-scripted", SCRIPTED, json!({"tag": "t"}))];
    let (go, rs) = both(&sc, &plugins);
    assert_same(&go, &rs);
    // The plugin is gone: ctr0 is created without its adjustment.
    let ctr0 = step(&rs, "CreateContainer", "ctr0");
    assert_eq!(ctr0["error"], "", "{ctr0}");
    assert!(
        ctr0["result"]["adjust"]["annotations"]
            .get("nri-wasm/adjusted")
            .is_none(),
        "{ctr0}"
    );
}

/// A Go plugin that panics traps (Go's runtime aborts with `unreachable`).
/// The call fails on both runtimes, with the engine's words; the next call
/// works on both: the reference goes on with the same instance, ours with a
/// new one that was configured and synchronized again, with the table as it
/// is then (docs/decisions.md [22]). Apart from that second
/// synchronization, the documents are the same.
#[test]
fn a_trapping_plugin_fails_the_call_and_serves_the_next_one() {
    let sc = scenario(
        4000,
        json!([ctr("ctr-trap", 0), ctr("ctr0", 0)]),
        json!([
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr-trap"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"}
        ]),
    );
    let plugins = [("20-scripted", SCRIPTED, json!({"tag": "again"}))];
    let (mut go, mut rs) = both(&sc, &plugins);
    // wazero: "wasm error: unreachable" and a wasm stack; wasmtime: the
    // trap, our plugin's name and what the module wrote to stderr.
    let go_err = step(&go, "CreateContainer", "ctr-trap")["error"].clone();
    let rs_err = step(&rs, "CreateContainer", "ctr-trap")["error"].clone();
    assert!(go_err.as_str().unwrap().contains("unreachable"), "{go_err}");
    let rs_text = rs_err.as_str().unwrap();
    assert!(
        rs_text.contains("20-scripted")
            && rs_text.contains("unreachable")
            && rs_text.contains("trap requested by ctr-trap"),
        "{rs_text}"
    );
    for out in [&mut go, &mut rs] {
        for st in out.json["steps"].as_array_mut().unwrap() {
            if st["container"] == "ctr-trap" {
                st["error"] = json!("<trap>");
            }
        }
    }
    // Ours synchronized the new instance: the pod of the RunPodSandbox step
    // is in the table by then.
    let doc = pretty(&rs.json);
    let syncs = rs.json["synchronize"].as_array_mut().unwrap();
    assert_eq!(syncs.len(), 2, "{doc}");
    assert_eq!(syncs[1]["pods"], 1, "{doc}");
    assert_eq!(syncs[1]["error"], "", "{doc}");
    syncs.truncate(1);
    assert_eq!(go.json["synchronize"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        go.json,
        rs.json,
        "output documents differ\n--- go:\n{}\n--- rust:\n{}",
        pretty(&go.json),
        pretty(&rs.json)
    );
    let ctr0 = step(&rs, "CreateContainer", "ctr0");
    assert_eq!(
        ctr0["result"]["adjust"]["env"],
        json!([{"key": "NRI_WASM_TAG", "value": "again"}]),
        "{}",
        pretty(&rs.json)
    );
}

/// The reference only starts plugin files with an execute bit; a WASM
/// module installed with mode 0644 (what `go build` writes) is ignored by
/// both runtimes.
#[test]
fn a_module_without_execute_bit_is_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let sc = scenario(
        2000,
        json!([ctr("ctr0", 0)]),
        json!([
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "CreateContainer", "pod": "pod0", "container": "ctr0"}
        ]),
    );
    let base = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for rt in [Rt::Go, Rt::Rust] {
        let dir = base.path().join(rt.name());
        let plugin_dir = dir.join("plugins");
        std::fs::create_dir_all(&plugin_dir).unwrap();
        let file = plugin_dir.join("20-scripted");
        std::fs::copy(wasm_plugin(SCRIPTED), &file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = Running::spawn(
            rt,
            &dir,
            &sc,
            &["-plugin-dir".as_ref(), plugin_dir.as_os_str()],
        )
        .finish(TIMEOUT);
        assert!(out.status.success(), "{}", out.stderr);
        let ctr0 = step(&out, "CreateContainer", "ctr0");
        assert!(ctr0["result"]["adjust"].is_null(), "{}", pretty(&out.json));
        assert!(
            !out.stderr.to_lowercase().contains("found wasm plugin"),
            "{}",
            out.stderr
        );
        outs.push(out);
    }
    assert_eq!(outs[0].json, outs[1].json);
}

/// The Rust port of the reference's `wasm` sample, built with
/// `nri-wasm-guest`, on both runtimes: loaded, configured, synchronized,
/// called for every event, changing nothing, its log messages in both
/// runtimes' logs.
#[test]
fn the_rust_built_logger_runs_on_both_runtimes() {
    let sc = scenario(4000, json!([ctr("ctr0", 0)]), every_event([]));
    let plugins = [("10-rslogger", RUST_LOGGER, Value::Null)];
    let (go, rs) = both(&sc, &plugins);
    assert_same(&go, &rs);
    assert!(
        rs.steps().iter().all(|s| s["error"] == ""),
        "{}",
        pretty(&rs.json)
    );
    for (name, out) in [("go", &go), ("rust", &rs)] {
        for what in [
            "configure",
            "synchronize",
            "run pod sandbox",
            "update pod sandbox",
            "post update pod sandbox",
            "create container",
            "validate container adjustment",
            "post create container",
            "start container",
            "post start container",
            "update container",
            "post update container",
            "stop container",
            "remove container",
            "stop pod sandbox",
            "remove pod sandbox",
        ] {
            let msg = format!("WASM: Got {what} request");
            assert!(
                out.stderr.contains(&msg),
                "{name}: no {msg:?} in\n{}",
                out.stderr
            );
        }
    }
}
