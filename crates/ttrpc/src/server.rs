//! The ttRPC [`Server`]: dispatches requests to registered handlers.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::{self, JoinSet};
use tokio::time::Instant;

use crate::code::Code;
use crate::context::RequestContext;
use crate::error::Error;
use crate::frame::{
    self, FrameHeader, FrameReader, Inbound, MAX_MESSAGE_LEN, MESSAGE_TYPE_REQUEST,
    MESSAGE_TYPE_RESPONSE,
};
use crate::proto;
use crate::status::Status;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A registered method implementation: takes the call context and the encoded
/// request message, returns the encoded response message or a status.
pub type Handler = Arc<
    dyn Fn(RequestContext, Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, Status>> + Send + Sync,
>;

/// A ttRPC server: a table of `(service, method)` handlers, served over any
/// number of connections with [`Server::serve`].
///
/// Each request runs in its own task, so slow handlers do not hold up other
/// calls on the same connection. Behaviour follows containerd's ttRPC:
///
/// * unknown service: status `Unimplemented`, message `service {name}`;
///   unknown method: `Unimplemented`, `method {name}`;
/// * a request whose `timeout_nano` passes while its handler runs is answered
///   with `DeadlineExceeded` (`context deadline exceeded`);
/// * a request larger than [`MAX_MESSAGE_LEN`] is discarded unread and
///   answered with `ResourceExhausted`; a response that would be larger is
///   replaced by a `ResourceExhausted` status;
/// * even stream ids and stream ids that do not increase are answered with
///   `InvalidArgument`; an undecodable request envelope likewise;
/// * a handler that panics is answered with `Internal`;
/// * streaming `data` messages and unknown message types are ignored (logged
///   at debug level): only unary calls are supported.
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
#[derive(Default, Clone)]
pub struct Server {
    services: HashMap<String, HashMap<String, Handler>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut methods: Vec<String> = self
            .services
            .iter()
            .flat_map(|(s, ms)| ms.keys().map(move |m| format!("{s}/{m}")))
            .collect();
        methods.sort();
        f.debug_struct("Server").field("methods", &methods).finish()
    }
}

impl Server {
    /// Creates a server with no methods.
    pub fn new() -> Self {
        Server::default()
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
        let replaced = self
            .services
            .entry(service.to_owned())
            .or_default()
            .insert(method.to_owned(), Arc::new(handler));
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
        let f = Arc::new(f);
        self.register(service, method, move |ctx, payload: Vec<u8>| {
            let f = f.clone();
            Box::pin(async move {
                let req = Req::decode(payload.as_slice()).map_err(|e| {
                    Status::internal(format!("ttrpc: error unmarshalling payload: {e}"))
                })?;
                let resp = f(ctx, req).await?;
                Ok(resp.encode_to_vec())
            })
        });
    }

    /// Whether a handler is registered for `service`/`method`.
    pub fn has_method(&self, service: &str, method: &str) -> bool {
        self.services
            .get(service)
            .is_some_and(|methods| methods.contains_key(method))
    }

