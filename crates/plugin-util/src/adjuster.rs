//! Sample plugins that only change new containers: [`ContainerAdjuster`] and
//! [`adjuster_plugin!`](crate::adjuster_plugin), which writes their
//! [`Plugin`](nri_stub::Plugin) implementation.

use nri_stub::api::{Container, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult,
};

use crate::report_unapplied;

/// What a [`ContainerAdjuster`] does on a runtime that does not apply all of its
/// [`NEEDS`](ContainerAdjuster::NEEDS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unapplied {
    /// Leave the container as it is: [`ContainerAdjuster::adjust`] is not called.
    Skip,
    /// Adjust it, without the parts the runtime does not apply
    /// ([`RuntimeCapabilities::retain`](nri_stub::RuntimeCapabilities::retain)).
    LeaveOut,
}

/// A plugin that adjusts new containers (CreateContainer) and nothing else.
///
/// [`adjuster_plugin!`](crate::adjuster_plugin) implements [`Plugin`](nri_stub::Plugin)
/// for it: Configure warns once about what of [`NEEDS`](Self::NEEDS) the runtime does
/// not apply ([`report_unapplied`]) and subscribes to CreateContainer; CreateContainer
/// calls [`adjust`](Self::adjust) as [`UNAPPLIED`](Self::UNAPPLIED) says.
///
/// ```
/// use nri_plugin_util::{adjuster_plugin, ContainerAdjuster};
/// use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
/// use nri_stub::{Adjustment, CreateContainerResult, HandlerResult, Plugin};
///
/// struct Tagger;
///
/// impl ContainerAdjuster for Tagger {
///     const NAME: &'static str = "tagger";
///     const NEEDS: &'static [Adjustment] = &[Adjustment::Env];
///
///     fn adjust(&self, pod: &PodSandbox, _: &Container) -> HandlerResult<CreateContainerResult> {
///         let mut adjust = ContainerAdjustment::default();
///         adjust.add_env("POD", pod.name.clone());
///         Ok(adjust.into())
///     }
/// }
///
/// adjuster_plugin!(Tagger);
///
/// assert!(Tagger.implemented_events().is_set(nri_stub::api::Event::CreateContainer));
/// ```
pub trait ContainerAdjuster: Send + Sync + 'static {
    /// The plugin's name in the Configure warning.
    const NAME: &'static str;
    /// The parts of an adjustment the plugin makes.
    const NEEDS: &'static [Adjustment];
    /// What it does on a runtime that does not apply all of [`NEEDS`](Self::NEEDS).
    const UNAPPLIED: Unapplied = Unapplied::Skip;

    /// The result of CreateContainer for `ctr` of `pod`.
    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult>;
}

/// Configure of an [`adjuster_plugin!`](crate::adjuster_plugin): reports what the
/// runtime does not apply and subscribes to every implemented event.
pub fn configure<A: ContainerAdjuster>(info: &ConfigureInfo) -> HandlerResult<EventMask> {
    report_unapplied(A::NAME, &info.runtime, A::NEEDS);
    Ok(EventMask::default())
}

/// CreateContainer of an [`adjuster_plugin!`](crate::adjuster_plugin).
pub fn create_container<A: ContainerAdjuster>(
    plugin: &A,
    ctx: &Context,
    pod: &PodSandbox,
    ctr: &Container,
) -> HandlerResult<CreateContainerResult> {
    let runtime = ctx.runtime().capabilities();
    match A::UNAPPLIED {
        Unapplied::Skip if !runtime.unapplied(A::NEEDS).is_empty() => {
            Ok(CreateContainerResult::default())
        }
        Unapplied::Skip => plugin.adjust(pod, ctr),
        Unapplied::LeaveOut => {
            let mut result = plugin.adjust(pod, ctr)?;
            if let Some(adjust) = result.adjust.as_mut() {
                runtime.retain(adjust);
            }
            Ok(result)
        }
    }
}

/// Implements [`Plugin`](nri_stub::Plugin) for a [`ContainerAdjuster`]: Configure is
/// [`adjuster::configure`](crate::adjuster::configure), CreateContainer
/// [`adjuster::create_container`](crate::adjuster::create_container). See
/// [`ContainerAdjuster`] for an example.
#[macro_export]
macro_rules! adjuster_plugin {
    ($plugin:ty) => {
        #[::nri_stub::plugin]
        impl ::nri_stub::Plugin for $plugin {
            async fn configure(
                &self,
                _ctx: &::nri_stub::Context,
                info: &::nri_stub::ConfigureInfo,
            ) -> ::nri_stub::HandlerResult<::nri_stub::EventMask> {
                $crate::adjuster::configure::<Self>(info)
            }

            async fn create_container(
                &self,
                ctx: &::nri_stub::Context,
                pod: &::nri_stub::api::PodSandbox,
                ctr: &::nri_stub::api::Container,
            ) -> ::nri_stub::HandlerResult<::nri_stub::CreateContainerResult> {
                $crate::adjuster::create_container(self, ctx, pod, ctr)
            }
        }
    };
}
