//! Continuing the runtime's trace in the NRI calls it makes.

use std::future::Future;

pub use nri_adaptation::TraceContext;

/// Runs `fut`, typically one or more of [`Nri`](crate::Nri)'s lifecycle
/// calls, as part of the runtime's trace `parent` (e.g. the W3C
/// `traceparent` of the CRI request being served): the `nri.request` span
/// of each NRI request is a child of `parent`, and every plugin receives a
/// `traceparent` in that trace, with `parent`'s `tracestate`. `None` (no or
/// an invalid `traceparent`) runs `fut` as is: each request starts a new
/// trace.
///
/// The parent applies to the calls `fut` makes itself, not to work NRI
/// does on its own later (exit notifications delivered from the queue,
/// plugin registration).
///
/// ```no_run
/// use nri_api::{Container, PodSandbox};
/// use nri_integration::{with_trace_parent, Nri, TraceContext};
///
/// # async fn serve(nri: &Nri, pod: &PodSandbox, ctr: &Container) -> Result<(), nri_integration::Error> {
/// // The trace context the CRI request arrived with (gRPC metadata).
/// let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// let parent = TraceContext::parse(traceparent, Some("vendor=1"));
/// let adjustment = with_trace_parent(parent, nri.create_container(pod, ctr)).await?;
/// # Ok(())
/// # }
/// ```
pub async fn with_trace_parent<F: Future>(
    parent: impl Into<Option<TraceContext>>,
    fut: F,
) -> F::Output {
    match parent.into() {
        Some(parent) => nri_adaptation::with_trace_parent(parent, fut).await,
        None => fut.await,
    }
}
