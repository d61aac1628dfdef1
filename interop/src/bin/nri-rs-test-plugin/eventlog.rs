//! The JSON-lines event log, in the format of `nri-ref-plugin`'s.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use nri_stub::api::{
    Container, ContainerUpdate, LinuxResources, PodSandbox, ValidateContainerAdjustmentRequest,
};
use serde::Serialize;

use crate::tap::SyncPart;

/// One line of the log. Field names are those of `nri-ref-plugin`; `plugin`,
/// `nri_version_inferred` and `sync_requests` are additions.
#[derive(Debug, Default, Serialize)]
pub struct Entry {
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodSandbox>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<LinuxResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_resources: Option<LinuxResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nri_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nri_version_inferred: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registration_timeout_ms: Option<u128>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout_ms: Option<u128>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<PodSandbox>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Container>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_requests: Option<Vec<SyncPart>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate: Option<ValidateContainerAdjustmentRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updates: Option<Vec<ContainerUpdate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<Vec<ContainerUpdate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The trace id the request came with (`trace` configurations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The caller's span id the request came with (`trace` configurations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
}

impl Entry {
    /// An entry with only the event name.
    pub fn new(event: &str) -> Entry {
        Entry {
            event: event.to_string(),
            ..Entry::default()
        }
    }
}

/// Appends entries to a file, one line each (a single write per line, so several
/// plugins can share one log).
#[derive(Debug, Default)]
pub struct EventLog {
    file: Mutex<Option<File>>,
}

impl EventLog {
    /// Starts logging to `path` unless a log is open already.
    pub fn open(&self, path: &Path) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.is_none() {
            *file = Some(OpenOptions::new().create(true).append(true).open(path)?);
        }
        Ok(())
    }

    /// Whether a log file is open: without one, entries are not written
    /// and need not be made.
    pub fn is_open(&self) -> bool {
        self.file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Writes one entry (nothing, not even its encoding, when no log is
    /// open).
    pub fn write(&self, entry: &Entry) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(file) = file.as_mut() else {
            return;
        };
        let mut line = match serde_json::to_vec(entry) {
            Ok(line) => line,
            Err(err) => format!(
                "{{\"event\":{:?},\"error\":\"log encoding: {}\"}}",
                entry.event,
                err.to_string().replace('"', "'")
            )
            .into_bytes(),
        };
        line.push(b'\n');
        if let Err(err) = file.write_all(&line) {
            eprintln!("nri-rs-test-plugin: write log: {err}");
        }
    }
}
