//! The real OCI runtime, run by the daemon itself: to list what really
//! runs (reconciliation, exit checks), and to apply the updates and
//! evictions plugins ask for.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use tokio::process::Command;

use crate::protocol::RuntimeRef;

/// Errors of running the real runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// It could not be started.
    #[error("cannot run {path}: {source}")]
    Spawn {
        /// The runtime.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It failed.
    #[error("{command} failed: {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// Its output could not be read.
    #[error("unexpected output of {command}: {reason}")]
    Output {
        /// The command line.
        command: String,
        /// Why.
        reason: String,
    },
}

/// Global flags the daemon leaves out when it runs the runtime itself
/// (they name files of the engine's call, not of the container).
const SKIPPED_VALUE_FLAGS: &[&str] = &["--log", "--log-format"];

fn global_args(rt: &RuntimeRef) -> Vec<String> {
    let mut out = Vec::new();
    let mut args = rt.global_args.iter();
    while let Some(a) = args.next() {
        if SKIPPED_VALUE_FLAGS.contains(&a.as_str()) {
            args.next();
            continue;
        }
        if SKIPPED_VALUE_FLAGS
            .iter()
            .any(|f| a.starts_with(&format!("{f}=")))
        {
            continue;
        }
        out.push(a.clone());
    }
    out
}

async fn run(rt: &RuntimeRef, args: &[&str]) -> Result<Vec<u8>, RuntimeError> {
    let global = global_args(rt);
    let command = format!("{} {} {}", rt.path, global.join(" "), args.join(" "));
    tracing::debug!(%command, "running the real runtime");
    let out = Command::new(&rt.path)
        .args(&global)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|source| RuntimeError::Spawn {
            path: rt.path.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(RuntimeError::Failed {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

/// The status of every container the runtime has under its root
/// (`list --format json`): id to `created`, `running`, `paused` or
/// `stopped`.
pub async fn list(rt: &RuntimeRef) -> Result<BTreeMap<String, String>, RuntimeError> {
    let out = run(rt, &["list", "--format", "json"]).await?;
    let parsed: Value = serde_json::from_slice(&out).map_err(|e| RuntimeError::Output {
        command: format!("{} list", rt.path),
        reason: e.to_string(),
    })?;
    // runc prints `null` when there are no containers.
    let items = parsed.as_array().cloned().unwrap_or_default();
    Ok(items
        .iter()
        .filter_map(|c| {
            Some((
                c.get("id")?.as_str()?.to_string(),
                c.get("status")?.as_str()?.to_string(),
            ))
        })
        .collect())
}

/// The status of one container (`state ID`), `None` if the runtime does
/// not have it.
pub async fn status(rt: &RuntimeRef, id: &str) -> Option<String> {
    let out = run(rt, &["state", id]).await.ok()?;
    let v: Value = serde_json::from_slice(&out).ok()?;
    v.get("status")?.as_str().map(String::from)
}

/// `update --resources FILE ID` with the OCI `linux.resources` JSON
/// `resources`; the file is written in `scratch` and removed afterwards.
pub async fn update(
    rt: &RuntimeRef,
    id: &str,
    resources: &Value,
    scratch: &Path,
) -> Result<(), RuntimeError> {
    let file = scratch.join(format!("update-{id}-{}.json", std::process::id()));
    let spawn = |source| RuntimeError::Spawn {
        path: file.display().to_string(),
        source,
    };
    let bytes = serde_json::to_vec(resources).map_err(|e| spawn(e.into()))?;
    tokio::fs::write(&file, bytes).await.map_err(spawn)?;
    let file_arg = file.display().to_string();
    let result = run(rt, &["update", "--resources", &file_arg, id]).await;
    let _ = tokio::fs::remove_file(&file).await;
    result.map(|_| ())
}

/// `kill ID KILL`.
pub async fn kill(rt: &RuntimeRef, id: &str) -> Result<(), RuntimeError> {
    run(rt, &["kill", id, "KILL"]).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_flags_are_left_out() {
        let rt = RuntimeRef {
            path: "runc".into(),
            global_args: [
                "--root",
                "/r",
                "--log",
                "/b/log.json",
                "--log-format=json",
                "--systemd-cgroup",
            ]
            .map(String::from)
            .to_vec(),
        };
        assert_eq!(global_args(&rt), ["--root", "/r", "--systemd-cgroup"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_missing_runtime_is_a_clear_error() {
        let rt = RuntimeRef {
            path: "/nonexistent/runc".into(),
            global_args: vec![],
        };
        let err = list(&rt).await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/runc"), "{err}");
        assert_eq!(status(&rt, "x").await, None);
    }
}
