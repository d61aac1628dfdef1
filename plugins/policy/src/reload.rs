//! Reloading the policy file when it changes and on SIGHUP. A file that does
//! not load is logged (`file:line:column`) and counted; the old policy stays
//! in force.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nri_policy::PolicyValidator;

/// What identifies a version of the file: modification time, size, inode.
fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

/// Watches `path` until the process ends: every `interval` (none: never) it
/// reloads a changed file, and on every SIGHUP it reloads the file.
pub async fn watch(validator: Arc<PolicyValidator>, path: PathBuf, interval: Option<Duration>) {
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot catch SIGHUP, reloading on change only: {e}");
            None
        }
    };
    let mut last = stamp(&path);
    let mut tick = interval.map(tokio::time::interval);
    loop {
        let hup_fired = async {
            match hup.as_mut() {
                Some(h) => h.recv().await.is_some(),
                None => std::future::pending().await,
            }
        };
        let ticked = async {
            match tick.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        let forced = tokio::select! {
            fired = hup_fired => fired,
            () = ticked => false,
        };
        let now = stamp(&path);
        if !forced && now == last {
            continue;
        }
        last = now;
        tracing::info!(file = %path.display(), reason = if forced { "SIGHUP" } else { "changed" }, "reloading the policy");
        // Errors are logged and counted by the validator.
        let _ = validator.reload_file(&path);
    }
}
