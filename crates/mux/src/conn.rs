//! [`MuxConn`]: one logical connection of a multiplexer, as a byte stream.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::frame::{encode_frames, ConnId};
use crate::shared::{lock, ConnQueue, Guard, Inner};
use crate::writer::{write_call_limit, WRITE_HIGH_WATER};

/// One logical connection of a [`Mux`](crate::Mux).
///
/// A `MuxConn` is a byte stream ([`AsyncRead`] + [`AsyncWrite`]):
///
/// * **Writing** frames the data as `[id][len][payload]` with payloads of at most
///   [`MuxOptions::max_write_frame`](crate::MuxOptions::max_write_frame) bytes and hands
///   the frames to the mux's writer task; `poll_write` returns once the bytes are
///   accepted, `poll_flush` once they reached the trunk. Over a
///   [`UnixTrunk`](crate::UnixTrunk), a write that finds nothing else waiting is sent
///   to the socket by the writing task itself, and only what the socket does not take
///   at once is left to the writer task. One `poll_write` accepts up to
///   8 MiB (whole frames), and its frames are contiguous on the trunk. A zero-length
///   write (`conn.write(&[])`, not `write_all`) sends one header-only frame and returns
///   `Ok(0)`. When too many framed bytes wait for a slow trunk, writes wait too.
/// * **Reading** returns the payload bytes of received frames; a frame larger than the
///   read buffer is returned over several reads, and consecutive frames may fill one
///   read. A received **zero-length frame reads as `Ok` with nothing filled**, which
///   most readers take as end of stream; data received after it can still be read.
/// * **End**: once the mux is closed, reads first return the frames received before,
///   then end of stream (`Ok` with nothing filled) if the mux was closed by
///   [`Mux::close`](crate::Mux::close) or by the peer closing the trunk, or the recorded
///   [`MuxError`](crate::MuxError) (as an [`io::Error`]) if it failed. Writes fail
///   with [`io::ErrorKind::BrokenPipe`]. A flush still waits for the bytes accepted
///   before: the writer goes on delivering them for a bounded time after the close,
///   and the flush fails only if they were not all written.
/// * **Closing**: dropping the handle or `poll_shutdown` (which first flushes) removes
///   the connection from the mux; later frames for its id are dropped and the id can be
///   opened again. Other connections are not affected. Bytes already accepted for
///   writing are still sent.
///
/// ```
/// use nri_mux::{Mux, MuxOptions};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (a, b) = tokio::net::UnixStream::pair()?;
/// let (left, right) = (Mux::new(a, MuxOptions::default()), Mux::new(b, MuxOptions::default()));
/// let mut tx = left.open(5)?;
/// let mut rx = right.open(5)?;
/// tx.write_all(&[7u8; 10_000]).await?; // goes out as frames of 4096, 4096 and 1808 bytes
/// let mut got = vec![0u8; 10_000];
/// rx.read_exact(&mut got).await?;
/// assert!(got.iter().all(|&b| b == 7));
/// # Ok(())
/// # }
/// ```
pub struct MuxConn {
    id: ConnId,
    queue: Arc<ConnQueue>,
    guard: Arc<Guard>,
    /// Rest of a frame that did not fit into the previous read.
    current: Bytes,
    /// `write_end` of the mux after this conn's last accepted write; flush waits for it.
    write_end: u64,
    write_limit: usize,
    closed: bool,
}

impl MuxConn {
    pub(crate) fn new(guard: Arc<Guard>, queue: Arc<ConnQueue>) -> MuxConn {
        let write_limit = write_call_limit(guard.inner.opts.max_write_frame);
        MuxConn {
            id: queue.id,
            queue,
            guard,
            current: Bytes::new(),
            write_end: 0,
            write_limit,
            closed: false,
        }
    }

    /// The connection id.
    pub fn id(&self) -> ConnId {
        self.id
    }

    fn inner(&self) -> &Inner {
        &self.guard.inner
    }

    fn close_local(&mut self) {
        if !self.closed {
            self.closed = true;
            self.guard.inner.remove(&self.queue);
        }
    }

