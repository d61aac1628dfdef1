//! Running `nri-mini-runtime` and the plugins of the tests.
#![allow(dead_code)] // each test file uses a different subset

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Upper bound for anything a test waits for; nothing should come close.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// A child process with its output in files, killed when dropped.
pub struct Process {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Process {
    /// Starts `bin` with `args`; output goes to `<dir>/<name>.stdout|stderr`.
    pub fn spawn(bin: &Path, args: &[&std::ffi::OsStr], dir: &Path, name: &str) -> Process {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let child = Command::new(bin)
            .args(args)
            .env("NRI_MINI_RUNTIME_LOG", "info")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).unwrap())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        Process {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for the exit; kills the process and panics after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() >= timeout {
                self.kill();
                panic!(
                    "no exit within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    self.stdout(),
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process if it runs, and reaps it.
    pub fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Standard output so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The runtime under test.
pub fn runtime_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nri-mini-runtime"))
}

/// Builds the nri-stub example plugin `annotate` with the cargo that built
/// this test, into the same target directory and profile, and returns it.
pub fn build_annotate_example() -> PathBuf {
    nri_interop::workspace::example("annotate").unwrap()
}

/// Waits until `path` exists.
pub fn wait_for_path(path: &Path, what: &Process) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < TIMEOUT,
            "{} did not appear\nstderr:\n{}",
            path.display(),
            what.stderr()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Reads a JSON-lines event log.
pub fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `(event, container id)` pairs of a plugin's event log.
pub fn container_events(log: &[Value]) -> Vec<(String, String)> {
    log.iter()
        .filter(|e| e["container"].is_object())
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_string(),
                e["container"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}
