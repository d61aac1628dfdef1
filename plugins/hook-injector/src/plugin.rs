//! The NRI plugin: one CreateContainer handler.

use std::collections::BTreeMap;

use nri_plugin_util::{adjuster_plugin, ContainerAdjuster};
use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
use nri_stub::{Adjustment, CreateContainerResult, HandlerResult};

use crate::manager::HookManager;
use crate::when::Target;

/// The hook-injector plugin: injects the hooks of its [`HookManager`] that match a
/// new container.
///
/// ```no_run
/// use nri_plugin_hook_injector::manager::{HookManager, DEFAULT_DIR, OVERRIDE_DIR};
/// use nri_plugin_hook_injector::HookInjector;
/// # async fn run() -> Result<(), nri_stub::Error> {
/// let manager = HookManager::new(vec![DEFAULT_DIR.into(), OVERRIDE_DIR.into()]);
/// let plugin = HookInjector::new(manager);
/// nri_stub::Stub::builder(plugin).name("hook-injector").index("10").build()?.run().await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HookInjector {
    manager: HookManager,
}

impl HookInjector {
    /// A plugin injecting the hooks of `manager`.
    pub fn new(manager: HookManager) -> Self {
        HookInjector { manager }
    }
}

/// Hook generation failed; the container is not created.
#[derive(Debug, thiserror::Error)]
#[error("hook generation failed: {0}")]
pub struct GenerationError(#[from] crate::manager::HookMatchError);

/// A runtime that does not apply OCI hooks gets no adjustment.
impl ContainerAdjuster for HookInjector {
    const NAME: &'static str = "hook-injector";
    const NEEDS: &'static [Adjustment] = &[Adjustment::Hooks];

    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult> {
        let name = format!("{}/{}", pod.name, ctr.name);
        let mut annotations: BTreeMap<String, String> = ctr.annotations.clone();
        annotations.extend(pod.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        let target = Target {
            annotations: &annotations,
            args: &ctr.args,
            has_bind_mounts: !ctr.mounts.is_empty(),
        };
        let hooks = self.manager.hooks_for(&target).map_err(|e| {
            tracing::error!("{name}: failed to generate hooks: {e}");
            GenerationError(e)
        })?;
        let Some(hooks) = hooks else {
            tracing::info!("{name}: no hooks to inject, ignoring");
            return Ok(CreateContainerResult::default());
        };
        let mut adjust = ContainerAdjustment::default();
        adjust.add_hooks(&hooks);
        tracing::info!("{name}: OCI hooks injected");
        tracing::debug!("{name}: injected hooks {hooks:?}");
        Ok(adjust.into())
    }
}

adjuster_plugin!(HookInjector);
