//! What the runtime provides to the adaptation: [`RuntimeHooks`].

use async_trait::async_trait;
use nri_api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};

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

/// The runtime's side of the contract.
///
/// ```
/// use nri_adaptation::{BoxError, RuntimeHooks, Synchronizer};
/// use nri_api::{ContainerEviction, ContainerUpdate};
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
///     async fn update_containers(
///         &self,
///         _plugin: &str,
///         updates: Vec<ContainerUpdate>,
///         _evictions: Vec<ContainerEviction>,
///     ) -> Result<Vec<ContainerUpdate>, BoxError> {
///         Ok(updates) // nothing can be updated: all failed
///     }
/// }
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
    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError>;
}
