//! The NRI plugin: one CreateContainer handler.

use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Context, CreateContainerResult, Plugin};

/// The device-injector plugin.
///
/// ```no_run
/// use nri_plugin_device_injector::DeviceInjector;
/// # async fn run() -> Result<(), nri_stub::Error> {
/// nri_stub::Stub::builder(DeviceInjector).name("device-injector").index("10").build()?.run().await
/// # }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct DeviceInjector;

/// `pod/container`, for log messages.
pub(crate) fn container_name(pod: &PodSandbox, ctr: &Container) -> String {
    format!("{}/{}", pod.name, ctr.name)
}

#[nri_stub::plugin]
impl Plugin for DeviceInjector {
    async fn create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let name = container_name(pod, ctr);
        tracing::debug!("{name}: CreateContainer");
        let adjust = crate::adjust_for(&pod.annotations, &ctr.name, &name).inspect_err(|e| {
            tracing::error!("{name}: {e}");
        })?;
        Ok(adjust.into())
    }
}
