//! Scenario files, plugin configurations and plugin event logs.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::error::{HarnessError, Result};

/// How often the waiting helpers look again.
const POLL: Duration = Duration::from_millis(10);

/// Writes `value` as pretty JSON to `dir/file_name` and returns the path.
/// Use it for scenarios (`nri-ref-runtime -scenario`) and plugin
/// configurations (`nri-ref-plugin -config`, or a runtime drop-in file).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let scenario = serde_json::json!({"steps": [{"op": "sleep", "ms": 1}]});
/// let path = nri_interop::write_json(dir.path(), "scenario.json", &scenario).unwrap();
/// assert!(std::fs::read_to_string(path).unwrap().contains("sleep"));
/// ```
pub fn write_json(dir: &Path, file_name: &str, value: &impl Serialize) -> Result<PathBuf> {
    let path = dir.join(file_name);
    let data = serde_json::to_vec_pretty(value)
        .map_err(|e| HarnessError::json(format!("encode {}", path.display()), e))?;
    fs::write(&path, data).map_err(|e| HarnessError::io(format!("write {}", path.display()), e))?;
    Ok(path)
}

/// Reads a JSON document.
pub fn read_json(path: &Path) -> Result<Value> {
    let data =
        fs::read(path).map_err(|e| HarnessError::io(format!("read {}", path.display()), e))?;
    serde_json::from_slice(&data)
        .map_err(|e| HarnessError::json(format!("parse {}", path.display()), e))
}

/// Reads an `nri-ref-plugin` event log: one JSON object per line. A missing
/// file reads as no events; an unterminated last line (a write in
/// progress) is skipped.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = dir.path().join("events.jsonl");
/// std::fs::write(&log, "{\"event\":\"Configure\"}\n{\"event\":\"Synch").unwrap();
/// let events = nri_interop::read_event_log(&log).unwrap();
/// assert_eq!(nri_interop::event_names(&events), ["Configure"]);
/// ```
pub fn read_event_log(path: &Path) -> Result<Vec<Value>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(HarnessError::io(format!("read {}", path.display()), e)),
    };
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| {
                HarnessError::json(format!("parse line {} of {}", i + 1, path.display()), e)
            })
        })
        .collect()
}

/// Every event of one pod's and one container's life in the order NRI
/// v0.12 delivers them to a plugin subscribed to all of them, from its
/// Configure to the pod's removal.
///
/// ```
/// let cri = nri_interop::events_without(
///     &nri_interop::LIFECYCLE_V012,
///     &["Configure", "UpdatePodSandbox", "PostUpdatePodSandbox"],
/// );
/// assert_eq!(cri[..2], ["Synchronize", "RunPodSandbox"]);
/// ```
pub const LIFECYCLE_V012: [&str; 16] = [
    "Configure",
    "Synchronize",
    "RunPodSandbox",
    "UpdatePodSandbox",
    "PostUpdatePodSandbox",
    "CreateContainer",
    "ValidateContainerAdjustment",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "UpdateContainer",
    "PostUpdateContainer",
    "StopContainer",
    "RemoveContainer",
    "StopPodSandbox",
    "RemovePodSandbox",
];

/// [`LIFECYCLE_V012`] as NRI v0.9 delivers it: no pod update, no validation.
///
/// ```
/// let old = nri_interop::lifecycle_v09();
/// assert_eq!(old.len(), 13);
/// assert_eq!(old[3], "CreateContainer");
/// ```
pub fn lifecycle_v09() -> Vec<&'static str> {
    events_without(
        &LIFECYCLE_V012,
        &[
            "UpdatePodSandbox",
            "PostUpdatePodSandbox",
            "ValidateContainerAdjustment",
        ],
    )
}

/// `events` without the ones named in `left_out`, in order.
pub fn events_without<'a>(events: &[&'a str], left_out: &[&str]) -> Vec<&'a str> {
    events
        .iter()
        .copied()
        .filter(|e| !left_out.contains(e))
        .collect()
}

/// The `event` field of each log entry, in order.
pub fn event_names(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.get("event").and_then(Value::as_str).unwrap_or(""))
        .collect()
}

/// Polls the event log until `done` holds for the events read so far, and
/// returns them.
pub fn wait_for_events(
    path: &Path,
    timeout: Duration,
    mut done: impl FnMut(&[Value]) -> bool,
) -> Result<Vec<Value>> {
    let start = Instant::now();
    loop {
        let events = read_event_log(path)?;
        if done(&events) {
            return Ok(events);
        }
        if start.elapsed() >= timeout {
            // What a plugin that failed logged says why: its errors' text.
            let errors: Vec<&str> = events
                .iter()
                .filter_map(|e| e.get("error").and_then(Value::as_str))
                .filter(|e| !e.is_empty())
                .collect();
            return Err(HarnessError::Timeout {
                what: format!(
                    "events in {} (have {:?}, errors {errors:?})",
                    path.display(),
                    event_names(&events)
                ),
                after: timeout,
            });
        }
        thread::sleep(POLL);
    }
}

/// Waits until `path` exists (e.g. the runtime's socket).
pub fn wait_for_path(path: &Path, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() >= timeout {
            return Err(HarnessError::Timeout {
                what: format!("{} to appear", path.display()),
                after: timeout,
            });
        }
        thread::sleep(POLL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_events_sees_the_log_and_times_out_with_context() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        fs::write(&log, "{\"event\":\"Configure\"}\n").unwrap();
        let events = wait_for_events(&log, Duration::from_secs(5), |e| !e.is_empty()).unwrap();
        assert_eq!(event_names(&events), ["Configure"]);
        let err = wait_for_events(&log, Duration::from_millis(30), |e| e.len() > 1).unwrap_err();
        assert!(err.to_string().contains("Configure"), "{err}");
    }

    #[test]
    fn a_timeout_tells_what_the_plugin_logged_as_errors() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        fs::write(
            &log,
            "{\"event\":\"error\",\"error\":\"start: failed to register\"}\n",
        )
        .unwrap();
        let err = wait_for_events(&log, Duration::from_millis(30), |e| e.len() > 1).unwrap_err();
        assert!(
            err.to_string().contains("start: failed to register"),
            "{err}"
        );
    }

    #[test]
    fn a_corrupt_complete_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        fs::write(&log, "{\"event\":1}\nnot json\n").unwrap();
        let err = read_event_log(&log).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn a_missing_log_has_no_events() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_event_log(&dir.path().join("none")).unwrap().is_empty());
    }
}
