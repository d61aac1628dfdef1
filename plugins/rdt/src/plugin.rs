//! The NRI plugin: one CreateContainer handler.

use nri_plugin_util::report_unapplied;
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
};

/// The rdt plugin.
///
/// ```no_run
/// use nri_plugin_rdt::Rdt;
/// # async fn run() -> Result<(), nri_stub::Error> {
/// nri_stub::Stub::builder(Rdt).name("rdt").index("10").build()?.run().await
/// # }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct Rdt;

/// What the plugin adjusts; a runtime that applies none of it gets no adjustment.
const NEEDS: [Adjustment; 1] = [Adjustment::Rdt];

#[nri_stub::plugin]
impl Plugin for Rdt {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        report_unapplied("rdt", &info.runtime, &NEEDS);
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let span = tracing::info_span!("create", namespace = %pod.namespace, pod = %pod.name, container = %ctr.name);
        let _guard = span.enter();
        if !ctx.runtime().capabilities().applies(Adjustment::Rdt) {
            return Ok(CreateContainerResult::default());
        }
        tracing::debug!("create container");
        let adjust = crate::adjust_rdt(&pod.annotations, &ctr.name)
            .inspect_err(|e| tracing::error!("{e}"))?;
        Ok(adjust.into())
    }
}
