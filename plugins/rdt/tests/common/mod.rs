//! Running the plugin binary against the Go reference runtime (`nri-ref-runtime`).
#![allow(dead_code)]

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nri_interop::{wait_for_path, write_json, RefRuntime, RuntimeOutput};
use serde_json::Value;

pub mod ours;

/// Upper bound for anything a test waits for.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A child process killed when dropped.
pub struct Killed(pub Child, pub PathBuf);

impl Killed {
    /// Standard error of the process so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin` with `args`, standard error to `dir/<name>.stderr`.
pub fn spawn(bin: &Path, args: &[OsString], dir: &Path, name: &str) -> Killed {
    spawn_env(bin, args, &[], dir, name)
}

/// Like [`spawn`], with extra environment variables.
pub fn spawn_env(
    bin: &Path,
    args: &[OsString],
    env: &[(&str, &Path)],
    dir: &Path,
    name: &str,
) -> Killed {
    let stderr_path = dir.join(format!("{name}.stderr"));
    let stderr = File::create(&stderr_path).unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    Killed(child, stderr_path)
}

/// Runs `scenario` on the Go runtime listening on `dir/nri.sock`, with the plugin
/// `bin` connected to it; `args(socket)` gives the plugin's arguments.
pub fn run_on_go_runtime(
    dir: &Path,
    scenario: &Value,
    bin: &Path,
    args: impl FnOnce(&Path) -> Vec<OsString>,
    env: &[(&str, &Path)],
) -> (RuntimeOutput, String) {
    let socket = dir.join("nri.sock");
    let scenario = write_json(dir, "scenario.json", scenario).unwrap();
    let runtime = RefRuntime::spawn(
        "nri-ref-runtime",
        &scenario,
        ["-socket".as_ref(), socket.as_os_str()],
    )
    .unwrap();
    wait_for_path(&socket, TIMEOUT).unwrap();
    let plugin = spawn_env(bin, &args(&socket), env, dir, "plugin");
    let out = runtime.finish(TIMEOUT).unwrap();
    let stderr = plugin.stderr();
    assert!(
        out.status.success(),
        "runtime failed: {}\nplugin: {stderr}",
        out.stderr
    );
    (out, stderr)
}

/// `[-flag, value, ...]` as OS strings.
pub fn os_args(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}
