//! Restarting plugins launched from the plugin directory when they die:
//! [`RestartPolicy`] and one supervisor task per launched plugin.
//!
//! A supervisor waits for its plugin's connection to close (the process
//! exited, or the adaptation closed the plugin), takes the plugin out of the
//! list, kills and reaps its process, waits a backoff, then launches the
//! plugin again: registration, Configure, and synchronization through
//! [`RuntimeHooks::synchronize`](crate::RuntimeHooks::synchronize) under the
//! plugin-sync lock, as for an external plugin that connects. With
//! `deliver_events_during_sync` the events of that synchronization are
//! queued and replayed to the plugin before it is added, as for an external
//! plugin; the lifecycle lock is then taken only briefly, to attach the
//! queue and to add the plugin. Otherwise the lifecycle lock is never
//! taken. [`Supervisors::stop`] ends every supervisor, also
//! in the middle of a backoff or a relaunch.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::adaptation::Inner;
use crate::adaptation_error::{BoxError, Error};
use crate::discover::Discovered;
use crate::listener::OnePluginSync;
use crate::plugin::Plugin;

/// When and how often the adaptation restarts a plugin it launched from the
/// plugin directory after the plugin died (its process exited or its
/// connection was lost). Set with
/// [`AdaptationBuilder::restart_plugins`](crate::AdaptationBuilder::restart_plugins);
/// without it a dead plugin stays dead, as in the reference.
///
/// The `n`-th restart in a row waits `initial_backoff * 2^(n-1)`, at most
/// `max_backoff`. A plugin that stayed up for at least `reset_after` starts
/// counting from zero again when it dies. After `max_restarts` restarts in
/// a row that did not bring up a plugin that stays up that long (a failed
/// relaunch counts too), the plugin is given up, with an error log naming
/// it.
///
/// ```
/// use std::time::Duration;
/// use nri_adaptation::RestartPolicy;
///
/// let policy = RestartPolicy {
///     max_restarts: 4,
///     initial_backoff: Duration::from_millis(500),
///     max_backoff: Duration::from_secs(2),
///     ..RestartPolicy::default()
/// };
/// assert_eq!(policy.backoff(1), Duration::from_millis(500));
/// assert_eq!(policy.backoff(2), Duration::from_secs(1));
/// assert_eq!(policy.backoff(3), Duration::from_secs(2));
/// assert_eq!(policy.backoff(4), Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts in a row before the plugin is given up (default 5); 0 never
    /// restarts.
    pub max_restarts: u32,
    /// Wait before the first restart (default 1 s).
    pub initial_backoff: Duration,
    /// Longest wait between restarts (default 30 s).
    pub max_backoff: Duration,
    /// Uptime after which a plugin's count of restarts in a row starts
    /// over (default 60 s).
    pub reset_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
        }
    }
}

impl RestartPolicy {
    /// The wait before restart number `attempt` in a row (counted from 1):
    /// `initial_backoff` doubled `attempt - 1` times, at most `max_backoff`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let mut wait = self.initial_backoff;
        for _ in 1..attempt {
            if wait >= self.max_backoff {
                break;
            }
            wait = wait.saturating_mul(2);
        }
        wait.min(self.max_backoff)
    }
}

/// Resolves once a plugin's connection is closed, for whatever reason.
pub(crate) type Closed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A plugin launched, registered and configured, with the signal of its
/// connection closing.
pub(crate) struct Launched {
    pub plugin: Arc<Plugin>,
    pub closed: Closed,
}

