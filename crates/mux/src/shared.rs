//! State shared by the [`Mux`](crate::Mux) handles, its connections and its tasks.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Waker;

use bytes::{Buf, Bytes, BytesMut};
use rustix::io::Errno;
use rustix::net::{send, SendFlags};
use tokio::sync::{watch, Notify};

use crate::error::MuxError;
use crate::frame::{ConnId, RESERVED_CONN_ID};
use crate::options::MuxOptions;

/// Locks a std mutex; a poisoned lock is still usable because every critical section
/// leaves the data consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Receive queue of one logical connection.
pub(crate) struct ConnQueue {
    pub(crate) id: ConnId,
    pub(crate) state: Mutex<QueueState>,
}

#[derive(Default)]
pub(crate) struct QueueState {
    /// Received frames not yet read, oldest first. Empty frames are kept: they read as
    /// a zero-length read. An entry can hold several frames read into one buffer.
    frames: VecDeque<Received>,
    /// How many frames the entries of `frames` hold together.
    held: usize,
    /// Task waiting for a frame.
    pub(crate) waker: Option<Waker>,
    /// No more frames will arrive (the conn or the whole mux was closed).
    pub(crate) closed: bool,
}

/// One entry of a receive queue: the payload of one frame, or of several
/// consecutive frames read into one buffer.
struct Received {
    bytes: Bytes,
    frames: usize,
}

impl QueueState {
    /// The oldest unread entry's bytes.
    pub(crate) fn front(&self) -> Option<&Bytes> {
        self.frames.front().map(|r| &r.bytes)
    }

    /// Takes the oldest unread entry.
    pub(crate) fn pop_front(&mut self) -> Option<Bytes> {
        let received = self.frames.pop_front()?;
        self.held = self.held.saturating_sub(received.frames);
        Some(received.bytes)
    }

    /// Makes `waker` the one woken by the next frame.
    pub(crate) fn wait(&mut self, waker: &Waker) {
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }
}

impl ConnQueue {
    fn new(id: ConnId) -> ConnQueue {
        ConnQueue {
            id,
            state: Mutex::new(QueueState::default()),
        }
    }

