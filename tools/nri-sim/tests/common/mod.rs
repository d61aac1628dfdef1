//! Running the `nri-sim` binary with a deadline.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nri-sim"))
}

/// Runs `nri-sim args` in `dir`, killed after `limit`.
pub fn run_in(dir: &Path, args: &[&str], limit: Duration) -> Run {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env_remove("NRI_SIM_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!(
                "nri-sim {args:?} did not finish within {limit:?}; stderr so far:\n{}",
                t_err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// Writes `yaml` as `scenario.yaml` in a new directory and runs it.
pub fn run_scenario(yaml: &str, extra: &[&str]) -> (tempfile::TempDir, Run) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.yaml"), yaml).unwrap();
    let mut args = vec!["run", "scenario.yaml", "--color", "never"];
    args.extend_from_slice(extra);
    let run = run_in(dir.path(), &args, Duration::from_secs(60));
    (dir, run)
}

/// Builds the program `bin` of the workspace (the profile of this test) and
/// returns its path.
pub fn workspace_binary(bin: &str) -> PathBuf {
    cargo_build(&["--bin", bin]).join(bin)
}

/// `cargo build --workspace ARGS` for this test's target directory and
/// profile ([`nri_interop::workspace::cargo_build`]); the profile's
/// directory (`target/debug`).
pub fn cargo_build(args: &[&str]) -> PathBuf {
    nri_interop::workspace::cargo_build(args).unwrap()
}

/// Runs the ulimit-adjuster sample as plugin `15-limits` on its own thread
/// and runtime, connecting once `socket` appears (within 30 s); it ends when
/// the simulator goes away.
pub fn spawn_limits_plugin(socket: PathBuf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while !socket.exists() {
                assert!(tokio::time::Instant::now() < deadline, "no socket");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let stub = nri_stub::Stub::builder(nri_plugin_ulimit_adjuster::plugin::UlimitAdjuster)
                .name("limits")
                .index("15")
                .socket_path(socket)
                .build()
                .unwrap();
            let _ = stub.run().await;
        });
    })
}
