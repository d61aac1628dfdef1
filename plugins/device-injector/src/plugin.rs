//! The NRI plugin: one CreateContainer handler.

use nri_plugin_util::{adjuster_plugin, ContainerAdjuster, Unapplied};
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Adjustment, CreateContainerResult, HandlerResult};

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

/// What the plugin adjusts; what a runtime does not apply of it is left out (said
/// at Configure).
impl ContainerAdjuster for DeviceInjector {
    const NAME: &'static str = "device-injector";
    const NEEDS: &'static [Adjustment] = &[
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
    const UNAPPLIED: Unapplied = Unapplied::LeaveOut;

    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult> {
        let name = container_name(pod, ctr);
        tracing::debug!("{name}: CreateContainer");
        let adjust = crate::adjust_for(&pod.annotations, &ctr.name, &name).inspect_err(|e| {
            tracing::error!("{name}: {e}");
        })?;
        Ok(adjust.into())
    }
}

adjuster_plugin!(DeviceInjector);
