//! Polling for a response before waiting to be woken
//! ([`Client::with_busy_poll`](crate::Client::with_busy_poll)).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Looks at `rx` until it resolves, `window` of wall-clock time has passed or
/// `deadline` is reached, yielding to the runtime between looks (the runtime
/// then checks its I/O without blocking before it runs this task again).
/// `None`: no response yet.
///
/// The window is measured on the system clock, not tokio's: with tokio's
/// clock paused (in tests) it would never pass while this task keeps the
/// runtime busy.
pub(crate) async fn poll_until<T>(
    rx: &mut oneshot::Receiver<T>,
    window: Duration,
    deadline: Option<Instant>,
) -> Option<Result<T, oneshot::error::RecvError>> {
    let start = std::time::Instant::now();
    loop {
        let look = poll_fn(|cx| Poll::Ready(Pin::new(&mut *rx).poll(cx))).await;
        if let Poll::Ready(reply) = look {
            return Some(reply);
        }
        if start.elapsed() >= window || deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        tokio::task::yield_now().await;
    }
}

/// Whether a connection's next call polls: only if its previous response
/// came within the window (or there was none yet). A peer slower than the
/// window then costs one window of polling, not one per call, and polling
/// resumes once a response is quick again.
#[derive(Debug)]
pub(crate) struct Gate {
    open: AtomicBool,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            open: AtomicBool::new(true),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// A call's response (or its timeout) came `took` after its request
    /// was sent.
    pub(crate) fn record(&self, took: Duration, window: Duration) {
        self.open.store(took <= window, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_response_closes_the_gate_and_a_quick_one_opens_it() {
        let window = Duration::from_micros(100);
        let gate = Gate::new();
        assert!(gate.is_open(), "the first call polls");
        gate.record(Duration::from_micros(60), window);
        assert!(gate.is_open());
        gate.record(Duration::from_micros(100), window);
        assert!(gate.is_open(), "the window's own length is within it");
        gate.record(Duration::from_micros(101), window);
        assert!(
            !gate.is_open(),
            "after a slow response the next call waits at once"
        );
        gate.record(Duration::from_millis(5), window);
        assert!(!gate.is_open());
        gate.record(Duration::from_micros(30), window);
        assert!(gate.is_open(), "a quick response brings polling back");
    }

    #[tokio::test]
    async fn a_sent_value_is_taken_at_the_first_look() {
        let (tx, mut rx) = oneshot::channel();
        tx.send(7u8).unwrap();
        let got = poll_until(&mut rx, Duration::from_secs(60), None).await;
        assert_eq!(got, Some(Ok(7)));
    }

    #[tokio::test]
    async fn nothing_within_the_window_is_none() {
        let (_tx, mut rx) = oneshot::channel::<u8>();
        let started = std::time::Instant::now();
        let got = poll_until(&mut rx, Duration::from_millis(2), None).await;
        assert_eq!(got, None);
        assert!(started.elapsed() >= Duration::from_millis(2));
    }
}
