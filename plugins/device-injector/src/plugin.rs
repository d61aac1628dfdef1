//! The NRI plugin: one CreateContainer handler.

use nri_plugin_util::report_unapplied;
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
};

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

/// What the plugin adjusts; what a runtime does not apply of it is left out.
const NEEDS: [Adjustment; 9] = [
    Adjustment::Devices,
    Adjustment::CdiDevices,
    Adjustment::Mounts,
    Adjustment::MountOptions,
    Adjustment::IoPriority,
    Adjustment::Scheduler,
    Adjustment::NetDevices,
    Adjustment::Sysctl,
    Adjustment::MemoryPolicy,
];

#[nri_stub::plugin]
impl Plugin for DeviceInjector {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        report_unapplied("device-injector", &info.runtime, &NEEDS);
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let name = container_name(pod, ctr);
        tracing::debug!("{name}: CreateContainer");
        let mut adjust =
            crate::adjust_for(&pod.annotations, &ctr.name, &name).inspect_err(|e| {
                tracing::error!("{name}: {e}");
            })?;
        // What the runtime does not apply (said at Configure) is left out.
        ctx.runtime().capabilities().retain(&mut adjust);
        Ok(adjust.into())
    }
}
