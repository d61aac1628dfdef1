//! Unary ttRPC over any async byte stream.
//!
//! ttRPC is containerd's lightweight RPC protocol; NRI uses it between the
//! runtime and its plugins. This crate implements the unary part of the
//! protocol, wire-compatible with `github.com/containerd/ttrpc` v1.2.7:
//!
//! * every message is a 10-byte header (payload length u32 BE, stream id
//!   u32 BE, message type u8, flags u8) followed by a protobuf envelope
//!   ([`proto::Request`] or [`proto::Response`]), see [`frame`];
//! * calls use odd stream ids 1, 3, 5, ... and may be answered in any order;
//! * outcomes are `google.rpc` status codes ([`Code`], [`Status`]);
//! * messages are limited to [`MAX_MESSAGE_LEN`] (4 MiB) in both directions;
//! * a call's timeout travels in `timeout_nano` and becomes the handler's
//!   deadline on the server.
//!
//! The transport is anything implementing `AsyncRead + AsyncWrite + Send +
//! Unpin + 'static`: a Unix socket, an in-memory duplex, or a logical
//! connection of a multiplexer. Each message is written with a single
//! `write_all` of header and payload, followed by a flush.
//!
//! The server keeps at most [`Server::max_in_flight`] requests of one
//! connection in flight (handlers running plus replies not yet written) and
//! stops reading the connection at that bound, so a peer that never reads
//! its replies cannot make it queue work without limit; see the
//! [flow control](Server#flow-control) notes and the README.
//!
//! Request metadata travels both ways: the client sends it with
//! [`Client::call_with_metadata`], handlers read it from
//! [`RequestContext::metadata`]. The [`trace`] module carries W3C trace
//! context (`traceparent`, `tracestate`) in it, as containerd's `otelttrpc`
//! interceptors do. Streaming RPCs are not supported.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use nri_ttrpc::{Client, Code, Server, Status};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = Server::new();
//! server.register("demo.Echo", "Echo", |_ctx, payload: Vec<u8>| {
//!     Box::pin(async move {
//!         if payload.is_empty() {
//!             return Err(Status::new(Code::InvalidArgument, "empty"));
//!         }
//!         Ok(payload)
//!     }) as nri_ttrpc::BoxFuture<'static, _>
//! });
//!
//! let (client_io, server_io) = tokio::net::UnixStream::pair()?;
//! tokio::spawn(Arc::new(server).serve(server_io));
//! let client = Client::new(client_io);
//!
//! let reply = client
//!     .call("demo.Echo", "Echo", b"ping".to_vec(), Some(Duration::from_secs(1)))
//!     .await?;
//! assert_eq!(reply, b"ping");
//!
//! let err = client.call("demo.Echo", "Echo", Vec::new(), None).await.unwrap_err();
//! assert_eq!(err.code(), Code::InvalidArgument);
//! # Ok(())
//! # }
//! ```

/// Items of the default feature `async`, each compiled only with it.
macro_rules! with_async {
    ($($item:item)*) => { $( #[cfg(feature = "async")] $item )* };
}

with_async! {
    mod busy_poll;
    mod client;
    mod context;
    mod outbox;
    mod server;

    pub use client::Client;
    pub use context::RequestContext;
    pub use server::{BoxFuture, Handler, Server, DEFAULT_MAX_IN_FLIGHT};
}

mod code;
mod error;
pub mod frame;
pub mod proto;
mod status;
pub mod trace;

pub use code::Code;
pub use error::Error;
pub use frame::MAX_MESSAGE_LEN;
pub use status::Status;
pub use trace::TraceContext;
