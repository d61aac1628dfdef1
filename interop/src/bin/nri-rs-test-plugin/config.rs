//! The plugin's JSON configuration: the format of `nri-ref-plugin` (see
//! `interop/README.md`), plus `record_rpc` and `panic`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nri_stub::api::{ContainerAdjustment, ContainerEviction, ContainerUpdate, FailurePolicy};
use serde::Deserialize;

/// What the plugin does per event. Maps are keyed by event name as the NRI API
/// spells it (`CreateContainer`, `Synchronize`, `Configure`, ...).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Events to subscribe to (names for `EventMask::parse`); empty: every handler.
    pub events: Vec<String>,
    /// The JSON-lines event log (the `-log` flag wins).
    pub log: Option<PathBuf>,
    /// The adjustment CreateContainer returns.
    pub adjust: Option<ContainerAdjustment>,
    /// Updates returned per event (Synchronize, CreateContainer, UpdateContainer,
    /// StopContainer).
    pub update: HashMap<String, Vec<ContainerUpdate>>,
    /// Evictions returned by CreateContainer (key `CreateContainer`).
    pub evict: HashMap<String, Vec<ContainerEviction>>,
    /// The handler of the event fails with this message.
    pub error: HashMap<String, String>,
    /// The status code (its name, e.g. `DeadlineExceeded`) of the event's
    /// `error`; without one the stub answers `Unknown`.
    pub error_code: HashMap<String, String>,
    /// The handler of the event panics with this message (nri-rs only: a Go
    /// plugin that panics dies).
    pub panic: HashMap<String, String>,
    /// Sleep before answering the event.
    pub delay_ms: HashMap<String, u64>,
    /// Exit the process with this code on receiving the event.
    pub exit: HashMap<String, i32>,
    /// ValidateContainerAdjustment rejects with `reason`.
    pub reject: bool,
    /// Reason of the rejection.
    pub reason: String,
    /// Unsolicited UpdateContainers calls.
    pub unsolicited: Vec<Unsolicited>,
    /// Log the trace context each request came with (`trace_id`,
    /// `parent_span_id`), as `nri-ref-plugin` does with its `trace` option.
    pub trace: bool,
    /// Announced in the Configure reply (only from `-config`).
    pub failure_policy: Option<FailurePolicy>,
    /// External mode only: connect through a tap that records the ttRPC method
    /// carrying each request (logged as `rpc`) and the parts of a split Synchronize
    /// (logged as `sync_requests`).
    pub record_rpc: bool,
}

/// One UpdateContainers call the plugin makes on its own.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Unsolicited {
    /// Fire after the handler of this event ran once (`""`: after Configure).
    pub after_event: String,
    /// Delay after the trigger.
    pub after_ms: u64,
    /// Repeat the call this often (milliseconds) until the plugin stops; 0: once.
    pub every_ms: u64,
    /// Updates to request.
    pub updates: Vec<ContainerUpdate>,
    /// Evictions to request.
    pub evict: Vec<ContainerEviction>,
}

impl Config {
    /// Reads a configuration file.
    pub fn load(path: &Path) -> Result<Config, String> {
        let data =
            std::fs::read(path).map_err(|e| format!("read config {}: {e}", path.display()))?;
        Config::parse(&path.display().to_string(), &data)
    }

    /// Parses a configuration; `origin` names it in errors.
    pub fn parse(origin: &str, data: &[u8]) -> Result<Config, String> {
        serde_json::from_slice(data).map_err(|e| format!("parse config {origin}: {e}"))
    }

    /// The updates configured for an event.
    pub fn updates(&self, event: &str) -> Vec<ContainerUpdate> {
        self.update.get(event).cloned().unwrap_or_default()
    }
}
