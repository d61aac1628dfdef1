//! The workspace's plugins as the suites run them: built once per test
//! process, installed as pre-installed plugins or started as external ones.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::host::Daemon;
use crate::workspace::build_bins;
use crate::{E2eError, Result};

/// The binaries the suites use: the sample plugins, their test programs,
/// the minimal plugin on the blocking stub and `nri-misbehave`.
const BINARIES: &[&str] = &[
    "nri-logger",
    "nri-ulimit-adjuster",
    "nri-device-injector",
    "nri-hook-injector",
    "nri-v010-adapter",
    "nri-v010-test-clearcfs",
    "nri-default-validator",
    "nri-policy",
    "nri-network-device-injector",
    "nri-template",
    "nri-differ",
    "nri-writable-cgroups",
    "nri-rs-min-blocking-plugin",
    "nri-misbehave",
];

/// The path of workspace binary `bin` (one of the sample plugins, their test
/// programs, or `nri-misbehave`). All are built on the first call.
pub fn bin(bin: &str) -> Result<PathBuf> {
    static BUILT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let dir = BUILT
        .get_or_init(|| {
            let paths = build_bins(BINARIES).map_err(|e| e.to_string())?;
            paths
                .first()
                .and_then(|p| p.parent())
                .map(Path::to_path_buf)
                .ok_or_else(|| "no binaries".to_owned())
        })
        .as_ref()
        .map_err(|e| E2eError::Unsupported(format!("building the plugins failed: {e}")))?;
    let path = dir.join(bin);
    if path.is_file() {
        Ok(path)
    } else {
        Err(E2eError::Unsupported(format!(
            "{} was not built (not in the suite's list?)",
            path.display()
        )))
    }
}

/// Starts an external plugin: `program` with `args`, logging to
/// `<log_dir>/<name>.log` (`RUST_LOG=debug`).
pub fn start_external<S: AsRef<OsStr>>(
    name: &str,
    program: &Path,
    args: &[S],
    log_dir: &Path,
) -> Result<Daemon> {
    Daemon::spawn(
        name,
        program,
        args,
        &[("RUST_LOG", OsStr::new("debug"))],
        &log_dir.join(format!("{name}.log")),
    )
}

/// What a plugin sees of the life of a container that is a pod of its own
/// (nri-hostd under podman and Docker's engines, Docker's own NRI under
/// nri-runc), after its registration's Synchronize.
pub const OWN_POD_LIFECYCLE: &[&str] = &[
    "RunPodSandbox",
    "CreateContainer",
    "ValidateContainerAdjustment",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "StopContainer",
    "RemoveContainer",
    "StopPodSandbox",
    "RemovePodSandbox",
];

/// The events the logger logged, in order (`Event: tag:` lines open the dump
/// of each object; consecutive dumps of one event count once), from the log
/// file of `nri-logger`.
pub fn logged_events(log: &str) -> Vec<String> {
    let mut events: Vec<String> = Vec::new();
    for line in log.lines() {
        let Some((_, rest)) = line.split_once("nri_plugin_logger::plugin: ") else {
            continue;
        };
        let Some((event, tail)) = rest.split_once(": ") else {
            continue;
        };
        let is_tag = tail.ends_with(':') && !tail.starts_with(' ');
        if is_tag
            && event.chars().all(|c| c.is_ascii_alphabetic())
            && events.last().map(String::as_str) != Some(event)
        {
            events.push(event.to_owned());
        }
    }
    events
}
