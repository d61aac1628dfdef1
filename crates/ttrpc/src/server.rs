//! The ttRPC [`Server`]: dispatches requests to registered handlers.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{self, JoinSet};
use tokio::time::Instant;

use crate::code::Code;
use crate::context::RequestContext;
use crate::error::Error;
use crate::frame::{
    self, FrameHeader, FrameReader, Inbound, MAX_MESSAGE_LEN, MESSAGE_TYPE_REQUEST,
    MESSAGE_TYPE_RESPONSE,
};
use crate::outbox::Outbox;
use crate::proto;
use crate::status::Status;

/// Default of [`Server::set_max_in_flight`]: requests of one connection that
/// may be in flight at once (handlers running plus replies not yet written).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A registered method implementation: takes the call context and the encoded
/// request message, returns the encoded response message or a status.
pub type Handler = Arc<
    dyn Fn(RequestContext, Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, Status>> + Send + Sync,
>;

/// What a handler answers: an encoded response message, or (typed
/// handlers) the whole response frame with stream id 0, the message
/// encoded straight into it.
enum Answer {
    Payload(Vec<u8>),
    Frame(Vec<u8>),
}

/// A handler as the server stores it: the request payload shares the
/// buffer its frame was read into.
type Route =
    Arc<dyn Fn(RequestContext, Bytes) -> BoxFuture<'static, Result<Answer, Status>> + Send + Sync>;

/// A ttRPC server: a table of `(service, method)` handlers, served over any
/// number of connections with [`Server::serve`].
///
/// A handler is first run on the connection's task and its reply written
/// from there; a handler that has to wait goes on in a task of its own, so
/// slow handlers do not hold up other calls on the same connection (the part
/// of a handler before its first wait holds up the connection's reading,
/// as a handler that never waits would hold up its thread). Behaviour
/// follows containerd's ttRPC:
///
/// * unknown service: status `Unimplemented`, message `service {name}`;
///   unknown method: `Unimplemented`, `method {name}`;
/// * a request whose `timeout_nano` passes while its handler runs is not
///   answered: the handler is dropped and its slot freed, and the caller's
///   own timeout ends the call. Go's server sends nothing for a handler that
///   does not return either; a `DeadlineExceeded` status sent at that moment
///   would race the caller's timer, and containerd's NRI treats the two
///   differently (a timeout drops the plugin and the request goes on without
///   it; a status fails the request);
/// * a request larger than [`MAX_MESSAGE_LEN`] is discarded unread and
///   answered with `ResourceExhausted`; a response that would be larger is
///   replaced by a `ResourceExhausted` status;
/// * even stream ids and stream ids that do not increase are answered with
///   `InvalidArgument`; an undecodable request envelope likewise;
/// * a handler that panics is answered with `Internal`;
/// * streaming `data` messages and unknown message types are ignored (logged
///   at debug level): only unary calls are supported.
///
/// # Flow control
///
/// Each connection has at most [`max_in_flight`](Server::max_in_flight)
/// requests in flight: a request takes one of these slots when it is read
/// and gives it back once its reply has been written to the stream (and
/// flushed). While every slot is taken the server reads nothing more from
/// that connection, so a peer that keeps sending requests but does not read
/// the replies is held up by its own blocked writes instead of making the
/// server queue work and replies without limit. Memory per connection is
/// therefore bounded by `max_in_flight` requests and replies (plus the read
/// buffer and what the transport itself buffers). Other connections are
/// not affected. See the crate README for how this interacts with a
/// multiplexed transport.
///
/// ```
/// use std::sync::Arc;
/// use nri_ttrpc::{Client, Code, Server, Status};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut server = Server::new();
/// // A typed handler; `()` is prost's empty message, real services use
/// // their own prost message types.
/// server.register_msg("demo.Greeter", "Fail", |_ctx, _req: ()| async move {
///     Err::<(), _>(Status::new(Code::NotFound, "nobody here"))
/// });
/// let server = Arc::new(server);
///
/// let (a, b) = tokio::net::UnixStream::pair()?;
/// tokio::spawn(server.clone().serve(b));
/// let client = Client::new(a);
/// let err = client.call_msg::<(), ()>("demo.Greeter", "Fail", &(), None).await.unwrap_err();
/// assert_eq!(err.code(), Code::NotFound);
/// let err = client.call("demo.Missing", "X", Vec::new(), None).await.unwrap_err();
/// assert_eq!(err.code(), Code::Unimplemented);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Server {
    services: HashMap<String, HashMap<String, Route>>,
    max_in_flight: usize,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            services: HashMap::new(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut methods: Vec<String> = self
            .services
            .iter()
            .flat_map(|(s, ms)| ms.keys().map(move |m| format!("{s}/{m}")))
            .collect();
        methods.sort();
        f.debug_struct("Server")
            .field("methods", &methods)
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

impl Server {
    /// Creates a server with no methods.
    pub fn new() -> Self {
        Server::default()
    }

    /// Sets how many requests of one connection may be in flight at once:
    /// handlers running plus replies not yet written. While a connection is
    /// at this bound the server stops reading from it (see
    /// [Flow control](Server#flow-control)). A value of 0 is treated as
    /// one. Default [`DEFAULT_MAX_IN_FLIGHT`]. Applies to connections served
    /// afterwards.
    ///
    /// ```
    /// use nri_ttrpc::{Server, DEFAULT_MAX_IN_FLIGHT};
    ///
    /// let mut server = Server::new();
    /// assert_eq!(server.max_in_flight(), DEFAULT_MAX_IN_FLIGHT);
    /// server.set_max_in_flight(16);
    /// assert_eq!(server.max_in_flight(), 16);
    /// server.set_max_in_flight(0);
    /// assert_eq!(server.max_in_flight(), 1);
    /// ```
    pub fn set_max_in_flight(&mut self, max: usize) -> &mut Self {
        self.max_in_flight = max.max(1);
        self
    }

    /// The per-connection bound on requests in flight
    /// ([`set_max_in_flight`](Server::set_max_in_flight)).
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// Registers `handler` for `service`/`method`, replacing an earlier
    /// registration of the same pair.
    pub fn register<H>(&mut self, service: &str, method: &str, handler: H)
    where
        H: Fn(RequestContext, Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, Status>>
            + Send
            + Sync
            + 'static,
    {
        self.route(
            service,
            method,
            Arc::new(move |ctx, payload: Bytes| {
                let call = handler(ctx, Vec::from(payload));
                Box::pin(async move { call.await.map(Answer::Payload) })
            }),
        );
    }

    fn route(&mut self, service: &str, method: &str, route: Route) {
        let replaced = self
            .services
            .entry(service.to_owned())
            .or_default()
            .insert(method.to_owned(), route);
        if replaced.is_some() {
            tracing::debug!(service, method, "ttrpc server: handler replaced");
        }
    }

    /// Registers a typed handler: the request payload is decoded as `Req`
    /// and the returned `Resp` encoded.
    ///
    /// A payload that does not decode is answered, as Go's ttRPC does, with
    /// status `Internal` and message
    /// `ttrpc: error unmarshalling payload: {error}`.
    pub fn register_msg<Req, Resp, F, Fut>(&mut self, service: &str, method: &str, f: F)
    where
        Req: Message + Default + 'static,
        Resp: Message + 'static,
        F: Fn(RequestContext, Req) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
    {
        self.route(
            service,
            method,
            // Only the decoding and the call depend on the method: what follows
            // the call is shared by every method with the same response future.
            Arc::new(move |ctx, payload: Bytes| match Req::decode(payload) {
                Ok(req) => respond(f(ctx, req)),
                Err(e) => {
                    let status =
                        Status::internal(format!("ttrpc: error unmarshalling payload: {e}"));
                    Box::pin(std::future::ready(Err(status)))
                }
            }),
        );
    }

    /// Whether a handler is registered for `service`/`method`.
    pub fn has_method(&self, service: &str, method: &str) -> bool {
        self.services
            .get(service)
            .is_some_and(|methods| methods.contains_key(method))
    }

    /// Serves requests arriving on `stream` until the peer closes it.
    ///
    /// When `stream` is an `nri_mux::MuxConn` (with the default feature
    /// `mux`), a request that arrives whole in one piece of the mux is
    /// decoded from that piece instead of a copy of it.
    ///
    /// Returns `Ok(())` when the peer closes the stream between messages,
    /// and an error when the stream fails or the peer breaks the framing
    /// (e.g. a truncated message). Either way, handlers still running for
    /// this connection are cancelled and their responses dropped. Dropping
    /// the returned future stops serving the same way.
    ///
    /// At most [`max_in_flight`](Server::max_in_flight) requests of the
    /// connection are in flight at once; at that bound reading pauses until
    /// a reply has been written.
    pub async fn serve<S>(self: Arc<Self>, stream: S) -> Result<(), Error>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (source, wr) = crate::frame::split(stream);
        // Unbounded, but each reply in it holds one of the connection's slots,
        // so it never holds more than `max_in_flight`.
        let outbox = Arc::new(Outbox::<Slot>::new(wr));
        let writer = AbortOnDrop(tokio::spawn(Arc::clone(&outbox).drive()));
        let slots = Arc::new(Semaphore::new(self.max_in_flight));
        let mut conn = Connection {
            server: self,
            reader: FrameReader::from_source(source),
            outbox,
            slots,
            slot: None,
            handlers: JoinSet::new(),
            running: HashMap::new(),
            last_stream_id: 0,
            paused: false,
        };
        conn.run(writer).await
    }
}

/// One of a connection's in-flight slots: taken before a request is read,
/// released when its reply has been written (or when it needs no reply).
type Slot = OwnedSemaphorePermit;

/// A handler's call, wrapped to answer with its encoded response frame.
type Call = BoxFuture<'static, Option<Vec<u8>>>;

/// Aborts a spawned task when dropped.
struct AbortOnDrop<T>(task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Per-connection state of [`Server::serve`].
struct Connection {
    server: Arc<Server>,
    reader: FrameReader,
    outbox: Arc<Outbox<Slot>>,
    /// The connection's in-flight slots.
    slots: Arc<Semaphore>,
    /// The slot for the next request, taken before reading it.
    slot: Option<Slot>,
    /// Handler tasks; each returns its encoded response frame.
    handlers: JoinSet<Option<Vec<u8>>>,
    /// Stream id and slot of each running handler task.
    running: HashMap<task::Id, (u32, Slot)>,
    last_stream_id: u32,
    /// Reading is paused for want of a slot.
    paused: bool,
}

impl Drop for Connection {
    /// The stream is dropped with the connection, whatever ends it.
    fn drop(&mut self) {
        self.outbox.close();
    }
}

impl Connection {
    async fn run(&mut self, mut writer: AbortOnDrop<std::io::Result<()>>) -> Result<(), Error> {
        loop {
            // A request is read only with a slot for it in hand; an unused
            // slot (a message that needs no reply) serves the next one.
            if self.slot.is_none() {
                match self.slots.clone().try_acquire_owned() {
                    Ok(slot) => self.got_slot(slot),
                    Err(_) if !self.paused => {
                        self.paused = true;
                        tracing::debug!(
                            max_in_flight = self.server.max_in_flight,
                            "ttrpc server: too many requests in flight, reading paused"
                        );
                    }
                    Err(_) => {}
                }
            }
            tokio::select! {
                slot = self.slots.clone().acquire_owned(), if self.slot.is_none() => match slot {
                    Ok(slot) => self.got_slot(slot),
                    // The semaphore is never closed.
                    Err(_) => return Err(Error::Closed),
                },
                inbound = self.reader.next(), if self.slot.is_some() => match inbound {
                    Ok(Inbound::Eof) => {
                        tracing::debug!("ttrpc server: peer closed the connection");
                        return Ok(());
                    }
                    Err(err) => {
                        tracing::debug!(error = %err, "ttrpc server: connection failed");
                        return Err(err);
                    }
                    Ok(Inbound::Oversized(header)) => {
                        tracing::debug!(
                            stream_id = header.stream_id,
                            len = header.length,
                            "ttrpc server: oversized request discarded"
                        );
                        let status = Status::new(
                            Code::ResourceExhausted,
                            frame::oversize_message(header.length as usize, MAX_MESSAGE_LEN),
                        );
                        self.answer(header.stream_id, status);
                    }
                    Ok(Inbound::Frame(header, payload)) => {
                        if let Some((id, slot, call)) = self.dispatch(header, payload) {
                            self.start(id, slot, call).await;
                        }
                    }
                },
                Some(joined) = self.handlers.join_next_with_id() => self.reap(joined),
                result = &mut writer.0 => {
                    return match result {
                        Ok(Ok(())) => Err(Error::Closed),
                        Ok(Err(err)) => {
                            tracing::debug!(error = %err, "ttrpc server: write failed");
                            Err(Error::Io(err))
                        }
                        Err(err) => Err(Error::Protocol(format!("response writer failed: {err}"))),
                    };
                }
            }
        }
    }

    /// Checks a request and makes its handler's call; `None` when it was
    /// answered (or ignored) here.
    fn dispatch(&mut self, header: FrameHeader, payload: Bytes) -> Option<(u32, Slot, Call)> {
        let id = header.stream_id;
        if id % 2 != 1 {
            self.answer(
                id,
                Status::invalid_argument("StreamID must be odd for client initiated streams"),
            );
            return None;
        }
        if header.kind != MESSAGE_TYPE_REQUEST {
            tracing::debug!(
                stream_id = id,
                kind = header.kind,
                "ttrpc server: ignored {} message",
                frame::kind_name(header.kind)
            );
            return None;
        }
        if id <= self.last_stream_id {
            self.answer(
                id,
                Status::invalid_argument("StreamID cannot be re-used and must increment"),
            );
            return None;
        }
        self.last_stream_id = id;

        let mut request = match proto::RequestIn::decode(payload) {
            Ok(request) => request,
            Err(e) => {
                self.answer(
                    id,
                    Status::invalid_argument(format!("unmarshal request error: {e}")),
                );
                return None;
            }
        };
        let Some(methods) = self.server.services.get(&request.service) else {
            tracing::debug!(stream_id = id, service = %request.service, "ttrpc server: unknown service");
            let message = format!("service {}", request.service);
            self.answer(id, Status::unimplemented(message));
            return None;
        };
        let Some(handler) = methods.get(&request.method).cloned() else {
            tracing::debug!(
                stream_id = id,
                service = %request.service,
                method = %request.method,
                "ttrpc server: unknown method"
            );
            let message = format!("method {}", request.method);
            self.answer(id, Status::unimplemented(message));
            return None;
        };
        let Some(slot) = self.slot.take() else {
            // Not reached: a request is only read with a slot in hand.
            tracing::warn!(
                stream_id = id,
                "ttrpc server: request without a slot dropped"
            );
            return None;
        };

        let ctx = RequestContext::from_request(&mut request, Instant::now());
        tracing::debug!(
            stream_id = id,
            service = %ctx.service,
            method = %ctx.method,
            "ttrpc server: request"
        );
        let deadline = ctx.deadline;
        let payload = std::mem::take(&mut request.payload);
        let call: Call = Box::pin(async move {
            let call = handler(ctx, payload);
            let result = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, call).await {
                    Ok(result) => result,
                    Err(_) => {
                        // No answer: the caller times out on its own clock.
                        // A status sent now would race the caller's timer,
                        // and containerd's NRI drops a plugin that times out
                        // but fails the request on a DeadlineExceeded status.
                        tracing::debug!(
                            stream_id = id,
                            "ttrpc server: handler deadline exceeded, call dropped unanswered"
                        );
                        return None;
                    }
                },
                None => call.await,
            };
            encode_response(id, result)
        });
        Some((id, slot, call))
    }

    /// Runs a handler's call on this task until it first waits: a call that
    /// completes at once (most do) is answered from here, without a task of its
    /// own; one that waits goes on in a task of its own, so that it holds up no
    /// other request.
    async fn start(&mut self, id: u32, slot: Slot, mut call: Call) {
        let polled = std::future::poll_fn(|cx| {
            Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| {
                call.as_mut().poll(cx)
            })))
        })
        .await;
        let frame = match polled {
            Ok(Poll::Ready(frame)) => frame,
            Ok(Poll::Pending) => {
                // The task polls the call again at once, so it waits on the task's
                // waker from then on.
                let task = self.handlers.spawn(call);
                self.running.insert(task.id(), (id, slot));
                return;
            }
            Err(_panic) => {
                tracing::warn!(stream_id = id, "ttrpc server: handler panicked");
                encode_response(id, Err(Status::internal("ttrpc: handler panicked")))
            }
        };
        if let Some(frame) = frame {
            send_reply(&self.outbox, id, frame, slot);
        }
    }

    /// Queues the reply of a finished handler task (or `Internal` for a
    /// panic) with the task's slot.
    fn reap(&mut self, joined: Result<(task::Id, Option<Vec<u8>>), task::JoinError>) {
        let (task_id, frame) = match joined {
            Ok((task_id, frame)) => (task_id, frame),
            Err(err) => {
                let frame = match (err.is_panic(), self.running.get(&err.id())) {
                    (true, Some(&(stream_id, _))) => {
                        tracing::warn!(stream_id, "ttrpc server: handler panicked");
                        encode_response(stream_id, Err(Status::internal("ttrpc: handler panicked")))
                    }
                    _ => None,
                };
                (err.id(), frame)
            }
        };
        let Some((stream_id, slot)) = self.running.remove(&task_id) else {
            return;
        };
        if let Some(frame) = frame {
            send_reply(&self.outbox, stream_id, frame, slot);
        }
    }

    /// Answers the request just read with `status`, using its slot.
    fn answer(&mut self, stream_id: u32, status: Status) {
        let Some(slot) = self.slot.take() else {
            // Not reached: a request is only read with a slot in hand.
            tracing::warn!(stream_id, "ttrpc server: reply without a slot dropped");
            return;
        };
        if let Some(frame) = encode_response(stream_id, Err(status)) {
            send_reply(&self.outbox, stream_id, frame, slot);
        }
    }

    fn got_slot(&mut self, slot: Slot) {
        if self.paused {
            self.paused = false;
            tracing::debug!("ttrpc server: reading resumed");
        }
        self.slot = Some(slot);
    }
}

