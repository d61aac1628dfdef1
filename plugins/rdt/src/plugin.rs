//! The NRI plugin: one CreateContainer handler.

use nri_plugin_util::{adjuster_plugin, ContainerAdjuster};
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Adjustment, CreateContainerResult, HandlerResult};

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

/// A runtime that does not apply RDT gets no adjustment.
impl ContainerAdjuster for Rdt {
    const NAME: &'static str = "rdt";
    const NEEDS: &'static [Adjustment] = &[Adjustment::Rdt];

    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult> {
        let span = tracing::info_span!("create", namespace = %pod.namespace, pod = %pod.name, container = %ctr.name);
        let _guard = span.enter();
        tracing::debug!("create container");
        let adjust = crate::adjust_rdt(&pod.annotations, &ctr.name)
            .inspect_err(|e| tracing::error!("{e}"))?;
        Ok(adjust.into())
    }
}

adjuster_plugin!(Rdt);
