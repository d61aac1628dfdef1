//! The ttRPC [`Client`]: concurrent unary calls multiplexed by stream id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::busy_poll::{poll_until, Gate};
use crate::code::Code;
use crate::error::Error;
use crate::frame::{self, FrameReader, Inbound, MAX_MESSAGE_LEN};
use crate::outbox::Outbox;
use crate::proto;
use crate::status::Status;

/// What the reader hands to a waiting call: the raw response envelope, or a
/// per-call failure.
type Reply = Result<Bytes, Error>;

/// A ttRPC client over one byte stream.
///
/// Calls may be issued concurrently from any number of tasks (the client is a
/// cheap [`Clone`]); each gets its own odd stream id (1, 3, 5, ...) and
/// responses are matched by id, in whatever order they arrive. A request is
/// written to the stream by the calling task; a reader task, and a writer task
/// that finishes what the stream could not take at once, run on the tokio
/// runtime the client was created on.
///
/// The connection is closed by [`Client::close`], when the peer closes it or
/// fails, or when the last clone of the client is dropped. Pending calls then
/// fail with [`Error::Closed`].
///
/// ```
/// use std::sync::Arc;
/// use nri_ttrpc::{Client, Server, Status};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (client_io, server_io) = tokio::net::UnixStream::pair()?;
///
/// let mut server = Server::new();
/// server.register("demo.Echo", "Echo", |_ctx, payload: Vec<u8>| {
///     Box::pin(async move { Ok::<_, Status>(payload) }) as nri_ttrpc::BoxFuture<'static, _>
/// });
/// tokio::spawn(Arc::new(server).serve(server_io));
///
/// let client = Client::new(client_io);
/// let reply = client.call("demo.Echo", "Echo", b"hi".to_vec(), None).await?;
/// assert_eq!(reply, b"hi");
/// client.close();
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    handle: Arc<Handle>,
    /// How long a call polls for its response before it waits to be woken
    /// (see [`Client::with_busy_poll`]); zero: it waits at once.
    busy_poll: Duration,
}

/// Owned by the `Client` clones only; closes the connection when the last
/// clone goes away. The background tasks hold `Shared`, not this.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close();
    }
}

struct Shared {
    state: Mutex<State>,
    closed: watch::Sender<bool>,
    outbox: Arc<Outbox<()>>,
    /// Whether the next call polls (see [`Client::with_busy_poll`]).
    gate: Gate,
}

struct State {
    next_id: u32,
    pending: HashMap<u32, oneshot::Sender<Reply>>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the client closed and fails every pending call with `Closed`
    /// (by dropping their reply senders).
    fn close(&self) {
        let pending = {
            let mut st = self.state();
            // Closed under the lock, so no call can be registered after the
            // pending ones were taken: the outbox refuses its frame.
            self.outbox.close();
            std::mem::take(&mut st.pending)
        };
        if !pending.is_empty() {
            tracing::debug!(
                pending = pending.len(),
                "ttrpc client closed with pending calls"
            );
        }
        drop(pending);
        self.closed.send_replace(true);
    }

    /// Assigns the next stream id to `frame`, registers the call and sends
    /// the frame, all under one lock so ids reach the wire in increasing order.
    fn start_call(&self, mut frame: Vec<u8>, reply: oneshot::Sender<Reply>) -> Result<u32, Error> {
        let mut st = self.state();
        let id = st.next_id;
        let next = id
            .checked_add(2)
            .ok_or_else(|| Error::Protocol("stream ids exhausted".into()))?;
        frame::set_stream_id(&mut frame, id);
        self.outbox.send(frame, ()).map_err(|_| Error::Closed)?;
        st.next_id = next;
        st.pending.insert(id, reply);
        Ok(id)
    }

    /// Hands a reply to the call waiting on `id`. Returns false when no call
    /// waits (it timed out, was dropped, or the id was never used).
    fn deliver(&self, id: u32, reply: Reply) -> bool {
        let waiter = self.state().pending.remove(&id);
        match waiter {
            Some(tx) => {
                // The receiver may be gone already; that call was abandoned.
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }

    fn is_pending(&self, id: u32) -> bool {
        self.state().pending.contains_key(&id)
    }

    fn forget(&self, id: u32) {
        self.state().pending.remove(&id);
    }
}

/// Removes a call's pending entry when the call ends for any reason
/// (response, timeout, or the caller dropping the future).
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u32,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.forget(self.id);
    }
}

