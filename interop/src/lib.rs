//! Helpers for testing nri-rs against the Go reference implementation of
//! NRI (`github.com/containerd/nri`).
//!
//! The Go side lives in the Go module `interop/harness` next to this crate
//! (official NRI v0.12.x): `nri-ref-runtime` (the official runtime
//! adaptation replaying a JSON scenario), `nri-ref-plugin` (a plugin on the
//! official stub, logging every event as JSON lines) and `nri-wire-vectors`
//! (byte-level mux/ttRPC vectors). The same sources of the runtime and the
//! plugin, built against NRI v0.9.0 (`go.v0.9.mod`, build tag `nri_v09`),
//! are `nri-ref-runtime-old`, an old runtime that delivers most events as
//! `StateChange`, and `nri-ref-plugin-old`.
//!
//! [`harness_bin`] builds them with the local Go toolchain (once per test
//! process) and returns a program's path; the other helpers write
//! scenarios, run the programs with timeouts and read their JSON output.
//! The formats are described in `interop/README.md`.
//!
//! ```no_run
//! use std::time::Duration;
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let scenario = json!({
//!     "pods": [{"id": "pod0", "name": "pod0"}],
//!     "steps": [{"op": "RunPodSandbox", "pod": "pod0"}]
//! });
//! let path = nri_interop::write_json(dir.path(), "scenario.json", &scenario).unwrap();
//! let out = nri_interop::run_ref_runtime(
//!     "nri-ref-runtime",
//!     &path,
//!     std::iter::empty::<&str>(),
//!     Duration::from_secs(30),
//! )
//! .unwrap();
//! assert!(out.failed_steps().is_empty());
//! ```

pub mod bench;
mod error;
mod files;
pub mod fixtures;
mod go_build;
pub mod plugin_tests;
mod process;
pub mod random;
pub mod workspace;

pub use error::{HarnessError, Result};
pub use files::{
    event_names, events_without, lifecycle_v09, read_event_log, read_json, wait_for_events,
    wait_for_path, write_json, LIFECYCLE_V012,
};
pub use go_build::{bin_dir, harness_bin, harness_programs, interop_dir, wasm_plugin};
pub use process::{
    run_harness, run_ref_runtime, CapturedRun, GoProcess, RefRuntime, RuntimeOutput,
};