    fn conn_closed_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::BrokenPipe,
            format!("mux connection {} is closed", self.id),
        )
    }

    fn mux_closed_error(&self) -> io::Error {
        let msg = match self.inner().error() {
            Some(e) if !e.is_eof() => format!("multiplexer is closed: {e}"),
            _ => "multiplexer is closed".to_string(),
        };
        io::Error::new(io::ErrorKind::BrokenPipe, msg)
    }

    /// What a read returns once everything received has been read.
    fn end_of_stream(&self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.inner().read_error() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl MuxConn {
    /// Reads as [`AsyncRead::poll_read`] does, but hands over the received
    /// bytes themselves instead of copying them into a buffer: the rest of
    /// a frame that an earlier read did not take, or else the next received
    /// frame's payload whole, as the mux's reader task read it.
    ///
    /// Empty bytes are what a read that fills nothing is: a received
    /// zero-length frame, or the end of the stream. Errors are a read's.
    /// Reads of either kind can be mixed; each takes bytes where the last
    /// one stopped.
    ///
    /// ```
    /// use nri_mux::{Mux, MuxOptions};
    /// use tokio::io::AsyncWriteExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (a, b) = tokio::net::UnixStream::pair()?;
    /// let (left, right) = (Mux::new(a, MuxOptions::default()), Mux::new(b, MuxOptions::default()));
    /// let mut tx = left.open(5)?;
    /// let mut rx = right.open(5)?;
    /// tx.write_all(b"one frame").await?;
    /// let got = std::future::poll_fn(|cx| rx.poll_read_bytes(cx)).await?;
    /// assert_eq!(&got[..], b"one frame");
    /// # Ok(())
    /// # }
    /// ```
    pub fn poll_read_bytes(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Bytes>> {
        if !self.current.is_empty() {
            return Poll::Ready(Ok(std::mem::take(&mut self.current)));
        }
        let mut st = lock(&self.queue.state);
        if let Some(frame) = st.pop_front() {
            return Poll::Ready(Ok(frame));
        }
        if st.closed || self.closed {
            drop(st);
            return Poll::Ready(self.end_of_stream().map(|()| Bytes::new()));
        }
        st.wait(cx.waker());
        Poll::Pending
    }
}

impl fmt::Debug for MuxConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MuxConn")
            .field("id", &self.id)
            .field("closed", &self.closed)
            .field("buffered", &self.current.len())
            .finish_non_exhaustive()
    }
}

impl Drop for MuxConn {
    fn drop(&mut self) {
        self.close_local();
    }
}

/// Copies as much of `src` as fits into `buf`, advancing `src`.
fn copy_into(src: &mut Bytes, buf: &mut ReadBuf<'_>) {
    let n = src.len().min(buf.remaining());
    if let Some(part) = src.get(..n) {
        buf.put_slice(part);
    }
    src.advance(n);
}

impl AsyncRead for MuxConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut filled = false;
        if !this.current.is_empty() {
            copy_into(&mut this.current, buf);
            filled = true;
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
        }
        let mut st = lock(&this.queue.state);
        loop {
            match st.front() {
                Some(frame) if frame.is_empty() => {
                    // A zero-length frame is its own (empty) read.
                    if !filled {
                        st.pop_front();
                    }
                    return Poll::Ready(Ok(()));
                }
                Some(_) => {
                    let Some(mut frame) = st.pop_front() else {
                        continue;
                    };
                    copy_into(&mut frame, buf);
                    filled = true;
                    if !frame.is_empty() {
                        this.current = frame;
                        return Poll::Ready(Ok(()));
                    }
                    if buf.remaining() == 0 {
                        return Poll::Ready(Ok(()));
                    }
                }
                None => {
                    if filled {
                        return Poll::Ready(Ok(()));
                    }
                    if st.closed || this.closed {
                        drop(st);
                        return Poll::Ready(this.end_of_stream());
                    }
                    st.wait(cx.waker());
                    return Poll::Pending;
                }
            }
        }
    }
}

impl AsyncWrite for MuxConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Err(this.conn_closed_error()));
        }
        let inner = Arc::clone(&this.guard.inner);
        let mut ws = lock(&inner.write);
        // Checked under the write lock: close() sets the flag before it wakes waiters.
        if inner.is_closed() {
            drop(ws);
            return Poll::Ready(Err(this.mux_closed_error()));
        }
        if ws.pending.len() >= WRITE_HIGH_WATER {
            ws.add_waiter(cx.waker());
            return Poll::Pending;
        }
        let take = buf.len().min(this.write_limit);
        let data = buf.get(..take).unwrap_or(buf);
        let n = encode_frames(&mut ws.pending, this.id, data, inner.opts.max_write_frame);
        ws.queued_end = ws.queued_end.saturating_add(n as u64);
        this.write_end = ws.queued_end;
        let waiters = ws.send_direct();
        let queued = !ws.pending.is_empty();
        drop(ws);
        for w in waiters {
            w.wake();
        }
        if queued {
            inner.writer_wake.notify_one();
        }
        Poll::Ready(Ok(take))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let inner = Arc::clone(&this.guard.inner);
        let mut ws = lock(&inner.write);
        if ws.written_end >= this.write_end {
            return Poll::Ready(Ok(()));
        }
        // A closed mux still delivers the writes it accepted (for a bounded
        // time): the flush fails only once the writer has stopped without
        // writing these bytes.
        if inner.is_closed() && ws.writer_stopped {
            drop(ws);
            return Poll::Ready(Err(this.mux_closed_error()));
        }
        ws.add_waiter(cx.waker());
        Poll::Pending
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.closed {
            return Poll::Ready(Ok(()));
        }
        let flushed = match self.as_mut().poll_flush(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        self.get_mut().close_local();
        Poll::Ready(flushed)
    }
}