impl Client {
    /// Creates a client over `stream` and starts its reader and writer tasks.
    ///
    /// When `stream` is an `nri_mux::MuxConn` (with the default feature
    /// `mux`), a response that arrives whole in one piece of the mux is
    /// taken as a slice of that piece instead of being copied.
    ///
    /// # Panics
    ///
    /// Must be called from within a tokio runtime (it spawns tasks).
    pub fn new<S>(stream: S) -> Client
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (source, wr) = frame::split(stream);
        let (closed, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next_id: 1,
                pending: HashMap::new(),
            }),
            closed,
            outbox: Arc::new(Outbox::new(wr)),
            gate: Gate::new(),
        });
        tokio::spawn(read_loop(shared.clone(), FrameReader::from_source(source)));
        tokio::spawn(write_loop(shared.clone()));
        Client {
            handle: Arc::new(Handle { shared }),
            busy_poll: Duration::ZERO,
        }
    }

    /// Makes each call of this client value (and of clones made from it
    /// afterwards) poll for its response for up to `window` after sending
    /// the request, before it waits to be woken. Zero, the default, turns
    /// this off.
    ///
    /// While it polls, the calling thread yields the CPU to any other thread
    /// waiting for it (the peer may have been woken on this CPU) and the
    /// calling task yields to the tokio runtime after each look at its
    /// response, so the runtime keeps checking its sockets without blocking
    /// instead of putting the thread to sleep in the kernel. A response that
    /// arrives within the window is taken without the thread being woken,
    /// which on a machine with a core to spare saves the wake-up's latency;
    /// the price is the CPU time of the polling,
    /// up to `window` per call. Other tasks of the runtime run between the
    /// looks. The call's timeout still applies: polling stops at the
    /// deadline. On a machine with one core the poller competes with the
    /// peer it waits for, so leave it off there.
    ///
    /// A call polls only while most recent responses on its connection came
    /// within the window (a moving average in which each response weighs a
    /// quarter). A peer slower than the window thus costs a few windows of
    /// polling, not one per call; a peer that answers quickly only now and
    /// then is not polled for; polling resumes after a few quick responses.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use nri_ttrpc::{Client, Server, Status};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (client_io, server_io) = tokio::net::UnixStream::pair()?;
    /// let mut server = Server::new();
    /// server.register("demo.Echo", "Echo", |_ctx, payload: Vec<u8>| {
    ///     Box::pin(async move { Ok::<_, Status>(payload) }) as nri_ttrpc::BoxFuture<'static, _>
    /// });
    /// tokio::spawn(Arc::new(server).serve(server_io));
    ///
    /// let client = Client::new(client_io).with_busy_poll(Duration::from_micros(100));
    /// assert_eq!(client.busy_poll(), Duration::from_micros(100));
    /// let reply = client.call("demo.Echo", "Echo", b"hi".to_vec(), None).await?;
    /// assert_eq!(reply, b"hi");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_busy_poll(mut self, window: Duration) -> Client {
        self.busy_poll = window;
        self
    }

    /// The polling window set by [`Client::with_busy_poll`] (zero: off).
    pub fn busy_poll(&self) -> Duration {
        self.busy_poll
    }

    /// Calls `service`/`method` with an already encoded request message and
    /// returns the encoded response message.
    ///
    /// With a `timeout`, the request carries it in `timeout_nano` (so the
    /// server can apply the same deadline) and the call fails locally with
    /// [`Error::Timeout`] once it passes; a response arriving later is
    /// dropped.
    ///
    /// Errors: [`Error::Oversized`] if the request envelope exceeds
    /// [`MAX_MESSAGE_LEN`] (nothing is sent), [`Error::Status`] if the server
    /// answered with a non-`OK` status, [`Error::Closed`] if the connection is
    /// or becomes closed before the response, [`Error::Protocol`] if the
    /// response cannot be decoded.
    pub async fn call(
        &self,
        service: &str,
        method: &str,
        payload: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, Error> {
        self.call_with_metadata::<&str, &str>(service, method, payload, timeout, &[])
            .await
    }

    /// Like [`Client::call`], sending `metadata` in the request envelope
    /// (`Request.metadata`, field 5: one `KeyValue{key = 1, value = 2}` per
    /// entry, in the given order).
    ///
    /// Keys are lowercased, as Go's `ttrpc.MD` stores them (Go servers look
    /// keys up lowercased, so a mixed-case key would not be found there).
    /// Repeated keys are sent as repeated entries, which Go collects into
    /// one key with several values. Go's client sends entries in map order,
    /// which is unspecified; the server side of either implementation does
    /// not depend on order.
    ///
    /// This is how trace context crosses the wire (see [`crate::trace`]):
    ///
    /// ```
    /// use std::sync::Arc;
    /// use nri_ttrpc::{Client, Server, TraceContext};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut server = Server::new();
    /// server.register("demo.Trace", "Id", |ctx, _payload: Vec<u8>| {
    ///     let id = TraceContext::from_metadata(&ctx.metadata).map(|t| t.trace_id_hex());
    ///     Box::pin(async move { Ok(id.unwrap_or_default().into_bytes()) })
    ///         as nri_ttrpc::BoxFuture<'static, _>
    /// });
    /// let (client_io, server_io) = tokio::net::UnixStream::pair()?;
    /// tokio::spawn(Arc::new(server).serve(server_io));
    /// let client = Client::new(client_io);
    ///
    /// let trace = TraceContext::generate();
    /// let reply = client
    ///     .call_with_metadata("demo.Trace", "Id", Vec::new(), None, &trace.to_metadata())
    ///     .await?;
    /// assert_eq!(reply, trace.trace_id_hex().into_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_with_metadata<K, V>(
        &self,
        service: &str,
        method: &str,
        payload: Vec<u8>,
        timeout: Option<Duration>,
        metadata: &[(K, V)],
    ) -> Result<Vec<u8>, Error>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let reply = self
            .round_trip(service, method, &payload[..], timeout, metadata)
            .await?;
        Ok(Vec::from(reply))
    }

    /// Sends one request whose payload is `payload` and returns the
    /// response's payload, sharing the buffer the response frame was read
    /// into.
    async fn round_trip<K, V>(
        &self,
        service: &str,
        method: &str,
        payload: &(impl frame::Payload + ?Sized),
        timeout: Option<Duration>,
        metadata: &[(K, V)],
    ) -> Result<Bytes, Error>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let shared = &*self.handle.shared;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let metadata: Vec<proto::KeyValue> = metadata
            .iter()
            .map(|(k, v)| proto::KeyValue {
                key: k.as_ref().to_ascii_lowercase(),
                value: v.as_ref().to_owned(),
            })
            .collect();
        let frame = frame::encode_request_frame(
            service,
            method,
            payload,
            timeout.map(timeout_nano).unwrap_or(0),
            &metadata,
        )?;
        drop(metadata);

        let (tx, mut rx) = oneshot::channel();
        let id = shared.start_call(frame, tx)?;
        let _guard = PendingGuard { shared, id };
        tracing::debug!(stream_id = id, service, method, "ttrpc call sent");

        // The clock is read only when polling is on: the gate needs how
        // long the response took.
        let window = self.busy_poll;
        let sent = (!window.is_zero()).then(std::time::Instant::now);
        let polled = match sent.is_some() && shared.gate.is_open() {
            true => poll_until(&mut rx, window, deadline).await,
            false => None,
        };
        let waited = match (polled, deadline) {
            (Some(reply), _) => Ok(reply),
            (None, Some(deadline)) => tokio::time::timeout_at(deadline, rx).await,
            (None, None) => Ok(rx.await),
        };
        if let Some(sent) = sent {
            shared.gate.record(sent.elapsed(), window);
        }
        let Ok(reply) = waited else {
            tracing::debug!(stream_id = id, service, method, "ttrpc call timed out");
            return Err(Error::Timeout);
        };
        let bytes = reply.map_err(|_| Error::Closed)??;
        let response = proto::ResponseIn::decode(bytes)
            .map_err(|e| Error::Protocol(format!("invalid response envelope: {e}")))?;
        match response.status {
            Some(st) if st.code != i32::from(Code::Ok) => Err(Error::Status(Status::from(st))),
            _ => Ok(response.payload),
        }
    }

    /// Like [`Client::call`], encoding `request` and decoding the response as
    /// `Resp`. A response that does not decode fails with
    /// [`Error::Protocol`].
    pub async fn call_msg<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        timeout: Option<Duration>,
    ) -> Result<Resp, Error>
    where
        Req: Message,
        Resp: Message + Default,
    {
        self.call_msg_with_metadata::<_, _, &str, &str>(service, method, request, timeout, &[])
            .await
    }

    /// Like [`Client::call_msg`], with request metadata as in
    /// [`Client::call_with_metadata`].
    ///
    /// ```no_run
    /// # async fn demo(client: &nri_ttrpc::Client) -> Result<(), nri_ttrpc::Error> {
    /// use nri_ttrpc::TraceContext;
    ///
    /// let trace = TraceContext::generate();
    /// let reply: Vec<u8> = client
    ///     .call_msg_with_metadata("svc", "M", &Vec::<u8>::new(), None, &trace.to_metadata())
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_msg_with_metadata<Req, Resp, K, V>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        timeout: Option<Duration>,
        metadata: &[(K, V)],
    ) -> Result<Resp, Error>
    where
        Req: Message,
        Resp: Message + Default,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let reply = self
            .round_trip(service, method, &frame::InPlace(request), timeout, metadata)
            .await?;
        Resp::decode(reply)
            .map_err(|e| Error::Protocol(format!("invalid {service}/{method} response: {e}")))
    }

    /// Closes the connection. Pending and later calls fail with
    /// [`Error::Closed`]; the stream is dropped once the background tasks
    /// notice.
    pub fn close(&self) {
        self.handle.shared.close();
    }

    /// Resolves once the connection is closed, locally or by the peer.
    pub async fn closed(&self) {
        let mut rx = self.handle.shared.closed.subscribe();
        // The sender lives as long as `self`, so this only ends on `true`.
        let _ = rx.wait_for(|closed| *closed).await;
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        *self.handle.shared.closed.borrow()
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// Converts a timeout into `timeout_nano`: saturating, and at least 1 so a
/// zero timeout still reads as "has a deadline" on the server.
fn timeout_nano(timeout: Duration) -> i64 {
    i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX).max(1)
}

