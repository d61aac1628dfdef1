//! The plugin: CreateContainer sets the annotated rlimits.

use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Context, CreateContainerResult, Plugin};

use crate::ulimits::{adjust_ulimits, parse_ulimits};

/// Sets container rlimits from pod annotations.
#[derive(Debug, Default)]
pub struct UlimitAdjuster;

#[nri_stub::plugin]
impl Plugin for UlimitAdjuster {
    async fn create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let span = tracing::debug_span!("create container", pod = %pod.name, container = %ctr.name);
        let _enter = span.enter();
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
