//! Runs the plugin binary as an external plugin of the Go reference runtime
//! (`nri-ref-runtime` of the interop harness).
#![allow(dead_code)] // each test file uses a different subset

pub mod ours;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nri_interop::{wait_for_path, write_json, RefRuntime, RuntimeOutput};
use serde_json::Value;

/// Upper bound for anything a test waits for; nothing should come close.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A plugin process, killed when dropped.
pub struct PluginProcess {
    child: Child,
    stderr_path: PathBuf,
}

impl PluginProcess {
    /// Starts `bin` with `args`, standard error (its log) to `dir/<name>.stderr`.
    pub fn spawn(bin: &str, args: &[&str], dir: &Path, name: &str) -> PluginProcess {
        let stderr_path = dir.join(format!("{name}.stderr"));
        let child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        PluginProcess { child, stderr_path }
    }

    /// The plugin's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits until the plugin exited (killing it after `timeout`); true if it exited.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Starts the Go runtime on `scenario`, listening on `dir/nri.sock`.
pub fn spawn_go_runtime(dir: &Path, scenario: &Value) -> (RefRuntime, PathBuf) {
    let socket = dir.join("nri.sock");
    let scenario = write_json(dir, "scenario.json", scenario).unwrap();
    let runtime = RefRuntime::spawn(
        "nri-ref-runtime",
        &scenario,
        ["-socket".as_ref(), socket.as_os_str()],
    )
    .unwrap();
    wait_for_path(&socket, TIMEOUT).unwrap();
    (runtime, socket)
}

/// Runs `scenario` on the Go runtime with the plugin `bin` connected as an external
/// plugin (`-socket` added to `args`). Returns the runtime's output and the plugin's log.
pub fn run_with_go_runtime(
    dir: &Path,
    scenario: &Value,
    bin: &str,
    args: &[&str],
) -> (RuntimeOutput, String) {
    let (runtime, socket) = spawn_go_runtime(dir, scenario);
    let socket = socket.to_str().unwrap().to_owned();
    let mut all_args = vec!["-socket", socket.as_str()];
    all_args.extend_from_slice(args);
    let mut plugin = PluginProcess::spawn(bin, &all_args, dir, "plugin");
    let out = runtime.finish(TIMEOUT).unwrap();
    plugin.wait_exit(Duration::from_secs(5));
    let log = plugin.log();
    assert!(
        out.status.success(),
        "runtime failed: {}\nplugin log:\n{log}",
        out.stderr
    );
    (out, log)
}

/// The result of the first step `op`, with its error text.
pub fn step<'a>(out: &'a RuntimeOutput, op: &str) -> (&'a Value, &'a str) {
    let s = out
        .step(op)
        .unwrap_or_else(|| panic!("no step {op} in {:#}", out.json));
    (&s["result"], s["error"].as_str().unwrap_or(""))
}
