//! Running the Go harness programs as child processes.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::{HarnessError, Result};
use crate::files::read_json;
use crate::go_build::harness_bin;

/// A harness program running as a child process. Its standard error goes
/// to a file; the process is killed when the value is dropped.
#[derive(Debug)]
pub struct GoProcess {
    child: Child,
    program: String,
    stderr_path: PathBuf,
}

impl GoProcess {
    /// Starts harness program `program` (built on demand with
    /// [`harness_bin`]) with `args`, writing its standard error to
    /// `stderr_path`.
    pub fn spawn<I, S>(program: &str, args: I, stderr_path: &Path) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_bin(&harness_bin(program), args, stderr_path)
    }

    /// Starts the executable `bin` (a harness program or any other) with
    /// `args`, writing its standard error to `stderr_path`.
    pub fn spawn_bin<I, S>(bin: &Path, args: I, stderr_path: &Path) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let program = bin.file_name().map_or_else(
            || bin.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let stderr = File::create(stderr_path)
            .map_err(|e| HarnessError::io(format!("create {}", stderr_path.display()), e))?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| HarnessError::io(format!("spawn {}", bin.display()), e))?;
        Ok(Self {
            child,
            program,
            stderr_path: stderr_path.to_owned(),
        })
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit; kills it and fails after `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) => {}
                Err(e) => return Err(HarnessError::io(format!("wait for {}", self.program), e)),
            }
            if start.elapsed() >= timeout {
                self.kill();
                return Err(HarnessError::Timeout {
                    what: format!("{} to exit; stderr:\n{}", self.program, self.stderr()),
                    after: timeout,
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process (if still running) and reaps it.
    pub fn kill(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// What the process wrote to standard error so far.
    pub fn stderr(&self) -> String {
        fs::read(&self.stderr_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for GoProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The finished run of `nri-ref-runtime` / `nri-ref-runtime-old`.
#[derive(Debug)]
pub struct RuntimeOutput {
    /// Exit status (non-zero when the output has a top-level `error`).
    pub status: ExitStatus,
    /// The output document (see `interop/README.md`).
    pub json: Value,
    /// The runtime's log (standard error).
    pub stderr: String,
}

impl RuntimeOutput {
    /// The per-step results.
    pub fn steps(&self) -> &[Value] {
        self.json
            .get("steps")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The first step result with the given `op`.
    pub fn step(&self, op: &str) -> Option<&Value> {
        self.steps()
            .iter()
            .find(|s| s.get("op").and_then(Value::as_str) == Some(op))
    }

    /// Steps whose `error` is not empty, as `(op, error)`.
    pub fn failed_steps(&self) -> Vec<(String, String)> {
        self.steps()
            .iter()
            .filter_map(|s| {
                let err = s.get("error").and_then(Value::as_str).unwrap_or("");
                (!err.is_empty()).then(|| {
                    let op = s.get("op").and_then(Value::as_str).unwrap_or("");
                    (op.to_owned(), err.to_owned())
                })
            })
            .collect()
    }
}

/// A reference runtime started in the background (for scenarios that wait
/// for plugins to connect).
#[derive(Debug)]
pub struct RefRuntime {
    process: GoProcess,
    output: PathBuf,
}

impl RefRuntime {
    /// Starts `program` (`nri-ref-runtime` or `nri-ref-runtime-old`) on
    /// `scenario` with extra flags such as `-socket PATH`. The output
    /// document and the log go next to the scenario file
    /// (`<scenario>.out.json`, `<scenario>.stderr`).
    pub fn spawn<I, S>(program: &str, scenario: &Path, extra_args: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = with_suffix(scenario, ".out.json");
        let stderr = with_suffix(scenario, ".stderr");
        let _ = fs::remove_file(&output);
        let mut args: Vec<std::ffi::OsString> = vec![
            "-scenario".into(),
            scenario.as_os_str().to_owned(),
            "-output".into(),
            output.as_os_str().to_owned(),
        ];
        args.extend(extra_args.into_iter().map(|a| a.as_ref().to_owned()));
        let process = GoProcess::spawn(program, args, &stderr)?;
        Ok(Self { process, output })
    }

    /// The underlying process.
    pub fn process_mut(&mut self) -> &mut GoProcess {
        &mut self.process
    }

    /// Waits for the runtime to finish the scenario and parses its output.
    pub fn finish(mut self, timeout: Duration) -> Result<RuntimeOutput> {
        let status = self.process.wait_timeout(timeout)?;
        let stderr = self.process.stderr();
        if !self.output.exists() {
            return Err(HarnessError::NoOutput {
                program: self.process.program.clone(),
                status,
                output: self.output.clone(),
                stderr,
            });
        }
        let json = read_json(&self.output)?;
        Ok(RuntimeOutput {
            status,
            json,
            stderr,
        })
    }
}

/// Runs `program` on `scenario` to completion (see [`RefRuntime::spawn`]).
pub fn run_ref_runtime<I, S>(
    program: &str,
    scenario: &Path,
    extra_args: I,
    timeout: Duration,
) -> Result<RuntimeOutput>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    RefRuntime::spawn(program, scenario, extra_args)?.finish(timeout)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The finished run of a harness program whose standard output was kept.
#[derive(Debug)]
pub struct CapturedRun {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: String,
}

impl CapturedRun {
    /// Parses standard output as one JSON document.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.stdout)
            .map_err(|e| HarnessError::json("parse program output", e))
    }
}

/// Runs a harness program to completion (killed after `timeout`) and
/// returns its exit status and output, e.g. `nri-wire-vectors encode`.
pub fn run_harness<I, S>(program: &str, args: I, timeout: Duration) -> Result<CapturedRun>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let bin = harness_bin(program);
    let stdout = tempfile::tempfile().map_err(|e| HarnessError::io("create stdout file", e))?;
    let stderr = tempfile::tempfile().map_err(|e| HarnessError::io("create stderr file", e))?;
    let clone = |f: &File| {
        f.try_clone()
            .map_err(|e| HarnessError::io("clone output file", e))
    };
    let child = Command::new(&bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(clone(&stdout)?)
        .stderr(clone(&stderr)?)
        .spawn()
        .map_err(|e| HarnessError::io(format!("spawn {}", bin.display()), e))?;
    let mut process = GoProcess {
        child,
        program: program.to_owned(),
        stderr_path: PathBuf::new(),
    };
    let status = process.wait_timeout(timeout)?;
    Ok(CapturedRun {
        status,
        stdout: read_all(stdout)?,
        stderr: String::from_utf8_lossy(&read_all(stderr)?).into_owned(),
    })
}

fn read_all(mut f: File) -> Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut buf = Vec::new();
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.read_to_end(&mut buf))
        .map_err(|e| HarnessError::io("read program output", e))?;
    Ok(buf)
}
