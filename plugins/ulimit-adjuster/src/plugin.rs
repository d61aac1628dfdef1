//! The plugin: CreateContainer sets the annotated rlimits.

use nri_plugin_util::{adjuster_plugin, ContainerAdjuster};
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Adjustment, CreateContainerResult, HandlerResult};

use crate::ulimits::{adjust_ulimits, parse_ulimits};

/// Sets container rlimits from pod annotations.
#[derive(Debug, Default)]
pub struct UlimitAdjuster;

/// A runtime that does not apply rlimits gets no adjustment.
impl ContainerAdjuster for UlimitAdjuster {
    const NAME: &'static str = "ulimit-adjuster";
    const NEEDS: &'static [Adjustment] = &[Adjustment::Rlimits];

    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult> {
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

adjuster_plugin!(UlimitAdjuster);
