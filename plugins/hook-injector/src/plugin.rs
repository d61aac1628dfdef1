//! The NRI plugin: one CreateContainer handler.

use std::collections::BTreeMap;

use nri_plugin_util::report_unapplied;
use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
};

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

/// What the plugin adjusts; a runtime that applies none of it gets no adjustment.
const NEEDS: [Adjustment; 1] = [Adjustment::Hooks];

#[nri_stub::plugin]
impl Plugin for HookInjector {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        report_unapplied("hook-injector", &info.runtime, &NEEDS);
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        if !ctx.runtime().capabilities().applies(Adjustment::Hooks) {
            return Ok(CreateContainerResult::default());
        }
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
