//! The plugin: CreateContainer sets the annotated rlimits.

use nri_plugin_util::report_unapplied;
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
};

use crate::ulimits::{adjust_ulimits, parse_ulimits};

/// Sets container rlimits from pod annotations.
#[derive(Debug, Default)]
pub struct UlimitAdjuster;

/// What the plugin adjusts; a runtime that applies none of it gets no adjustment.
const NEEDS: [Adjustment; 1] = [Adjustment::Rlimits];

#[nri_stub::plugin]
impl Plugin for UlimitAdjuster {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        report_unapplied("ulimit-adjuster", &info.runtime, &NEEDS);
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let span = tracing::debug_span!("create container", pod = %pod.name, container = %ctr.name);
        let _enter = span.enter();
        if !ctx.runtime().capabilities().applies(Adjustment::Rlimits) {
            return Ok(CreateContainerResult::default());
        }
        let ulimits = parse_ulimits(&ctr.name, &pod.annotations).inspect_err(|err| {
            tracing::warn!("refusing container: {err}");
        })?;
        let adjust = adjust_ulimits(&ulimits).inspect_err(|err| {
            tracing::warn!("refusing container: {err}");
        })?;
        if !ulimits.is_empty() {
            tracing::info!(count = ulimits.len(), "adjusting rlimits");
        }
        Ok(adjust.into())
    }
}
