//! Staying connected: [`Stub::run_reconnecting`] runs the stub again with
//! backoff when the runtime goes away (a runtime restart or upgrade).

use std::time::Duration;

use crate::error::Error;
use crate::stub::Stub;

/// How [`Stub::run_reconnecting`] retries: the first retry waits `initial`,
/// each next one twice as long, up to `max`; after `attempts` connection
/// attempts in a row fail it gives up (`None`: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait before the first retry.
    pub initial: Duration,
    /// Longest wait between retries.
    pub max: Duration,
    /// Failed attempts in a row before giving up; `None` retries forever.
    pub attempts: Option<u32>,
}

impl Default for Backoff {
    /// 100 ms doubling up to 10 s, forever.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
            attempts: None,
        }
    }
}

/// Whether a failed run may succeed when tried again: the runtime was not
/// there, went away, or did not take the registration.
fn retryable(err: &Error) -> bool {
    matches!(
        err,
        Error::Connect { .. } | Error::Disconnected | Error::Register(_)
    )
}

impl Stub {
    /// Like [`run`](Self::run), but when the runtime goes away (or is not
    /// there yet) connects again with `backoff`, registers and is
    /// configured and synchronized again, through the plugin's own
    /// `configure` and `synchronize` handlers.
    ///
    /// `on_reconnect(n)` is called before the `n`-th attempt (from 1) to
    /// reach the runtime again after losing it, the signal that the
    /// plugin's view of the runtime is to be rebuilt.
    ///
    /// Returns `Ok(())` when the runtime asks the plugin to shut down, the
    /// last error after `backoff.attempts` failed attempts in a row, and at
    /// once any error that retrying cannot fix (configuration, identity).
    /// Only stubs that connect by socket path can reconnect: a stub with a
    /// connection handed to it (by [`connection`](crate::StubBuilder::connection),
    /// or by a runtime that launched the plugin, `NRI_PLUGIN_SOCKET`) returns
    /// [`Error::Disconnected`] when it loses it.
    ///
    /// ```no_run
    /// # async fn demo(stub: nri_stub::Stub) -> Result<(), nri_stub::Error> {
    /// use nri_stub::Backoff;
    /// stub.run_reconnecting(Backoff::default(), |n| {
    ///     tracing::info!(attempt = n, "runtime gone, reconnecting");
    /// })
    /// .await
    /// # }
    /// ```
    pub async fn run_reconnecting(
        &self,
        backoff: Backoff,
        mut on_reconnect: impl FnMut(u32) + Send,
    ) -> Result<(), Error> {
        let mut failures = 0u32;
        let mut attempt = 0u32;
        let mut delay = backoff.initial;
        loop {
            let err = match self.run().await {
                Ok(()) => return Ok(()),
                // A connection handed to the stub (by the runtime that launched
                // the plugin, or by `connection`) cannot be dialled again: the
                // runtime went away and that is the end.
                Err(Error::ConnectionUsed) if attempt > 0 => return Err(Error::Disconnected),
                Err(e) if retryable(&e) => e,
                Err(e) => return Err(e),
            };
            if matches!(err, Error::Disconnected) {
                // We were connected: a fresh start.
                failures = 0;
                delay = backoff.initial;
            } else {
                failures += 1;
                if backoff.attempts.is_some_and(|max| failures >= max) {
                    return Err(err);
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(backoff.max);
            }
            tracing::info!(plugin = %self.name(), error = %err, "reconnecting to the runtime");
            attempt += 1;
            on_reconnect(attempt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connection_losses_are_retried() {
        assert!(retryable(&Error::Disconnected));
        assert!(retryable(&Error::Connect {
            socket: "/s".into(),
            source: std::io::Error::other("x"),
        }));
        assert!(!retryable(&Error::AlreadyRunning));
        assert!(!retryable(&Error::ConnectionUsed));
    }
}
