//! [`Mux`]: the multiplexer handle.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::conn::MuxConn;
use crate::error::MuxError;
use crate::frame::ConnId;
use crate::options::MuxOptions;
use crate::shared::{wait_closed, Guard, Inner};
use crate::trunk::UnixTrunk;
use crate::{reader, writer};

/// A multiplexer: several logical connections ([`MuxConn`]) over one trunk.
///
/// `Mux` is a cheap handle (`Clone`); all clones control the same multiplexer. Two tasks
/// run on the tokio runtime it was created on: a reader that splits incoming frames
/// onto the connections, and a writer that sends the frames the connections produce
/// (over a [`UnixTrunk`], only those that the writing task could not send to the
/// socket at once itself).
///
/// Opening a connection is local: nothing is sent, and the peer is assumed to open the
/// same id. Frames arriving for ids that are not open are dropped.
///
/// The mux closes on [`Mux::close`], when the peer closes the trunk, on any trunk error,
/// on a malformed frame header, when a connection's read queue overflows, or when the
/// last `Mux` handle and the last [`MuxConn`] are dropped.
///
/// ```
/// use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (plugin_end, runtime_end) = tokio::net::UnixStream::pair()?;
/// let plugin = Mux::new(plugin_end, MuxOptions::default());
/// // The runtime reads nothing until its services are set up.
/// let runtime = Mux::new(runtime_end, MuxOptions { blocked_read: true, ..Default::default() });
///
/// let mut to_runtime = plugin.open(RUNTIME_SERVICE_CONN)?;
/// let mut runtime_service = runtime.open(RUNTIME_SERVICE_CONN)?;
/// let _plugin_service = runtime.open(PLUGIN_SERVICE_CONN)?;
/// runtime.unblock();
///
/// to_runtime.write_all(b"hello").await?;
/// let mut buf = [0u8; 5];
/// runtime_service.read_exact(&mut buf).await?;
/// assert_eq!(&buf, b"hello");
///
/// plugin.close();
/// runtime.closed().await; // the runtime side sees the trunk end
/// assert_eq!(runtime.error().map(|e| e.to_string()).as_deref(), Some("EOF"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Mux {
    guard: Arc<Guard>,
}

impl fmt::Debug for Mux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.inner.fmt(f)
    }
}

impl Mux {
    /// Creates a multiplexer over `trunk` and spawns its reader and writer tasks on the
    /// current tokio runtime (any flavour; the runtime needs its time driver, used to
    /// bound the delivery of pending writes on close).
    ///
    /// # Panics
    ///
    /// Panics if called outside a tokio runtime, like [`tokio::spawn`].
    pub fn new<T>(trunk: T, opts: MuxOptions) -> Mux
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        // With a Unix socket trunk, writes that find nothing queued go straight to
        // the socket from the writing task (through a duplicate of its descriptor).
        let direct = (&trunk as &dyn Any)
            .downcast_ref::<UnixTrunk>()
            .and_then(|t| t.get_ref().try_clone().ok());
        let inner = Arc::new(Inner::new(&opts, direct));
        let (rd, wr) = tokio::io::split(trunk);
        tokio::spawn(reader::run(Arc::clone(&inner), rd));
        tokio::spawn(writer::run(Arc::clone(&inner), wr));
        if !inner.opts.blocked_read {
            inner.unblock();
        }
        tracing::debug!(
            blocked = inner.opts.blocked_read,
            read_queue_len = inner.opts.read_queue_len,
            max_write_frame = inner.opts.max_write_frame,
            "mux created"
        );
        Mux {
            guard: Arc::new(Guard { inner }),
        }
    }

    /// Opens the logical connection `id`.
    ///
    /// # Errors
    ///
    /// * [`MuxError::ReservedConnId`] for id 0 (text `ConnID 0 is reserved`);
    /// * [`MuxError::AlreadyOpen`] if a [`MuxConn`] for `id` is still open on this mux
    ///   (unlike the Go reference, which hands out the same connection again: a byte
    ///   stream must have one reader). Once that connection is dropped or shut down the
    ///   id can be opened again, as a fresh connection;
    /// * [`MuxError::Closed`] if the mux is closed.
    pub fn open(&self, id: ConnId) -> Result<MuxConn, MuxError> {
        let queue = self.guard.inner.open(id)?;
        Ok(MuxConn::new(Arc::clone(&self.guard), queue))
    }

    /// Lets the reader start reading the trunk when the mux was created with
    /// [`MuxOptions::blocked_read`]. Idempotent; does nothing otherwise.
    pub fn unblock(&self) {
        self.guard.inner.unblock();
    }

    /// Closes the mux: all connections, the reader, then the trunk (after at most 2 s
    /// spent delivering writes that were already accepted). Idempotent. Records no error.
    pub fn close(&self) {
        self.guard.inner.close();
    }

    /// Resolves once the mux is closed, for whatever reason.
    pub async fn closed(&self) {
        let mut rx = self.guard.inner.subscribe_closed();
        wait_closed(&mut rx).await;
    }

    /// True once the mux is closed.
    pub fn is_closed(&self) -> bool {
        self.guard.inner.is_closed()
    }

    /// The first error that closed the mux: [`MuxError::Eof`] when the peer closed the
    /// trunk, `None` while open or after a plain [`Mux::close`].
    pub fn error(&self) -> Option<MuxError> {
        self.guard.inner.error()
    }

    /// The options in effect (after clamping out-of-range values).
    pub fn options(&self) -> &MuxOptions {
        &self.guard.inner.opts
    }
}