async fn wait_closed(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|closed| *closed).await;
}

async fn read_loop(shared: Arc<Shared>, mut reader: FrameReader) {
    let mut closed = shared.closed.subscribe();
    // One wait for the close across all reads: made anew for every frame,
    // it would register with (and leave) the watch's waiters each time.
    let close = wait_closed(&mut closed);
    tokio::pin!(close);
    loop {
        let inbound = tokio::select! {
            biased;
            _ = &mut close => break,
            inbound = reader.next() => inbound,
        };
        match inbound {
            Ok(Inbound::Eof) => {
                tracing::debug!("ttrpc client: peer closed the connection");
                break;
            }
            Err(err) => {
                tracing::debug!(error = %err, "ttrpc client: connection failed");
                break;
            }
            Ok(Inbound::Oversized(header)) => {
                let status = Status::new(
                    Code::ResourceExhausted,
                    frame::oversize_message(header.length as usize, MAX_MESSAGE_LEN),
                );
                if !shared.deliver(header.stream_id, Err(Error::Status(status))) {
                    tracing::debug!(
                        stream_id = header.stream_id,
                        "ttrpc client: dropped oversized message for inactive stream"
                    );
                }
            }
            Ok(Inbound::Frame(header, payload)) => {
                let id = header.stream_id;
                if header.kind == frame::MESSAGE_TYPE_RESPONSE {
                    if !shared.deliver(id, Ok(payload)) {
                        tracing::debug!(
                            stream_id = id,
                            "ttrpc client: dropped response for inactive stream"
                        );
                    }
                } else if shared.is_pending(id) {
                    let err = Error::Protocol(format!(
                        "unexpected {} message (type {}) on stream {id}",
                        frame::kind_name(header.kind),
                        header.kind
                    ));
                    shared.deliver(id, Err(err));
                } else {
                    tracing::debug!(
                        stream_id = id,
                        kind = header.kind,
                        "ttrpc client: ignored message"
                    );
                }
            }
        }
    }
    shared.close();
}

/// Finishes the writes the stream could not take at once; closes the client
/// when a write fails.
async fn write_loop(shared: Arc<Shared>) {
    if let Err(err) = Arc::clone(&shared.outbox).drive().await {
        tracing::debug!(error = %err, "ttrpc client: write failed");
    }
    shared.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_nano_saturates_and_is_positive() {
        assert_eq!(timeout_nano(Duration::from_secs(2)), 2_000_000_000);
        assert_eq!(timeout_nano(Duration::ZERO), 1);
        assert_eq!(timeout_nano(Duration::MAX), i64::MAX);
    }

    #[tokio::test]
    async fn dropping_last_clone_closes_the_stream() {
        let (a, mut b) = tokio::io::duplex(1024);
        let client = Client::new(a);
        let clone = client.clone();
        drop(client);
        assert!(!clone.is_closed());
        drop(clone);
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut b, &mut buf),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(n, 0);
    }
}
