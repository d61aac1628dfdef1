//! The ttRPC server of the Plugin service, routing every method to a [`Session`];
//! a handler that panics answers with the panic's message and location.

use std::sync::Arc;

use nri_api::service::{plugin as method, PLUGIN_SERVICE};
use nri_ttrpc::Server;
use tracing::Instrument;

use crate::session::Session;
use crate::trace;
use crate::Plugin;

/// A server with every Plugin-service method registered.
pub(crate) fn plugin_server<P: Plugin>(session: Arc<Session<P>>) -> Server {
    let mut server = Server::new();
    macro_rules! route {
        ($($name:expr => $handler:ident),* $(,)?) => {$({
            let session = Arc::clone(&session);
            // Requests are decoded straight into a box, so they move
            // through the handler's layers as a pointer.
            server.register_msg(PLUGIN_SERVICE, $name, move |ctx, req: Box<_>| {
                let session = Arc::clone(&session);
                let trace = trace::incoming(&ctx);
                let span = trace::request_span(&session.plugin_name(), $name, &*req, trace.as_ref());
                let recorder = span.clone();
                async move {
                    let handled = trace::scope(trace, session.$handler(req));
                    let (reply, outcome) = match crate::panic::catching(handled).await {
                        Ok(Ok(reply)) => (Ok(reply), "ok"),
                        Ok(Err(status)) => (Err(status), "error"),
                        Err(caught) => (Err(session.handler_panicked($name, caught)), "panic"),
                    };
                    recorder.record("outcome", outcome);
                    reply
                }
                .instrument(span)
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
