//! Polling for a response before waiting to be woken
//! ([`Client::with_busy_poll`](crate::Client::with_busy_poll)).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
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
/// It does not yield the thread while `arrivals` says that the connection's
/// reader was woken since the last look: the response is then on its way
/// through this runtime's own tasks, and giving the CPU away at that moment
/// would let another process run before the call had its response.
///
/// The window is measured on the system clock, not tokio's: with tokio's
/// clock paused (in tests) it would never pass while this task keeps the
/// runtime busy.
pub(crate) async fn poll_until<T>(
    rx: &mut oneshot::Receiver<T>,
    window: Duration,
    deadline: Option<Instant>,
    arrivals: &Arrivals,
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
        if !arrivals.take() {
            std::thread::yield_now();
        }
        tokio::task::yield_now().await;
    }
}

/// Records that a connection's reader task was woken: data came in for it.
///
/// The reader polls its source through [`Arrivals::watch`], which hands the
/// source a waker that sets the mark before it wakes the reader.
#[derive(Debug)]
pub(crate) struct Arrivals {
    flag: Arc<ArrivalWake>,
    /// `flag` as a waker, made once.
    waker: Waker,
}

#[derive(Debug, Default)]
struct ArrivalWake {
    woken: AtomicBool,
    /// The waker of the task that polls through [`Arrivals::watch`].
    reader: Mutex<Option<Waker>>,
}

impl Wake for ArrivalWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let reader = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(reader) = reader.as_ref() {
            reader.wake_by_ref();
        }
    }
}

impl Arrivals {
    pub(crate) fn new() -> Arrivals {
        let flag = Arc::new(ArrivalWake::default());
        let waker = Waker::from(Arc::clone(&flag));
        Arrivals { flag, waker }
    }

    /// Whether the reader was woken since the last `take`; clears the mark.
    pub(crate) fn take(&self) -> bool {
        self.flag.woken.swap(false, Ordering::Acquire)
    }

    /// Polls `fut` with a waker that marks an arrival before it wakes the
    /// task polling this.
    pub(crate) async fn watch<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        poll_fn(|cx| {
            {
                let mut reader = self.flag.reader.lock().unwrap_or_else(|e| e.into_inner());
                if !reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *reader = Some(cx.waker().clone());
                }
            }
            fut.as_mut().poll(&mut Context::from_waker(&self.waker))
        })
        .await
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
    async fn a_wake_of_the_watched_future_marks_an_arrival_and_wakes_its_task() {
        let arrivals = Arc::new(Arrivals::new());
        let (tx, rx) = oneshot::channel::<u8>();
        let watching = Arc::clone(&arrivals);
        let reader = tokio::spawn(async move { watching.watch(rx).await });
        // Until the reader task has been polled once and waits.
        while arrivals
            .flag
            .reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            tokio::task::yield_now().await;
        }
        assert!(!arrivals.take(), "nothing arrived yet");
        tx.send(5).unwrap();
        assert!(arrivals.take(), "the send woke the reader through the mark");
        assert!(!arrivals.take(), "take clears the mark");
        // The reader's own task was woken too: it finishes with the value.
        let read = tokio::time::timeout(Duration::from_secs(10), reader).await;
        assert_eq!(read.expect("the reader was woken").unwrap(), Ok(5));
    }

    #[tokio::test]
    async fn a_sent_value_is_taken_at_the_first_look() {
        let (tx, mut rx) = oneshot::channel();
        tx.send(7u8).unwrap();
        let got = poll_until(&mut rx, Duration::from_secs(60), None, &Arrivals::new()).await;
        assert_eq!(got, Some(Ok(7)));
    }

    #[tokio::test]
    async fn nothing_within_the_window_is_none() {
        let (_tx, mut rx) = oneshot::channel::<u8>();
        let started = std::time::Instant::now();
        let got = poll_until(&mut rx, Duration::from_millis(2), None, &Arrivals::new()).await;
        assert_eq!(got, None);
        assert!(started.elapsed() >= Duration::from_millis(2));
    }
}