/// The supervisors of the launched plugins of one adaptation.
pub(crate) struct Supervisors {
    /// Set to true (or dropped) to end every supervisor.
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// Why a relaunch failed.
#[derive(Debug, thiserror::Error)]
enum RestartError {
    #[error(transparent)]
    Start(#[from] Error),
    #[error("failed to synchronize plugin: {0}")]
    Sync(BoxError),
    #[error("plugin failed to synchronize")]
    SyncFailed,
    #[error("plugin failed to handle the events of its synchronization")]
    Replay,
    #[error("NRI is stopping")]
    Stopped,
}

impl Supervisors {
    pub(crate) fn new() -> Supervisors {
        Supervisors {
            stop: watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
        }
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Supervises the launched plugin `d`: `up` is the running plugin, or
    /// `None` if it failed to start (it is then restarted after the first
    /// backoff).
    pub(crate) fn spawn(
        &self,
        inner: &Arc<Inner>,
        policy: RestartPolicy,
        d: Discovered,
        up: Option<Launched>,
    ) {
        let stop = self.stop.subscribe();
        let task = tokio::spawn(supervise(Arc::downgrade(inner), policy, d, up, stop));
        self.tasks().push(task);
    }

    /// Ends every supervisor and waits for them. A plugin being relaunched
    /// is killed and reaped; plugins in the list are left to the caller.
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.tasks());
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// Resolves once the adaptation stops (or is dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn supervise(
    inner: Weak<Inner>,
    policy: RestartPolicy,
    d: Discovered,
    up: Option<Launched>,
    mut stop: watch::Receiver<bool>,
) {
    let name = d.name();
    let mut current = up.map(|l| (l, Instant::now()));
    let mut restarts: u32 = 0;
    loop {
        if let Some((Launched { plugin, closed }, since)) = current.take() {
            tokio::select! {
                biased;
                _ = stopped(&mut stop) => return,
                _ = closed => {}
            }
            let Some(strong) = inner.upgrade() else {
                return;
            };
            if strong.is_stopped() {
                return;
            }
            let uptime = since.elapsed();
            tracing::warn!(plugin = %name, uptime = ?uptime,
                "pre-installed NRI plugin exited or lost its connection");
            strong.remove_closed();
            drop(strong);
            plugin.stop().await;
            if uptime >= policy.reset_after {
                restarts = 0;
            }
        }

        if restarts >= policy.max_restarts {
            tracing::error!(plugin = %name, restarts,
                "giving up restarting pre-installed NRI plugin");
            return;
        }
        restarts += 1;
        let backoff = policy.backoff(restarts);
        tracing::info!(plugin = %name, attempt = restarts, backoff = ?backoff,
            "restarting pre-installed NRI plugin");
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let result = tokio::select! {
            biased;
            _ = stopped(&mut stop) => return,
            r = relaunch(&strong, &d) => r,
        };
        match result {
            Ok(launched) => {
                tracing::info!(plugin = %name, attempt = restarts,
                    "pre-installed NRI plugin restarted and synchronized");
                strong.settings.metrics.record_plugin_restart(&name);
                current = Some((launched, Instant::now()));
            }
            Err(RestartError::Stopped) => return,
            Err(e) => {
                tracing::warn!(plugin = %name, attempt = restarts, error = %e,
                    "failed to restart pre-installed NRI plugin");
            }
        }
    }
}

/// Launches, registers, configures and synchronizes the plugin again and
/// adds it to the list. On failure its process is killed and reaped.
///
/// Lifecycle events that happen while the plugin is synchronized are
/// queued, and with `deliver_events_during_sync` replayed to it before it is
/// added, as for an external plugin (`crate::backlog`).
async fn relaunch(inner: &Arc<Inner>, d: &Discovered) -> Result<Launched, RestartError> {
    let launched = crate::launch::start(&inner.settings, d.clone()).await?;
    let plugin = launched.plugin.clone();
    #[cfg(feature = "wasm")]
    crate::plugin::wasm::resync_after_replacement(inner, &plugin);
    let added = {
        let _sync = inner.sync_lock.clone().write_owned().await;
        // Detached when this block ends, however it ends (also when the
        // supervisor is stopped in the middle of it).
        let attached = Some(inner.attach_backlog_guarded(plugin.clone()).await);
        let backlog = attached.as_ref().map(|a| a.backlog.clone());
        let mut sync = OnePluginSync {
            plugin: plugin.clone(),
            result: None,
            backlog: backlog.clone(),
        };
        let hook = inner.settings.hooks.synchronize(&mut sync).await;
        match (hook, sync.result) {
            (Err(e), _) => Err(RestartError::Sync(e)),
            (Ok(()), Some(false)) => Err(RestartError::SyncFailed),
            (Ok(()), result) => {
                if result.is_none() {
                    tracing::warn!(plugin = %plugin.name,
                        "runtime did not synchronize the plugin; adding it anyway");
                }
                if inner.is_stopped() {
                    Err(RestartError::Stopped)
                } else if plugin.is_closed() {
                    Err(RestartError::SyncFailed)
                } else if let Some(backlog) = backlog {
                    if inner.replay_and_add(backlog).await {
                        Ok(())
                    } else if inner.is_stopped() {
                        Err(RestartError::Stopped)
                    } else {
                        Err(RestartError::Replay)
                    }
                } else {
                    inner.add_plugin(plugin.clone());
                    Ok(())
                }
            }
        }
    };
    match added {
        Ok(()) => Ok(launched),
        Err(e) => {
            plugin.stop().await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RestartPolicy {
            max_restarts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            reset_after: Duration::from_secs(1),
        };
        let waits: Vec<_> = (1..=5).map(|n| p.backoff(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 700, 700]);
        // No overflow for huge attempt numbers or durations.
        let big = RestartPolicy {
            initial_backoff: Duration::MAX / 2,
            max_backoff: Duration::MAX,
            ..p
        };
        assert_eq!(big.backoff(u32::MAX), Duration::MAX);
    }
}
