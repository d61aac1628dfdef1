//! What the runtime provides to the adaptation: [`RuntimeHooks`].

use async_trait::async_trait;
use nri_api::{
    Container, ContainerEviction, ContainerUpdate, PodSandbox, UpdateContainersRequest,
    UpdateContainersResponse,
};

use crate::adaptation_error::{BoxError, Error};

/// Synchronizes plugins with the runtime's current pods and containers.
///
/// Handed to [`RuntimeHooks::synchronize`]; the runtime lists its state and
/// calls [`synchronize`](Self::synchronize) once, then applies the updates it
/// returns.
#[async_trait]
pub trait Synchronizer: Send {
    /// Sends `pods` and `containers` to the plugin(s) being synchronized and
    /// returns the container updates they request.
    ///
    /// At start-up every plugin started so far is synchronized; a plugin that
    /// fails is dropped (with a warning) and the call still succeeds. For a
    /// plugin that connects later the call fails if that plugin fails, and
    /// the plugin is not added.
    async fn synchronize(
        &mut self,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> Result<Vec<ContainerUpdate>, Error>;
}

/// The runtime's side of the contract. Only
/// [`synchronize`](Self::synchronize) must be written; a runtime that
/// cannot update containers on a plugin's request can leave out
/// [`update_containers`](Self::update_containers).
///
/// ```
/// use nri_adaptation::{BoxError, RuntimeHooks, Synchronizer};
/// use nri_api::ContainerUpdate;
///
/// struct NoState;
///
/// #[nri_adaptation::async_trait]
/// impl RuntimeHooks for NoState {
///     async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
///         let updates = sync.synchronize(&[], &[]).await?;
///         assert!(updates.is_empty());
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // Without an update_containers of its own, nothing can be updated: an
/// // update is reported failed unless the plugin lets it fail.
/// let updates = vec![
///     ContainerUpdate { container_id: "ctr0".into(), ..Default::default() },
///     ContainerUpdate { container_id: "ctr1".into(), ignore_failure: true, ..Default::default() },
/// ];
/// let failed = NoState.update_containers("10-plugin", updates, Vec::new()).await.unwrap();
/// assert_eq!(failed.len(), 1);
/// assert_eq!(failed[0].container_id, "ctr0");
/// # }
/// ```
#[async_trait]
pub trait RuntimeHooks: Send + Sync + 'static {
    /// Lists the runtime's pods and containers (consistently, under the
    /// runtime's own lock), calls [`Synchronizer::synchronize`] with them
    /// and applies the updates it returns. An error rejects the plugin(s)
    /// being synchronized (at start-up, [`Adaptation::start`] fails).
    ///
    /// Called at start-up and whenever an external plugin connects, while
    /// the plugin-sync lock is held exclusively: it must not wait for a
    /// [`PluginSyncBlock`](crate::PluginSyncBlock).
    ///
    /// [`Adaptation::start`]: crate::Adaptation::start
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError>;

    /// Applies updates a plugin requested on its own (outside of a
    /// lifecycle call) and returns those that failed. `plugin` is the
    /// plugin's full name. This may be called at any time, also while a
    /// lifecycle call is running (even from inside that call's plugin
    /// handler): it must not wait for anything a running lifecycle call
    /// holds.
    ///
    /// An update of a container the runtime does not know should be
    /// returned as failed (unless it has `ignore_failure`), as containerd
    /// does: the failed list goes back to the plugin, and the adaptation
    /// logs each failed update with the plugin's name. Updates and
    /// evictions without a container id never reach this hook.
    ///
    /// The default updates nothing: it returns every update as failed but
    /// those with `ignore_failure`, and performs no eviction.
    async fn update_containers(
        &self,
        _plugin: &str,
        updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(updates.into_iter().filter(|u| !u.ignore_failure).collect())
    }

    /// Like [`update_containers`](Self::update_containers) (which the
    /// default implementation calls, reporting no failed eviction), and
    /// also reports the evictions that could not be performed. The protocol
    /// has no way to tell the plugin about those; the adaptation logs each
    /// with the plugin's name. The adaptation calls this method, not
    /// `update_containers`, for unsolicited requests.
    async fn apply_plugin_requests(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<FailedRequests, BoxError> {
        let updates = self.update_containers(plugin, updates, evictions).await?;
        Ok(FailedRequests {
            updates,
            evictions: Vec::new(),
        })
    }
}

/// What the runtime could not do of a plugin's unsolicited request
/// ([`RuntimeHooks::apply_plugin_requests`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailedRequests {
    /// Updates that failed; returned to the plugin.
    pub updates: Vec<ContainerUpdate>,
    /// Evictions that could not be performed; only logged.
    pub evictions: Vec<ContainerEviction>,
}

/// Handles one unsolicited UpdateContainers request of `plugin`: updates
/// and evictions without a container id are dropped with a warning (an
/// update without id is reported failed unless it has `ignore_failure`, as
/// a runtime reports an unknown container), the rest goes to the runtime,
/// and every failure is logged with the plugin's name. The failed list is
/// the runtime's, then the updates without id.
pub(crate) async fn unsolicited_updates(
    hooks: &dyn RuntimeHooks,
    plugin: &str,
    req: UpdateContainersRequest,
) -> Result<UpdateContainersResponse, BoxError> {
    if plugin.is_empty() {
        tracing::warn!("container updates requested by a plugin that has not registered");
    }
    let (updates, no_id): (Vec<_>, Vec<_>) = req
        .update
        .into_iter()
        .partition(|u| !u.container_id.is_empty());
    let mut rejected = Vec::new();
    for u in no_id {
        tracing::warn!(
            plugin,
            ignore_failure = u.ignore_failure,
            "container update without a container id is not applied"
        );
        if !u.ignore_failure {
            rejected.push(u);
        }
    }
    let (evictions, no_id): (Vec<_>, Vec<_>) = req
        .evict
        .into_iter()
        .partition(|e| !e.container_id.is_empty());
    for e in no_id {
        tracing::warn!(
            plugin,
            reason = %e.reason,
            "container eviction without a container id is not performed"
        );
    }

    let failed = hooks
        .apply_plugin_requests(plugin, updates, evictions)
        .await
        .inspect_err(|e| {
            tracing::warn!(plugin, error = %e,
                "runtime failed to apply the container updates the plugin requested");
        })?;
    for u in &failed.updates {
        tracing::warn!(plugin, container = %u.container_id,
            "runtime failed to apply the container update the plugin requested");
    }
    for e in &failed.evictions {
        tracing::warn!(plugin, container = %e.container_id, reason = %e.reason,
            "runtime failed to evict the container the plugin asked to evict");
    }
    let mut reply = failed.updates;
    reply.extend(rejected);
    Ok(UpdateContainersResponse { failed: reply })
}
