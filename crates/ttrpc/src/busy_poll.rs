//! Polling for a response before waiting to be woken
//! ([`Client::with_busy_poll`](crate::Client::with_busy_poll)).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Looks at `rx` until it resolves, `window` of wall-clock time has passed or
/// `deadline` is reached, yielding between looks: first the thread to the
/// kernel's scheduler, then the task to the runtime (which then checks its
/// I/O without blocking before it runs this task again). `None`: no response
/// yet.
///
/// The thread yields because the peer it waits for may have been woken on
/// this very CPU (the scheduler likes to put a task woken by a write on the
/// writer's CPU): a poller that kept the CPU would hold the peer's reply
/// back until the window ends or the scheduler preempts it. `sched_yield`
/// returns at once when nothing else waits for the CPU.
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
        std::thread::yield_now();
        tokio::task::yield_now().await;
    }
}

/// Whether a connection's next call polls: while most of its recent
/// responses came within the window. The gate keeps a moving average of
/// that share (each response weighs a quarter), polled calls and waited ones
/// alike, and opens while it is at least a half.
///
/// A peer that answers quickly now and then but mostly has to be woken (a Go
/// plugin whose threads went idle) thus is not polled for its odd quick
/// answers: each poll in vain would cost a whole window of CPU that the
/// peer's own threads need. A peer slower than the window costs a few
/// windows of polling, not one per call, and polling resumes after a few
/// quick responses in a row.
#[derive(Debug)]
pub(crate) struct Gate {
    /// The moving share of quick responses, in units of 1/`ONE`.
    quick: AtomicU32,
}

/// The fixed-point one of [`Gate::quick`].
const ONE: u32 = 1 << 16;

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            quick: AtomicU32::new(ONE),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.quick.load(Ordering::Relaxed) >= ONE / 2
    }

    /// A call's response (or its timeout) came `took` after its request
    /// was sent.
    pub(crate) fn record(&self, took: Duration, window: Duration) {
        // Calls on one connection rarely overlap; a lost update between two
        // that do only nudges the average.
        let old = self.quick.load(Ordering::Relaxed);
        let hit = if took <= window { ONE / 4 } else { 0 };
        self.quick.store(old - old / 4 + hit, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_micros(100);
    const QUICK: Duration = Duration::from_micros(60);
    const SLOW: Duration = Duration::from_micros(150);

    #[test]
    fn slow_responses_close_the_gate_and_quick_ones_open_it() {
        let gate = Gate::new();
        assert!(gate.is_open(), "the first call polls");
        gate.record(QUICK, WINDOW);
        assert!(gate.is_open());
        gate.record(SLOW, WINDOW);
        gate.record(SLOW, WINDOW);
        assert!(gate.is_open(), "two slow responses after quick ones");
        gate.record(SLOW, WINDOW);
        assert!(!gate.is_open(), "after three slow responses calls wait");
        for _ in 0..20 {
            gate.record(Duration::from_millis(5), WINDOW);
        }
        gate.record(QUICK, WINDOW);
        gate.record(QUICK, WINDOW);
        assert!(!gate.is_open(), "two quick responses are not yet enough");
        gate.record(WINDOW, WINDOW);
        assert!(
            gate.is_open(),
            "three quick responses in a row reopen it, the window's own length counting as quick"
        );
    }

    #[test]
    fn a_peer_mostly_slow_is_not_polled_for_its_odd_quick_response() {
        let gate = Gate::new();
        let mut polled = 0;
        for call in 0..400 {
            if gate.is_open() {
                polled += 1;
            }
            // One response in four is quick, as with a peer that must
            // mostly be woken.
            let took = if call % 4 == 0 { QUICK } else { SLOW };
            gate.record(took, WINDOW);
        }
        // Only the first few, while the average falls from its start.
        assert!(polled <= 5, "polled {polled} of 400 calls");
    }

    #[test]
    fn a_peer_mostly_quick_is_polled_through_its_odd_slow_response() {
        let gate = Gate::new();
        for call in 0..400 {
            assert!(gate.is_open(), "call {call} did not poll");
            let took = if call % 4 == 3 { SLOW } else { QUICK };
            gate.record(took, WINDOW);
        }
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