/// Awaits a typed handler's call and encodes its response straight into the
/// response frame.
fn respond<Resp, Fut>(call: Fut) -> BoxFuture<'static, Result<Answer, Status>>
where
    Resp: Message + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    Box::pin(async move {
        let resp = call.await?;
        match frame::encode_ok_response_frame(0, &frame::InPlace(&resp)) {
            Ok(frame) => Ok(Answer::Frame(frame)),
            Err(Error::Oversized { len, max }) => {
                tracing::warn!(len, max, "ttrpc server: response too large");
                Err(Status::new(
                    Code::ResourceExhausted,
                    frame::oversize_message(len, max),
                ))
            }
            Err(e) => Err(Status::internal(format!("encoding response: {e}"))),
        }
    })
}

/// Writes a response frame; its slot is released once written.
fn send_reply(outbox: &Outbox<Slot>, stream_id: u32, frame: Vec<u8>, slot: Slot) {
    if outbox.send(frame, slot).is_err() {
        tracing::debug!(stream_id, "ttrpc server: connection gone, response dropped");
    }
}

/// Encodes the response for `stream_id`. A response that would exceed the
/// size limit is replaced by a `ResourceExhausted` status; `None` if even
/// that cannot be encoded.
fn encode_response(stream_id: u32, result: Result<Answer, Status>) -> Option<Vec<u8>> {
    // Go's ttRPC server leaves the status out of a successful response.
    let encoded = match result {
        Ok(Answer::Frame(mut frame)) => {
            frame::set_stream_id(&mut frame, stream_id);
            Ok(frame)
        }
        Ok(Answer::Payload(payload)) => frame::encode_ok_response_frame(stream_id, &payload[..]),
        Err(status) => {
            let response = proto::Response {
                status: Some(status.into()),
                payload: Vec::new(),
            };
            frame::encode_frame(stream_id, MESSAGE_TYPE_RESPONSE, 0, &response)
        }
    };
    let frame = match encoded {
        Ok(frame) => frame,
        Err(Error::Oversized { len, max }) => {
            tracing::warn!(stream_id, len, max, "ttrpc server: response too large");
            let response = proto::Response {
                status: Some(
                    Status::new(Code::ResourceExhausted, frame::oversize_message(len, max)).into(),
                ),
                payload: Vec::new(),
            };
            match frame::encode_frame(stream_id, MESSAGE_TYPE_RESPONSE, 0, &response) {
                Ok(frame) => frame,
                Err(err) => {
                    tracing::warn!(stream_id, error = %err, "ttrpc server: cannot encode response");
                    return None;
                }
            }
        }
        Err(err) => {
            tracing::warn!(stream_id, error = %err, "ttrpc server: cannot encode response");
            return None;
        }
    };
    Some(frame)
}
