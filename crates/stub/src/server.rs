//! The ttRPC server of the Plugin service, routing every method to a [`Session`];
//! a handler that panics answers with the panic's message and location.
//!
//! Each method has only what differs from one to the next: its request and
//! response types and its session handler, whose response is encoded at once.
//! Everything around the handler (the request's span and trace context, catching a
//! panic, recording the outcome) is one piece of code for all of them, run on the
//! handler as a boxed future: a plugin carries it once, not once per method.

use std::sync::Arc;

use nri_api::service::{plugin as method, PLUGIN_SERVICE};
use nri_ttrpc::{BoxFuture, Server, Status, TraceContext};
use prost::bytes::{Buf, BufMut};
use prost::encoding::{skip_field, DecodeContext, WireType};
use prost::Message;
use tracing::Instrument;

use crate::session::Session;
use crate::trace;
use crate::Plugin;

/// A handler's outcome: its response message, already encoded.
type Handled = BoxFuture<'static, Result<Encoded, Status>>;

/// A response message encoded by its handler, passed on as it is.
#[derive(Debug, Default)]
struct Encoded(Vec<u8>);

impl Encoded {
    fn of<M: Message>(msg: M) -> Encoded {
        Encoded(msg.encode_to_vec())
    }
}

impl Message for Encoded {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Never decoded: only sent.
        skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// Runs one handler in its request's span and trace context, turning a panic
/// into the error the runtime receives.
fn serve<P: Plugin>(
    session: Arc<Session<P>>,
    method: &'static str,
    span: tracing::Span,
    trace: Option<TraceContext>,
    handled: Handled,
) -> Handled {
    let recorder = span.clone();
    Box::pin(
        async move {
            let (reply, outcome) = match crate::panic::catching(trace::scope(trace, handled)).await
            {
                Ok(Ok(reply)) => (Ok(reply), "ok"),
                Ok(Err(status)) => (Err(status), "error"),
                Err(caught) => (Err(session.handler_panicked(method, caught)), "panic"),
            };
            recorder.record("outcome", outcome);
            reply
        }
        .instrument(span),
    )
}

/// A server with every Plugin-service method registered.
pub(crate) fn plugin_server<P: Plugin>(session: Arc<Session<P>>) -> Server {
    let mut server = Server::new();
    macro_rules! route {
        ($($name:expr => $handler:ident),* $(,)?) => {$({
            let session = Arc::clone(&session);
            // Requests are decoded straight into a box, so they move
            // through the handler's layers as a pointer.
            server.register_msg(PLUGIN_SERVICE, $name, move |ctx, req: Box<_>| {
                let trace = trace::incoming(&ctx);
                let span =
                    trace::request_span(&|| session.plugin_name(), $name, &*req, trace.as_ref());
                let handler = Arc::clone(&session);
                let handled: Handled =
                    Box::pin(async move { handler.$handler(req).await.map(Encoded::of) });
                serve(Arc::clone(&session), $name, span, trace, handled)
            });
        })*};
    }
    route! {
        method::CONFIGURE => configure,
        method::SYNCHRONIZE => synchronize,
        method::SHUTDOWN => shutdown,
        method::RUN_POD_SANDBOX => run_pod_sandbox,
        method::UPDATE_POD_SANDBOX => update_pod_sandbox,
        method::POST_UPDATE_POD_SANDBOX => post_update_pod_sandbox,
        method::STOP_POD_SANDBOX => stop_pod_sandbox,
        method::REMOVE_POD_SANDBOX => remove_pod_sandbox,
        method::CREATE_CONTAINER => create_container,
        method::POST_CREATE_CONTAINER => post_create_container,
        method::START_CONTAINER => start_container,
        method::POST_START_CONTAINER => post_start_container,
        method::UPDATE_CONTAINER => update_container,
        method::POST_UPDATE_CONTAINER => post_update_container,
        method::STOP_CONTAINER => stop_container,
        method::REMOVE_CONTAINER => remove_container,
        method::STATE_CHANGE => state_change,
        method::VALIDATE_CONTAINER_ADJUSTMENT => validate_container_adjustment,
    }
    server
}
