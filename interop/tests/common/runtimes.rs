//! Running a scenario on either runtime: the Go reference adaptation
//! (`nri-ref-runtime`) or ours (`nri-rs-ref-runtime`, built by cargo), with
//! Go plugins pre-installed or external.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nri_interop::{harness_bin, read_json, wait_for_path, write_json, RuntimeOutput};
use serde_json::Value;

use super::{PluginProcess, TIMEOUT};

/// Which runtime adaptation replays the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rt {
    /// The official Go adaptation (v0.12.5), `nri-ref-runtime`.
    Go,
    /// nri-adaptation, `nri-rs-ref-runtime`.
    Rust,
}

impl Rt {
    /// The runner's executable.
    pub fn bin(self) -> PathBuf {
        match self {
            Rt::Go => harness_bin("nri-ref-runtime"),
            Rt::Rust => PathBuf::from(env!("CARGO_BIN_EXE_nri-rs-ref-runtime")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rt::Go => "go",
            Rt::Rust => "rust",
        }
    }
}

/// A runner started in the background.
#[derive(Debug)]
pub struct Running {
    process: PluginProcess,
    output: PathBuf,
}

impl Running {
    /// Starts `rt` on `scenario` (written to `dir/scenario.json`); output to
    /// `dir/out.json`, log to `dir/runtime.stderr`.
    pub fn spawn(rt: Rt, dir: &Path, scenario: &Value, extra: &[&OsStr]) -> Running {
        std::fs::create_dir_all(dir).unwrap();
        let path = write_json(dir, "scenario.json", scenario).unwrap();
        let output = dir.join("out.json");
        let _ = std::fs::remove_file(&output);
        let mut args: Vec<&OsStr> = vec![
            "-scenario".as_ref(),
            path.as_os_str(),
            "-output".as_ref(),
            output.as_os_str(),
        ];
        args.extend_from_slice(extra);
        let process = PluginProcess::spawn(&rt.bin(), &args, &dir.join("runtime.stderr"));
        Running { process, output }
    }

    /// Starts `rt` listening on `dir/nri.sock` and waits for the socket.
    pub fn spawn_with_socket(
        rt: Rt,
        dir: &Path,
        scenario: &Value,
        extra: &[&OsStr],
    ) -> (Running, PathBuf) {
        let socket = dir.join("nri.sock");
        let _ = std::fs::remove_file(&socket);
        let mut args: Vec<&OsStr> = vec!["-socket".as_ref(), socket.as_os_str()];
        args.extend_from_slice(extra);
        let running = Running::spawn(rt, dir, scenario, &args);
        wait_for_path(&socket, TIMEOUT).unwrap();
        (running, socket)
    }

    /// Starts `rt` on `scenario` with the pre-installed plugins of
    /// `plugin_dir`, configured from `conf_dir`, and waits for its output.
    pub fn with_plugin_dirs(
        rt: Rt,
        dir: &Path,
        scenario: &Value,
        plugin_dir: &Path,
        conf_dir: &Path,
    ) -> RuntimeOutput {
        let dirs: [&OsStr; 4] = [
            "-plugin-dir".as_ref(),
            plugin_dir.as_os_str(),
            "-plugin-config-dir".as_ref(),
            conf_dir.as_os_str(),
        ];
        Running::spawn(rt, dir, scenario, &dirs).finish(TIMEOUT)
    }

    /// Waits for the runner and parses its output document.
    pub fn finish(mut self, timeout: Duration) -> RuntimeOutput {
        let status = self.process.wait_timeout(timeout);
        let stderr = self.process.stderr();
        let json = read_json(&self.output)
            .unwrap_or_else(|e| panic!("no output ({status}): {e}\nstderr:\n{stderr}"));
        RuntimeOutput {
            status,
            json,
            stderr,
        }
    }
}

/// Installs Go harness program `program` (e.g. `nri-ref-plugin`) as the
/// pre-installed plugin `<idx>-<name>` of `plugin_dir`, with `config` as its
/// drop-in configuration in `conf_dir`.
pub fn install_go_plugin(
    plugin_dir: &Path,
    conf_dir: &Path,
    program: &str,
    idx_name: &str,
    config: &Value,
) {
    super::install_plugin(plugin_dir, idx_name, &harness_bin(program));
    std::fs::create_dir_all(conf_dir).unwrap();
    write_json(conf_dir, &format!("{idx_name}.conf"), config).unwrap();
}

/// Starts Go harness program `program` as an external plugin `<idx>-<name>`
/// on `socket` with `config` (written to `dir`).
pub fn spawn_go_plugin(
    program: &str,
    dir: &Path,
    socket: &Path,
    name: &str,
    idx: &str,
    config: &Value,
) -> PluginProcess {
    super::spawn_plugin(&harness_bin(program), dir, socket, name, idx, config, &[])
}
