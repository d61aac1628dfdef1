//! The span of each handled request and the trace context it continues.
//!
//! A request from the runtime may carry a W3C trace context in its ttRPC
//! metadata (`traceparent`, `tracestate`), as containerd's `otelttrpc`
//! client interceptor and `nri-adaptation` send it. The stub runs each
//! handler inside a `nri.plugin_request` span that records the incoming
//! trace id, and hands the context to the handler through
//! [`Context::trace_context`](crate::Context::trace_context).

use std::future::Future;

use nri_api::Subject;
use nri_ttrpc::{RequestContext, TraceContext};

tokio::task_local! {
    /// The trace context of the request whose handler runs in this task.
    static CURRENT: Option<TraceContext>;
}

/// The trace context of the request being handled by the current task.
pub(crate) fn current() -> Option<TraceContext> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Runs `fut` with `trace` as the current request's trace context.
pub(crate) fn scope<F: Future>(
    trace: Option<TraceContext>,
    fut: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(trace, fut)
}

/// The incoming trace context of a request, if it carries a valid one.
pub(crate) fn incoming(ctx: &RequestContext) -> Option<TraceContext> {
    TraceContext::from_metadata(&ctx.metadata)
}

/// The span of one handled request. `outcome` is recorded when it ends.
pub(crate) fn request_span(
    plugin: &dyn Fn() -> String,
    event: &str,
    req: &dyn Subject,
    trace: Option<&TraceContext>,
) -> tracing::Span {
    // The plugin's name and the ids are formatted only when the span is
    // enabled: the macro evaluates its fields only then.
    tracing::info_span!(
        "nri.plugin_request",
        plugin = plugin(),
        event,
        pod = req.pod_id(),
        container = req.container_id(),
        trace_id = trace.map(TraceContext::trace_id_hex).unwrap_or_default(),
        parent_span_id = trace.map(TraceContext::span_id_hex).unwrap_or_default(),
        outcome = tracing::field::Empty,
    )
}