    /// Marks the queue as finished and wakes its reader.
    pub(crate) fn finish(&self) {
        let waker = {
            let mut st = lock(&self.state);
            st.closed = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Outgoing bytes, already framed, waiting for the writer task.
#[derive(Default)]
pub(crate) struct WriteState {
    pub(crate) pending: BytesMut,
    /// Total number of bytes ever appended to `pending`.
    pub(crate) queued_end: u64,
    /// Total number of bytes written to the trunk.
    pub(crate) written_end: u64,
    /// Tasks waiting for room in `pending` or for their bytes to be written.
    pub(crate) waiters: Vec<Waker>,
    /// The writer task has stopped: no more bytes reach the trunk.
    pub(crate) writer_stopped: bool,
    /// The writer task holds bytes taken from `pending` that it has not finished
    /// writing: a direct send now would overtake them.
    pub(crate) in_flight: bool,
    /// The trunk's socket, when the trunk is a [`UnixTrunk`](crate::UnixTrunk): a
    /// write that finds nothing queued or in flight is sent from the writing task
    /// itself. Dropped when the mux closes or its writer stops.
    pub(crate) direct: Option<StdUnixStream>,
}

impl WriteState {
    pub(crate) fn add_waiter(&mut self, waker: &Waker) {
        if !self.waiters.iter().any(|w| w.will_wake(waker)) {
            self.waiters.push(waker.clone());
        }
    }

    /// Sends the queued bytes straight to the trunk's socket from the calling task,
    /// when the trunk is a Unix socket and the writer task holds nothing: the
    /// bytes then keep their order. Sends what the socket takes without
    /// blocking; the rest stays queued for the writer task, which also meets any
    /// error of the socket and fails the mux with it. Returns the tasks to wake
    /// (writers waiting for their bytes to reach the trunk).
    pub(crate) fn send_direct(&mut self) -> Vec<Waker> {
        if self.in_flight {
            return Vec::new();
        }
        let Some(socket) = self.direct.as_ref() else {
            return Vec::new();
        };
        let mut sent = 0usize;
        while !self.pending.is_empty() {
            match send(
                socket,
                &self.pending,
                SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            ) {
                Ok(0) => break,
                Ok(n) => {
                    self.pending.advance(n);
                    sent += n;
                }
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        if sent == 0 {
            return Vec::new();
        }
        self.written_end = self.written_end.saturating_add(sent as u64);
        self.wake_all()
    }

    fn wake_all(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.waiters)
    }
}

pub(crate) struct Inner {
    pub(crate) opts: MuxOptions,
    conns: Mutex<HashMap<ConnId, Arc<ConnQueue>>>,
    closed: AtomicBool,
    closed_tx: watch::Sender<bool>,
    unblock_tx: watch::Sender<bool>,
    error: OnceLock<MuxError>,
    pub(crate) write: Mutex<WriteState>,
    pub(crate) writer_wake: Notify,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mux")
            .field("opts", &self.opts)
            .field("closed", &self.is_closed())
            .field("error", &self.error.get())
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub(crate) fn new(opts: &MuxOptions, direct: Option<StdUnixStream>) -> Inner {
        Inner {
            opts: opts.normalized(),
            conns: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            closed_tx: watch::Sender::new(false),
            unblock_tx: watch::Sender::new(false),
            error: OnceLock::new(),
            write: Mutex::new(WriteState {
                direct,
                ..WriteState::default()
            }),
            writer_wake: Notify::new(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn error(&self) -> Option<MuxError> {
        self.error.get().cloned()
    }

    /// The error a read sees once its queue is drained: `None` means end of stream.
    pub(crate) fn read_error(&self) -> Option<MuxError> {
        self.error.get().filter(|e| !e.is_eof()).cloned()
    }

    pub(crate) fn subscribe_closed(&self) -> watch::Receiver<bool> {
        self.closed_tx.subscribe()
    }

    pub(crate) fn subscribe_unblock(&self) -> watch::Receiver<bool> {
        self.unblock_tx.subscribe()
    }

    pub(crate) fn unblock(&self) {
        if !self.unblock_tx.send_replace(true) {
            tracing::debug!("mux reader unblocked");
        }
    }

    pub(crate) fn open(&self, id: ConnId) -> Result<Arc<ConnQueue>, MuxError> {
        if id == RESERVED_CONN_ID {
            return Err(MuxError::ReservedConnId(id));
        }
        let mut conns = lock(&self.conns);
        // Checked under the table lock: close() sets the flag before emptying the table.
        if self.is_closed() {
            return Err(MuxError::Closed);
        }
        if conns.contains_key(&id) {
            return Err(MuxError::AlreadyOpen(id));
        }
        let queue = Arc::new(ConnQueue::new(id));
        conns.insert(id, Arc::clone(&queue));
        tracing::debug!(conn = id, "mux connection opened");
        Ok(queue)
    }

    /// Removes `queue` from the table (if it is still the one registered for its id) and
    /// finishes it.
    pub(crate) fn remove(&self, queue: &Arc<ConnQueue>) {
        let removed = {
            let mut conns = lock(&self.conns);
            match conns.get(&queue.id) {
                Some(current) if Arc::ptr_eq(current, queue) => conns.remove(&queue.id).is_some(),
                _ => false,
            }
        };
        if removed {
            tracing::debug!(conn = queue.id, "mux connection closed");
        }
        queue.finish();
    }

    /// Takes back the last entry queued for `id` if nobody has read any of
    /// it yet and it holds between 1 and `max` bytes, so that the frame
    /// that follows it can be read into one buffer with it.
    /// Returns its bytes and how many frames they are.
    pub(crate) fn take_back(&self, id: ConnId, max: usize) -> Option<(Bytes, usize)> {
        let queue = lock(&self.conns).get(&id).cloned()?;
        let mut st = lock(&queue.state);
        // A frame that overflows the queue leaves the frames before it as
        // they are.
        if st.closed || st.held >= self.opts.read_queue_len {
            return None;
        }
        match st.frames.back() {
            Some(last) if !last.bytes.is_empty() && last.bytes.len() <= max => {
                let last = st.frames.pop_back()?;
                st.held = st.held.saturating_sub(last.frames);
                Some((last.bytes, last.frames))
            }
            _ => None,
        }
    }

    /// Queues a received frame for its connection, or `frames` of them read into one
    /// buffer: the last one received and the ones [taken back](Inner::take_back) before
    /// it. Frames for ids that are not open are dropped. The queue overflows when the
    /// frame received finds `read_queue_len` frames unread before it, however they are
    /// held.
    pub(crate) fn deliver(
        &self,
        id: ConnId,
        payload: Bytes,
        frames: usize,
    ) -> Result<(), MuxError> {
        let queue = lock(&self.conns).get(&id).cloned();
        let Some(queue) = queue else {
            tracing::trace!(
                conn = id,
                len = payload.len(),
                "dropping frame for unopened connection"
            );
            return Ok(());
        };
        let waker = {
            let mut st = lock(&queue.state);
            if st.closed {
                tracing::trace!(conn = id, "dropping frame for closed connection");
                return Ok(());
            }
            let frames = frames.max(1);
            if st.held + (frames - 1) >= self.opts.read_queue_len {
                return Err(MuxError::QueueOverflow { conn: id });
            }
            st.held += frames;
            st.frames.push_back(Received {
                bytes: payload,
                frames,
            });
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Records `err` (unless an error was recorded before) and closes the mux.
    pub(crate) fn fail(&self, err: MuxError) {
        if self.is_closed() {
            tracing::debug!(error = %err, "error after mux close ignored");
            return;
        }
        if err.is_eof() {
            tracing::debug!("mux trunk reached EOF");
        } else {
            tracing::debug!(error = %err, "mux failed");
        }
        let _ = self.error.set(err);
        self.close();
    }

    /// Closes the mux: every connection, the reader, and (after a bounded drain of
    /// already-accepted writes) the trunk. Idempotent.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::debug!("closing mux");
        let conns: Vec<Arc<ConnQueue>> = lock(&self.conns).drain().map(|(_, q)| q).collect();
        for queue in conns {
            queue.finish();
        }
        self.closed_tx.send_replace(true);
        self.writer_wake.notify_one();
        let waiters = {
            let mut ws = lock(&self.write);
            ws.direct = None;
            ws.wake_all()
        };
        for w in waiters {
            w.wake();
        }
    }

    /// Takes every framed byte waiting to be written; they are in flight until
    /// [`Inner::written`] reports them.
    pub(crate) fn take_pending(&self) -> Option<Bytes> {
        let mut ws = lock(&self.write);
        if ws.pending.is_empty() {
            None
        } else {
            ws.in_flight = true;
            Some(ws.pending.split().freeze())
        }
    }

    /// Records that the writer task stopped and wakes the tasks waiting
    /// for their bytes to be written.
    pub(crate) fn writer_stopped(&self) {
        let waiters = {
            let mut ws = lock(&self.write);
            ws.writer_stopped = true;
            ws.direct = None;
            ws.wake_all()
        };
        for w in waiters {
            w.wake();
        }
    }

    /// Records that `n` more bytes reached the trunk and wakes waiting writers.
    pub(crate) fn written(&self, n: usize) {
        let waiters = {
            let mut ws = lock(&self.write);
            ws.written_end = ws.written_end.saturating_add(n as u64);
            ws.in_flight = false;
            ws.wake_all()
        };
        for w in waiters {
            w.wake();
        }
    }
}

/// Closes the mux when the last user-visible handle ([`Mux`](crate::Mux) or
/// [`MuxConn`](crate::MuxConn)) is dropped, so the tasks never outlive their users.
pub(crate) struct Guard {
    pub(crate) inner: Arc<Inner>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.inner.close();
    }
}

/// Resolves when the mux is closed.
pub(crate) async fn wait_closed(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|closed| *closed).await;
}
