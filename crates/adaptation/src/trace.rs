//! Trace context of runtime requests and plugin calls.
//!
//! Every lifecycle request of the runtime runs in a `nri.request` span and
//! belongs to one trace: the trace of the parent context the runtime passed
//! with [`with_trace_parent`], or a new random trace. Every call to a plugin
//! runs in a `nri.plugin_call` span with a span id of its own, and a remote
//! plugin receives the call's context as W3C `traceparent` (and the parent's
//! `tracestate`) in the ttRPC request metadata, as containerd's `otelttrpc`
//! client interceptor sends it. A plugin built on `nri-stub` reads it with
//! `Context::trace_context`; a Go plugin with `otelttrpc`'s server
//! interceptor continues the trace.
//!
//! The context is sent only while the trace is kept somewhere: when the
//! runtime gave a parent, or when the runtime's spans are recorded (a
//! subscriber enables them). Otherwise a plugin would receive the ids of a
//! trace that exists nowhere, and pay for reading them. (The Go reference's
//! adaptation sends a context only through an interceptor the runtime
//! installs.)

use std::future::Future;

use nri_api::Subject;
pub use nri_ttrpc::TraceContext;

use crate::adaptation_error::PluginError;

tokio::task_local! {
    /// The parent the runtime gave for the requests of this task.
    static PARENT: TraceContext;
    /// The context of the plugin call being made by this task, if it is
    /// sent.
    static CALL: Option<TraceContext>;
}

/// Runs `fut`, typically a call of one of the [`Adaptation`](crate::Adaptation)'s
/// lifecycle methods, as part of the trace `parent`: the request's plugin
/// calls get `parent`'s trace id and carry its `tracestate`, and its
/// `nri.request` span records `parent`'s span id as `parent_span_id`.
///
/// Without it, each runtime request starts a new trace.
///
/// ```no_run
/// # async fn demo(adaptation: &nri_adaptation::Adaptation) -> Result<(), nri_adaptation::Error> {
/// use nri_adaptation::{with_trace_parent, TraceContext};
///
/// // E.g. the context of the CRI request, as received by the runtime.
/// let parent = TraceContext::parse(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     None,
/// )
/// .expect("valid traceparent");
/// let req = nri_api::CreateContainerRequest::default();
/// let reply = with_trace_parent(parent, adaptation.create_container(req)).await?;
/// # Ok(())
/// # }
/// ```
pub async fn with_trace_parent<F: Future>(parent: TraceContext, fut: F) -> F::Output {
    PARENT.scope(parent, fut).await
}

/// The trace context of one runtime request: a child of the parent given
/// with [`with_trace_parent`], or a new trace.
pub(crate) fn request_context() -> (TraceContext, Option<TraceContext>) {
    match PARENT.try_with(Clone::clone) {
        Ok(parent) => (parent.child(), Some(parent)),
        Err(_) => (TraceContext::generate(), None),
    }
}

/// The trace context of one runtime request, and whether its plugin calls
/// send theirs (see the module's documentation).
#[derive(Debug, Clone)]
pub(crate) struct RequestTrace {
    context: TraceContext,
    sent: bool,
}

impl RequestTrace {
    /// The context of a request in the span `span`, continuing the
    /// runtime's `parent` if it gave one: sent if there is a parent or
    /// `span` is recorded.
    pub(crate) fn new(
        context: TraceContext,
        parent: Option<&TraceContext>,
        span: &tracing::Span,
    ) -> RequestTrace {
        let sent = parent.is_some() || !span.is_disabled();
        RequestTrace { context, sent }
    }
}

/// The span of one runtime request.
pub(crate) fn request_span(
    event: &str,
    subject: &(dyn Subject + Sync),
    trace: &TraceContext,
    parent: Option<&TraceContext>,
) -> tracing::Span {
    tracing::info_span!(
        "nri.request",
        event,
        pod = subject.pod_id(),
        container = subject.container_id(),
        trace_id = %trace.trace_id_hex(),
        span_id = %trace.span_id_hex(),
        parent_span_id = %parent.map(TraceContext::span_id_hex).unwrap_or_default(),
        outcome = tracing::field::Empty,
    )
}

/// Runs one plugin call (the future `make` returns) in its
/// `nri.plugin_call` span, a child of the runtime request `request`; remote
/// calls made by it send the call's context.
///
/// The call's future is made here rather than passed in: an `async fn`
/// keeps a future argument beside the one it awaits, which would double
/// the size of every plugin call's state.
///
/// A call that belongs to no runtime request (`None`: Configure,
/// Synchronize, Shutdown, events replayed to a synchronizing plugin) is a
/// request of its own: a child of the parent given with
/// [`with_trace_parent`] if any, otherwise the root of a new trace (empty
/// `parent_span_id`). Every span's parent is thus a span that is emitted
/// too, or the runtime's own. The call's context is sent as the request's
/// is ([`RequestTrace`]); for a call of its own, if it has a parent or its
/// span is recorded.
pub(crate) async fn plugin_call<T, F: Future<Output = T>>(
    plugin: &str,
    event: &str,
    subject: &(dyn Subject + Sync),
    request: Option<&RequestTrace>,
    make: impl FnOnce() -> F,
    outcome: impl FnOnce(&T) -> &'static str,
) -> T {
    let own_parent;
    let (call, parent, sent) = match request {
        Some(request) => (
            request.context.child(),
            Some(&request.context),
            Some(request.sent),
        ),
        None => {
            let (call, parent) = request_context();
            own_parent = parent;
            (call, own_parent.as_ref(), None)
        }
    };
    // The ids are formatted only when the span is enabled: the macro
    // evaluates its fields only then.
    let span = tracing::info_span!(
        "nri.plugin_call",
        plugin,
        event,
        pod = subject.pod_id(),
        container = subject.container_id(),
        trace_id = %call.trace_id_hex(),
        span_id = %call.span_id_hex(),
        parent_span_id = %parent.map(TraceContext::span_id_hex).unwrap_or_default(),
        outcome = tracing::field::Empty,
    );
    let sent = sent.unwrap_or_else(|| parent.is_some() || !span.is_disabled());
    let call = sent.then_some(call);
    let result = tracing::Instrument::instrument(CALL.scope(call, make()), span.clone()).await;
    span.record("outcome", outcome(&result));
    result
}

/// The metadata a remote call sends: the current plugin call's context,
/// if it is sent.
pub(crate) fn call_metadata() -> Vec<(String, String)> {
    CALL.try_with(|call| call.as_ref().map(TraceContext::to_metadata))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// The `outcome` of a failed plugin call.
pub(crate) fn error_outcome(err: &PluginError) -> &'static str {
    use nri_ttrpc::{Code, Error};
    match err {
        PluginError::Timeout | PluginError::Rpc(Error::Timeout) => "timeout",
        PluginError::Rpc(Error::Status(st)) if st.code() == Code::Unimplemented => "unimplemented",
        PluginError::Rpc(Error::Closed | Error::Io(_)) => "closed",
        _ => "error",
    }
}

/// The `outcome` of a plugin call that returns nothing to inspect.
pub(crate) fn outcome<T>(result: &Result<T, PluginError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => error_outcome(e),
    }
}

/// A request about no pod or container (Configure, Synchronize, Shutdown).
pub(crate) struct NoSubject;

impl Subject for NoSubject {}
