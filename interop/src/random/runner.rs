//! Running one runtime program (the Go `nri-ref-runtime` or nri-rs's
//! `nri-rs-ref-runtime`, same command line) on a written batch.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::batch::BatchFiles;
use crate::error::{HarnessError, Result};
use crate::files::read_json;

/// A runtime program to replay scenarios with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeProgram {
    /// Short name used in reports and file names (`reference`, `candidate`).
    pub label: String,
    /// The executable.
    pub path: PathBuf,
}

impl RuntimeProgram {
    /// A program with a label.
    pub fn new(label: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self {
            label: label.into(),
            path: path.into(),
        }
    }

    /// Runs the program on a batch: `-scenario`, `-plugin-dir`,
    /// `-plugin-config-dir`, `-output <dir>/<label>.json`, standard error
    /// to `<dir>/<label>.stderr`. Kills it after `timeout`. Returns the
    /// output document.
    pub fn run(&self, files: &BatchFiles, dir: &Path, timeout: Duration) -> Result<Value> {
        let output = dir.join(format!("{}.json", self.label));
        let stderr_path = dir.join(format!("{}.stderr", self.label));
        let stderr = File::create(&stderr_path)
            .map_err(|e| HarnessError::io(format!("create {}", stderr_path.display()), e))?;
        let mut child = Command::new(&self.path)
            .arg("-scenario")
            .arg(&files.scenario)
            .arg("-plugin-dir")
            .arg(&files.plugins)
            .arg("-plugin-config-dir")
            .arg(&files.conf)
            .arg("-output")
            .arg(&output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| HarnessError::io(format!("spawn {}", self.path.display()), e))?;
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if start.elapsed() >= timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(HarnessError::Timeout {
                        what: format!("{} ({}) to finish", self.label, self.path.display()),
                        after: timeout,
                    });
                }
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(HarnessError::io(format!("wait for {}", self.label), e)),
            }
        };
        if !output.is_file() {
            return Err(HarnessError::NoOutput {
                program: self.label.clone(),
                status,
                output,
                stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
            });
        }
        read_json(&output)
    }
}

/// Runs both programs on the same batch at the same time (each has its own
/// plugin processes) and returns `(reference, candidate)` outputs.
pub fn run_pair(
    reference: &RuntimeProgram,
    candidate: &RuntimeProgram,
    files: &BatchFiles,
    dir: &Path,
    timeout: Duration,
) -> (Result<Value>, Result<Value>) {
    thread::scope(|s| {
        let r = s.spawn(|| reference.run(files, dir, timeout));
        let c = candidate.run(files, dir, timeout);
        let r = r.join().unwrap_or_else(|_| {
            Err(HarnessError::Timeout {
                what: "reference runner thread".into(),
                after: timeout,
            })
        });
        (r, c)
    })
}
