//! The [`RuntimeHooks`] every adaptation of an [`Nri`](crate::Nri) gets:
//! they fan out to the registered domains.

use std::sync::Weak;

use async_trait::async_trait;
use nri_adaptation::{BoxError, FailedRequests, RuntimeHooks, Synchronizer};
use nri_api::{ContainerEviction, ContainerUpdate};

use crate::error::Error;
use crate::nri::Core;
use crate::outcome::FailedUpdates;

/// Holds the integration weakly: the adaptation it is given to is itself
/// owned by the integration.
pub(crate) struct DomainHooks {
    pub core: Weak<Core>,
}

#[derive(Debug, thiserror::Error)]
#[error("the NRI integration has been dropped")]
struct Gone;

#[async_trait]
impl RuntimeHooks for DomainHooks {
    /// Lists every domain's pods and containers (domains in name order),
    /// records their states, synchronizes the plugin(s) and applies the
    /// updates they return through the domains.
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let core = self.core.upgrade().ok_or(Gone)?;
        if core.domains.is_empty() {
            tracing::warn!(
                "synchronizing NRI plugins before any domain is registered: they see no pods or containers"
            );
        }
        let (pods, containers) = core.domains.list().await;
        tracing::info!(
            pods = pods.len(),
            containers = containers.len(),
            "synchronizing NRI plugins with the runtime's state"
        );
        core.lifecycle.synchronized(&pods, &containers);
        let updates = sync.synchronize(&pods, &containers).await?;
        let failed = core.domains.apply(updates, Vec::new()).await;
        if !failed.is_empty() {
            tracing::warn!(
                failed = failed.updates.len(),
                "some container updates requested during NRI synchronization failed"
            );
        }
        Ok(())
    }

    /// Routes the plugin's evictions and updates to the domains and
    /// returns the failed updates to the plugin. Before any domain is
    /// registered the whole request fails with [`Error::NoDomain`].
    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(self.apply(plugin, updates, evictions).await?.updates)
    }

    /// As [`update_containers`](Self::update_containers), and also reports
    /// the evictions no domain could perform, so that the adaptation logs
    /// each with the plugin that asked for it.
    async fn apply_plugin_requests(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<FailedRequests, BoxError> {
        let failed = self.apply(plugin, updates, evictions).await?;
        Ok(FailedRequests {
            updates: failed.updates,
            evictions: failed.evictions,
        })
    }
}

impl DomainHooks {
    /// Applies a plugin's unsolicited request through the domains.
    async fn apply(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<FailedUpdates, BoxError> {
        let core = self.core.upgrade().ok_or(Gone)?;
        if core.domains.is_empty() {
            tracing::warn!(
                plugin,
                updates = updates.len(),
                evictions = evictions.len(),
                "refusing NRI container updates: no domain registered yet"
            );
            return Err(Error::NoDomain.into());
        }
        let failed = core.domains.apply(updates, evictions).await;
        if !failed.is_empty() {
            tracing::warn!(
                plugin,
                failed_updates = failed.updates.len(),
                failed_evictions = failed.evictions.len(),
                "some container updates requested by an NRI plugin failed"
            );
        }
        Ok(failed)
    }
}
