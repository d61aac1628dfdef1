//! The task that writes framed bytes to the trunk.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

use crate::error::MuxError;
use crate::shared::{wait_closed, Inner};

/// Framed bytes that may wait for the writer before further writes are held back.
pub(crate) const WRITE_HIGH_WATER: usize = 256 * 1024;

/// Upper bound on the bytes one `poll_write` accepts (rounded down to whole frames).
/// Every ttRPC message fits, so the frames of one message stay contiguous on the trunk.
pub(crate) const WRITE_CALL_LIMIT: usize = 8 << 20;

/// How long a closed mux keeps trying to deliver writes it had already accepted before
/// it shuts the trunk down.
pub(crate) const CLOSE_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The most payload bytes one `poll_write` accepts for the given frame size.
pub(crate) fn write_call_limit(max_frame: usize) -> usize {
    let max_frame = max_frame.max(1);
    (WRITE_CALL_LIMIT / max_frame).max(1) * max_frame
}

/// Tells the mux that the writer stopped, however it ends (returned,
/// dropped with its runtime, or panicked).
struct Stopped(Arc<Inner>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.writer_stopped();
    }
}

pub(crate) async fn run<W>(inner: Arc<Inner>, mut trunk: W)
where
    W: AsyncWrite + Unpin,
{
    let _stopped = Stopped(Arc::clone(&inner));
    let mut closed = inner.subscribe_closed();
    // Set once the mux is closed: the end of the drain period.
    let mut deadline: Option<Instant> = None;
    loop {
        let Some(chunk) = inner.take_pending() else {
            if inner.is_closed() {
                break;
            }
            tokio::select! {
                _ = inner.writer_wake.notified() => {}
                _ = wait_closed(&mut closed) => {}
            }
            continue;
        };
        let result = {
            let write = write_chunk(&mut trunk, &chunk);
            tokio::pin!(write);
            if inner.is_closed() {
                let end = *deadline.get_or_insert_with(drain_deadline);
                timeout_at(end, write).await
            } else {
                tokio::select! {
                    res = &mut write => Ok(res),
                    _ = wait_closed(&mut closed) => {
                        let end = *deadline.get_or_insert_with(drain_deadline);
                        timeout_at(end, write).await
                    }
                }
            }
        };
        match result {
            Ok(Ok(())) => inner.written(chunk.len()),
            Ok(Err(e)) => {
                if inner.is_closed() {
                    tracing::debug!(error = %e, "mux trunk write failed while draining");
                } else {
                    inner.fail(MuxError::TrunkWrite {
                        source: Arc::new(e),
                    });
                }
                return;
            }
            Err(_elapsed) => {
                tracing::debug!(
                    bytes = chunk.len(),
                    "mux close: gave up delivering pending writes"
                );
                return;
            }
        }
    }
    let end = deadline.unwrap_or_else(drain_deadline);
    match timeout_at(end, trunk.shutdown()).await {
        Ok(Ok(())) => tracing::debug!("mux trunk shut down"),
        Ok(Err(e)) => tracing::debug!(error = %e, "mux trunk shutdown failed"),
        Err(_) => tracing::debug!("mux trunk shutdown timed out"),
    }
}

fn drain_deadline() -> Instant {
    Instant::now() + CLOSE_DRAIN_TIMEOUT
}

async fn write_chunk<W>(trunk: &mut W, chunk: &[u8]) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    trunk.write_all(chunk).await?;
    trunk.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_limit_is_whole_frames() {
        assert_eq!(write_call_limit(4096), 8 << 20);
        assert_eq!(write_call_limit(1000) % 1000, 0);
        assert!(write_call_limit(1000) <= WRITE_CALL_LIMIT);
        assert_eq!(write_call_limit(0), WRITE_CALL_LIMIT);
        // A frame size above the limit still accepts one whole frame per call.
        assert_eq!(write_call_limit(16 << 20), 16 << 20);
    }
}
