//! [`UnixTrunk`]: a Unix stream socket that wakes its owner only for what it waits for.
//!
//! A `tokio::net::UnixStream` registers its socket with the event loop for both
//! readability and writability, edge-triggered. On a Unix socket every read by the
//! peer frees send-buffer space and so raises a new "writable" edge: after each
//! message it sends, the sender's event loop is woken once more when the peer reads
//! it, although nothing waits to write. In NRI's request/reply pattern that doubles the
//! wake-ups per message on both sides.
//!
//! `UnixTrunk` registers the socket for readability only. Writes go straight to the
//! non-blocking socket; only a write that finds the send buffer full registers a
//! duplicate of the descriptor for writability, waits on it, and drops it again once
//! the write went through.

use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use rustix::io::Errno;
use rustix::net::{send, SendFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A Unix stream socket as a mux trunk, registered for readability only.
///
/// Use it in place of a `tokio::net::UnixStream` for [`Mux::new`](crate::Mux::new):
///
/// ```
/// use nri_mux::{Mux, MuxOptions, UnixTrunk};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let (a, _b) = tokio::net::UnixStream::pair()?;
/// let mux = Mux::new(UnixTrunk::from_tokio(a)?, MuxOptions::default());
/// # mux.close();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct UnixTrunk {
    socket: AsyncFd<StdUnixStream>,
    /// A duplicate of the socket registered for writability while a write waits for
    /// send-buffer space; `None` otherwise.
    write_wait: Option<AsyncFd<OwnedFd>>,
}

impl UnixTrunk {
    /// Wraps a connected socket, switching it to non-blocking mode.
    ///
    /// # Errors
    ///
    /// The error of `set_nonblocking` or of the registration with the event loop.
    ///
    /// # Panics
    ///
    /// Panics if called outside a tokio runtime with I/O enabled, like
    /// `tokio::net::UnixStream::from_std`.
    pub fn new(stream: StdUnixStream) -> io::Result<UnixTrunk> {
        stream.set_nonblocking(true)?;
        Ok(UnixTrunk {
            socket: register(stream, Interest::READABLE)?,
            write_wait: None,
        })
    }

    /// Takes over a tokio socket (deregistering it from tokio's own registration).
    ///
    /// # Errors
    ///
    /// As [`UnixTrunk::new`].
    pub fn from_tokio(stream: tokio::net::UnixStream) -> io::Result<UnixTrunk> {
        UnixTrunk::new(stream.into_std()?)
    }

    /// The socket.
    pub fn get_ref(&self) -> &StdUnixStream {
        self.socket.get_ref()
    }
}

/// Registers an owned descriptor with the event loop for `interest`.
///
/// tokio 1.54 deprecates `AsyncFd::with_interest` in favour of an `unsafe` variant,
/// because a borrowed raw descriptor could be closed or replaced while registered. Both
/// types used here own their descriptor, which is closed only when the `AsyncFd` drops
/// them, so the condition of the `unsafe` variant holds; the safe call keeps tokio 1.47
/// and this crate free of `unsafe`.
#[allow(deprecated)]
fn register<T: std::os::fd::AsRawFd>(io: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    AsyncFd::with_interest(io, interest)
}

impl AsyncRead for UnixTrunk {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.socket.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let want = unfilled.len();
            match guard.try_io(|s| s.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    // A short read emptied the socket: the next data raises a new edge,
                    // so skip the read that would only return `WouldBlock`.
                    if n > 0 && n < want {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for UnixTrunk {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            // MSG_NOSIGNAL: a peer that went away is an EPIPE error, never a SIGPIPE.
            match send(this.socket.get_ref(), data, SendFlags::NOSIGNAL) {
                Ok(n) => {
                    this.write_wait = None;
                    return Poll::Ready(Ok(n));
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => {}
                Err(e) => {
                    this.write_wait = None;
                    return Poll::Ready(Err(e.into()));
                }
            }
            if this.write_wait.is_none() {
                // Registering reports the socket writable at once if space was freed
                // since the write above, so no wake-up is lost.
                let dup = this.socket.get_ref().as_fd().try_clone_to_owned()?;
                this.write_wait = Some(register(dup, Interest::WRITABLE)?);
            }
            let Some(wait) = this.write_wait.as_ref() else {
                continue;
            };
            let mut guard = ready!(wait.poll_write_ready(cx))?;
            guard.clear_ready();
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.write_wait = None;
        match this.socket.get_ref().shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn round_trip_and_eof() {
        let (a, b) = StdUnixStream::pair().unwrap();
        let mut a = UnixTrunk::new(a).unwrap();
        let mut b = UnixTrunk::new(b).unwrap();
        a.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        a.shutdown().await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(b.read_to_end(&mut rest).await.unwrap(), 0);
    }

    /// A write larger than the socket buffer waits for the reader and loses nothing.
    #[tokio::test]
    async fn write_waits_for_buffer_space() {
        let (a, b) = StdUnixStream::pair().unwrap();
        let mut a = UnixTrunk::new(a).unwrap();
        let mut b = UnixTrunk::new(b).unwrap();
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
        let expect = data.clone();
        let writer = tokio::spawn(async move {
            a.write_all(&data).await.unwrap();
            assert!(a.write_wait.is_none(), "write registration kept");
            a.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got.len(), expect.len());
        assert!(got == expect);
    }

    /// A write to a socket whose peer is gone fails instead of hanging.
    #[tokio::test]
    async fn write_to_closed_peer_fails() {
        let (a, b) = StdUnixStream::pair().unwrap();
        let mut a = UnixTrunk::new(a).unwrap();
        drop(b);
        let err = a.write_all(b"x").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
