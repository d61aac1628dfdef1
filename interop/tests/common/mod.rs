//! Helpers shared by the tests that run plugins built on nri-stub against the Go
//! runtime adaptation.
#![allow(dead_code)] // each test file uses a different subset

pub mod runtimes;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nri_interop::{event_names, wait_for_path, write_json, RefRuntime};
use serde_json::Value;

/// Upper bound for anything a test waits for; nothing should come close.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The events NRI v0.9.0 delivers through the generic StateChange request.
pub const STATE_CHANGE_EVENTS: [&str; 8] = [
    "RunPodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "PostUpdateContainer",
    "RemoveContainer",
];

/// The Rust test plugin (`interop/src/bin/nri-rs-test-plugin`).
pub fn rust_plugin_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nri-rs-test-plugin"))
}

/// The target directory and profile this test was built with.
pub fn target_and_profile() -> (PathBuf, String) {
    nri_interop::workspace::target_and_profile().unwrap()
}

/// Builds the example `name` of the workspace with the cargo that builds this
/// test, into the same target directory, and returns its path.
pub fn build_example(name: &str) -> PathBuf {
    nri_interop::workspace::example(name).unwrap()
}

/// A plugin process (any executable), killed when dropped.
#[derive(Debug)]
pub struct PluginProcess(nri_interop::GoProcess);

impl PluginProcess {
    /// Starts `bin` with `args`, standard error to `stderr_path`.
    pub fn spawn(bin: &Path, args: &[&std::ffi::OsStr], stderr_path: &Path) -> PluginProcess {
        PluginProcess(nri_interop::GoProcess::spawn_bin(bin, args, stderr_path).unwrap())
    }

    /// Waits for the process to exit; panics (after killing it) on timeout.
    pub fn wait_timeout(&mut self, timeout: Duration) -> ExitStatus {
        self.0
            .wait_timeout(timeout)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Kills the process if it still runs, and reaps it.
    pub fn kill(&mut self) {
        self.0.kill();
    }

    /// Standard error so far.
    pub fn stderr(&self) -> String {
        self.0.stderr()
    }
}

/// Starts the Rust test plugin in external mode: it connects to `socket` as
/// `<idx>-<name>` with the configuration `config` (written to `dir`).
pub fn spawn_rust_plugin(
    dir: &Path,
    socket: &Path,
    name: &str,
    idx: &str,
    config: &Value,
    extra_args: &[&str],
) -> PluginProcess {
    spawn_plugin(
        &rust_plugin_bin(),
        dir,
        socket,
        name,
        idx,
        config,
        extra_args,
    )
}

/// Like [`spawn_rust_plugin`] for any test plugin `bin` taking the same
/// flags (the Go `nri-ref-plugin` does).
pub fn spawn_plugin(
    bin: &Path,
    dir: &Path,
    socket: &Path,
    name: &str,
    idx: &str,
    config: &Value,
    extra_args: &[&str],
) -> PluginProcess {
    let config = write_json(dir, &format!("{idx}-{name}.json"), config).unwrap();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "-config".as_ref(),
        config.as_os_str(),
        "-socket".as_ref(),
        socket.as_os_str(),
        "-name".as_ref(),
        name.as_ref(),
        "-idx".as_ref(),
        idx.as_ref(),
    ];
    args.extend(extra_args.iter().map(|a| std::ffi::OsStr::new(*a)));
    PluginProcess::spawn(bin, &args, &dir.join(format!("{idx}-{name}.stderr")))
}

/// Starts `program` on `scenario` listening on `dir/nri.sock`, and waits for the
/// socket. Returns the runtime and the socket path.
pub fn spawn_runtime_with_socket(
    program: &str,
    dir: &Path,
    scenario: &Value,
) -> (RefRuntime, PathBuf) {
    let socket = dir.join("nri.sock");
    let scenario = write_json(dir, "scenario.json", scenario).unwrap();
    let runtime =
        RefRuntime::spawn(program, &scenario, ["-socket".as_ref(), socket.as_os_str()]).unwrap();
    wait_for_path(&socket, TIMEOUT).unwrap();
    (runtime, socket)
}

/// Writes `scenario` into `dir` and replays it on the Go runtime
/// (`nri-ref-runtime`) with the pre-installed plugins of `plugin_dir`; the
/// run must succeed with every step passing.
pub fn go_runtime_with_plugin_dir(
    dir: &Path,
    plugin_dir: &Path,
    scenario: &Value,
) -> nri_interop::RuntimeOutput {
    let scenario = nri_interop::write_json(dir, "scenario.json", scenario).unwrap();
    let out = nri_interop::run_ref_runtime(
        "nri-ref-runtime",
        &scenario,
        ["-plugin-dir".as_ref(), plugin_dir.as_os_str()],
        TIMEOUT,
    )
    .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.failed_steps(), [], "{:#}", out.json["steps"]);
    out
}

/// Puts `bin` into `plugin_dir` as the pre-installed plugin `file_name`
/// (`NN-name`), by symbolic link.
pub fn install_plugin(plugin_dir: &Path, file_name: &str, bin: &Path) {
    std::fs::create_dir_all(plugin_dir).unwrap();
    std::os::unix::fs::symlink(bin, plugin_dir.join(file_name)).unwrap();
}

/// The first log entry of `event` (panics with the event list when missing).
pub fn entry<'a>(events: &'a [Value], event: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == event)
        .unwrap_or_else(|| panic!("no {event} in {:?}", event_names(events)))
}

/// The log entries of events delivered by the runtime (without `closed`, `exit`,
/// `UpdateContainers`).
pub fn lifecycle(events: &[Value]) -> Vec<&str> {
    event_names(events)
        .into_iter()
        .filter(|e| !matches!(*e, "closed" | "exit" | "UpdateContainers"))
        .collect()
}

/// The ids (`id` field) of a list of pods or containers.
pub fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}