    /// Serves requests arriving on `stream` until the peer closes it.
    ///
    /// Returns `Ok(())` when the peer closes the stream between messages,
    /// and an error when the stream fails or the peer breaks the framing
    /// (e.g. a truncated message). Either way, handlers still running for
    /// this connection are cancelled and their responses dropped. Dropping
    /// the returned future stops serving the same way.
    pub async fn serve<S>(self: Arc<Self>, stream: S) -> Result<(), Error>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (rd, wr) = tokio::io::split(stream);
        let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = AbortOnDrop(tokio::spawn(write_loop(rx, wr)));
        let mut conn = Connection {
            server: self,
            reader: FrameReader::new(rd),
            outbound: tx,
            handlers: JoinSet::new(),
            running: HashMap::new(),
            last_stream_id: 0,
        };
        conn.run(writer).await
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop<T>(task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Per-connection state of [`Server::serve`].
struct Connection<R> {
    server: Arc<Server>,
    reader: FrameReader<R>,
    outbound: mpsc::UnboundedSender<Vec<u8>>,
    handlers: JoinSet<()>,
    /// Stream id of each running handler task, to answer for panics.
    running: HashMap<task::Id, u32>,
    last_stream_id: u32,
}

impl<R: AsyncRead + Unpin> Connection<R> {
    async fn run(&mut self, mut writer: AbortOnDrop<std::io::Result<()>>) -> Result<(), Error> {
        loop {
            tokio::select! {
                inbound = self.reader.next() => match inbound {
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
                        self.send_status(
                            header.stream_id,
                            Status::new(
                                Code::ResourceExhausted,
                                frame::oversize_message(header.length as usize, MAX_MESSAGE_LEN),
                            ),
                        );
                    }
                    Ok(Inbound::Frame(header, payload)) => self.dispatch(header, payload),
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

    fn dispatch(&mut self, header: FrameHeader, payload: Bytes) {
        let id = header.stream_id;
        if id % 2 != 1 {
            self.send_status(
                id,
                Status::invalid_argument("StreamID must be odd for client initiated streams"),
            );
            return;
        }
        if header.kind != MESSAGE_TYPE_REQUEST {
            tracing::debug!(
                stream_id = id,
                kind = header.kind,
                "ttrpc server: ignored {} message",
                frame::kind_name(header.kind)
            );
            return;
        }
        if id <= self.last_stream_id {
            self.send_status(
                id,
                Status::invalid_argument("StreamID cannot be re-used and must increment"),
            );
            return;
        }
        self.last_stream_id = id;

        let mut request = match proto::Request::decode(payload) {
            Ok(request) => request,
            Err(e) => {
                self.send_status(
                    id,
                    Status::invalid_argument(format!("unmarshal request error: {e}")),
                );
                return;
            }
        };
        let Some(methods) = self.server.services.get(&request.service) else {
            tracing::debug!(stream_id = id, service = %request.service, "ttrpc server: unknown service");
            let message = format!("service {}", request.service);
            self.send_status(id, Status::unimplemented(message));
            return;
        };
        let Some(handler) = methods.get(&request.method).cloned() else {
            tracing::debug!(
                stream_id = id,
                service = %request.service,
                method = %request.method,
                "ttrpc server: unknown method"
            );
            let message = format!("method {}", request.method);
            self.send_status(id, Status::unimplemented(message));
            return;
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
        let outbound = self.outbound.clone();
        let task = self.handlers.spawn(async move {
            let call = handler(ctx, payload);
            let result = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, call).await {
                    Ok(result) => result,
                    Err(_) => {
                        tracing::debug!(stream_id = id, "ttrpc server: handler deadline exceeded");
                        Err(Status::new(
                            Code::DeadlineExceeded,
                            "context deadline exceeded",
                        ))
                    }
                },
                None => call.await,
            };
            send_response(&outbound, id, result);
        });
        self.running.insert(task.id(), id);
    }

    fn reap(&mut self, joined: Result<(task::Id, ()), task::JoinError>) {
        match joined {
            Ok((task_id, ())) => {
                self.running.remove(&task_id);
            }
            Err(err) => {
                let stream_id = self.running.remove(&err.id());
                if let (true, Some(stream_id)) = (err.is_panic(), stream_id) {
                    tracing::warn!(stream_id, "ttrpc server: handler panicked");
                    self.send_status(stream_id, Status::internal("ttrpc: handler panicked"));
                }
            }
        }
    }

    fn send_status(&self, stream_id: u32, status: Status) {
        send_response(&self.outbound, stream_id, Err(status));
    }
}

/// Encodes and queues the response for `stream_id`. A response that would
/// exceed the size limit is replaced by a `ResourceExhausted` status.
fn send_response(
    outbound: &mpsc::UnboundedSender<Vec<u8>>,
    stream_id: u32,
    result: Result<Vec<u8>, Status>,
) {
    let response = match result {
        // Go's ttRPC server leaves the status out of a successful response.
        Ok(payload) => proto::Response {
            status: None,
            payload,
        },
        Err(status) => proto::Response {
            status: Some(status.into()),
            payload: Vec::new(),
        },
    };
    let frame = match frame::encode_frame(stream_id, MESSAGE_TYPE_RESPONSE, 0, &response) {
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
                    return;
                }
            }
        }
        Err(err) => {
            tracing::warn!(stream_id, error = %err, "ttrpc server: cannot encode response");
            return;
        }
    };
    if outbound.send(frame).is_err() {
        tracing::debug!(stream_id, "ttrpc server: connection gone, response dropped");
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
    mut writer: W,
) -> std::io::Result<()> {
    while let Some(frame) = frames.recv().await {
        frame::write_frame(&mut writer, &frame).await?;
    }
    Ok(())
}
