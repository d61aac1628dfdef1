//! [`Outbox`]: encoded frames written to the stream by the task that produced them.
//!
//! A frame handed to [`Outbox::send`] is written at once, by the calling task, as far
//! as the stream takes it without waiting; the connection's background task
//! ([`Outbox::drive`]) only finishes what the stream could not take at once (a full
//! send buffer, a flush that waits). All progress is kept in the outbox, not in the
//! caller's future, so a caller that is cancelled never leaves half a frame behind:
//! whoever comes next, caller or background task, goes on from the same byte.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::Notify;

/// The stream a connection writes to.
pub(crate) type Stream = Box<dyn AsyncWrite + Send + Unpin>;

/// The outbox of one connection. `T` is held with each frame until the frame has
/// been written and flushed (the server's in-flight slot; `()` for the client).
pub(crate) struct Outbox<T> {
    state: Mutex<State<T>>,
    notify: Arc<Notify>,
    /// Wakes the background task: the waker given to the stream whoever writes.
    waker: Waker,
}

struct State<T> {
    /// `None` once closed or failed.
    io: Option<Stream>,
    /// Frames not completely written, oldest first, each with its token.
    queue: VecDeque<(Vec<u8>, T)>,
    /// Bytes of the first queued frame already written.
    offset: usize,
    /// Tokens of frames written since the last completed flush (a flush is owed
    /// while there are any).
    unflushed: Vec<T>,
    /// The write error that stopped the outbox, for the background task to report.
    error: Option<io::Error>,
}

/// The outbox is closed: the frame was not sent.
#[derive(Debug)]
pub(crate) struct Closed;

struct NotifyWaker(Arc<Notify>);

impl Wake for NotifyWaker {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

impl<T> Outbox<T> {
    pub(crate) fn new(io: Stream) -> Outbox<T> {
        let notify = Arc::new(Notify::new());
        let waker = Waker::from(Arc::new(NotifyWaker(Arc::clone(&notify))));
        Outbox {
            state: Mutex::new(State {
                io: Some(io),
                queue: VecDeque::new(),
                offset: 0,
                unflushed: Vec::new(),
                error: None,
            }),
            notify,
            waker,
        }
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `frame` and writes as much as the stream takes now, from the calling
    /// task. Frames go out in the order of the calls. A write error closes the
    /// outbox; [`Outbox::drive`] reports it.
    pub(crate) fn send(&self, frame: Vec<u8>, token: T) -> Result<(), Closed> {
        let mut st = self.state();
        if st.io.is_none() {
            return Err(Closed);
        }
        st.queue.push_back((frame, token));
        if st.queue.len() == 1 {
            // Nothing was waiting: no background round is under way to append to.
            self.progress(&mut st);
        }
        Ok(())
    }

    /// Drops the stream and every frame not yet written. Idempotent.
    pub(crate) fn close(&self) {
        let (io, queue, unflushed) = {
            let mut st = self.state();
            (
                st.io.take(),
                std::mem::take(&mut st.queue),
                std::mem::take(&mut st.unflushed),
            )
        };
        drop((io, queue, unflushed));
        self.notify.notify_one();
    }

    /// Writes, then flushes, what is queued, until done or until the stream
    /// cannot take more (it then wakes the background task when it can). A
    /// failure closes the outbox and wakes the background task to report it.
    fn progress(&self, st: &mut State<T>) {
        let mut cx = Context::from_waker(&self.waker);
        if let Err(e) = write_queued(st, &mut cx) {
            st.io = None;
            st.queue.clear();
            st.unflushed.clear();
            st.error = Some(e);
            self.notify.notify_one();
        }
    }

    /// The connection's background task: finishes the writes the stream could not
    /// take at once. Returns `Ok` once the outbox is closed, or the write error that
    /// closed it.
    pub(crate) async fn drive(self: Arc<Self>) -> io::Result<()> {
        loop {
            self.notify.notified().await;
            let mut st = self.state();
            self.progress(&mut st);
            if st.io.is_none() {
                return st.error.take().map_or(Ok(()), Err);
            }
        }
    }
}

/// Returns `Ok` when everything is written and flushed, when the stream cannot
/// take more now, or when the outbox is closed.
fn write_queued<T>(st: &mut State<T>, cx: &mut Context<'_>) -> io::Result<()> {
    loop {
        let Some(io) = st.io.as_mut() else {
            return Ok(());
        };
        if let Some((frame, _)) = st.queue.front() {
            let rest = frame.get(st.offset..).unwrap_or_default();
            match Pin::new(io).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) if !rest.is_empty() => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "failed to write whole frame",
                    ))
                }
                Poll::Ready(Ok(n)) => {
                    st.offset += n;
                    if st.offset >= frame.len() {
                        st.offset = 0;
                        if let Some((_, token)) = st.queue.pop_front() {
                            st.unflushed.push(token);
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
            continue;
        }
        if st.unflushed.is_empty() {
            return Ok(());
        }
        match Pin::new(io).poll_flush(cx) {
            Poll::Ready(Ok(())) => st.unflushed.clear(),
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Takes at most `chunk` bytes per write and is pending every other call.
    struct Trickle {
        inner: tokio::io::DuplexStream,
        chunk: usize,
        flip: bool,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.flip = !self.flip;
            if self.flip {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = buf.len().min(self.chunk);
            Pin::new(&mut self.inner).poll_write(cx, &buf[..n])
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// A stream that takes bytes a few at a time, and now and then none: every
    /// frame arrives whole and in order, and each token is released only after its
    /// frame was written.
    #[tokio::test]
    async fn partial_writes_keep_frames_whole_and_in_order() {
        let (a, mut b) = tokio::io::duplex(64);
        let outbox: Arc<Outbox<Arc<()>>> = Arc::new(Outbox::new(Box::new(Trickle {
            inner: a,
            chunk: 7,
            flip: false,
        })));
        let driver = tokio::spawn(Arc::clone(&outbox).drive());
        let token = Arc::new(());
        let mut expect = Vec::new();
        for i in 0..50u8 {
            let frame: Vec<u8> = (0..=i).map(|j| i ^ j).collect();
            expect.extend_from_slice(&frame);
            outbox.send(frame, Arc::clone(&token)).unwrap();
        }
        let mut got = vec![0u8; expect.len()];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expect);
        // Every token comes back once the last frame is flushed.
        while Arc::strong_count(&token) > 1 {
            tokio::task::yield_now().await;
        }
        outbox.close();
        assert!(driver.await.unwrap().is_ok());
        assert!(outbox.send(vec![1], Arc::clone(&token)).is_err());
    }

    /// A write error closes the outbox and is what the background task returns.
    #[tokio::test]
    async fn a_write_error_is_reported_by_the_background_task() {
        let (a, b) = tokio::io::duplex(64);
        drop(b);
        let outbox: Arc<Outbox<()>> = Arc::new(Outbox::new(Box::new(a)));
        let driver = tokio::spawn(Arc::clone(&outbox).drive());
        outbox.send(vec![1, 2, 3], ()).unwrap();
        let err = driver.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert!(outbox.send(vec![4], ()).is_err());
    }
}
