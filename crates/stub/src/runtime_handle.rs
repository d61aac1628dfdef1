//! [`RuntimeHandle`]: unsolicited requests from the plugin to the runtime.

use std::sync::{Arc, PoisonError, RwLock};

use nri_api::service::{runtime, RUNTIME_SERVICE};
use nri_api::{
    ContainerEviction, ContainerUpdate, UpdateContainersRequest, UpdateContainersResponse,
};
use nri_ttrpc::Client;

use crate::Error;

/// Sends requests to the runtime over the stub's current connection.
///
/// Obtained from [`Stub::runtime_handle`](crate::Stub::runtime_handle) or
/// [`Context::runtime_handle`](crate::Context::runtime_handle); cheap to clone, and it
/// follows the stub across reconnections. While the stub is not registered with a
/// runtime, calls fail with [`Error::NotConnected`].
///
/// ```no_run
/// # async fn demo(stub: &nri_stub::Stub) -> Result<(), nri_stub::Error> {
/// use nri_stub::api::ContainerUpdate;
///
/// let handle = stub.runtime_handle();
/// tokio::spawn(async move {
///     let update = ContainerUpdate { container_id: "abc".into(), ..Default::default() };
///     match handle.update_containers(vec![update], vec![]).await {
///         Ok(failed) if failed.is_empty() => {}
///         Ok(failed) => eprintln!("{} updates failed", failed.len()),
///         Err(err) => eprintln!("{err}"),
///     }
/// });
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct RuntimeHandle {
    client: Arc<RwLock<Option<Client>>>,
}

impl RuntimeHandle {
    /// Asks the runtime to update and evict containers (`UpdateContainers`), and
    /// returns the updates the runtime could not apply.
    ///
    /// Like the Go stub, the call has no deadline of its own; it ends when the runtime
    /// answers or the connection closes. Note that a runtime may hold a lock while it
    /// calls a handler, so awaiting this inside a handler can stall until the runtime's
    /// request timeout; spawn it instead.
    pub async fn update_containers(
        &self,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        let client = self.client().ok_or(Error::NotConnected)?;
        let request = UpdateContainersRequest {
            update: updates,
            evict: evictions,
        };
        let reply: UpdateContainersResponse = client
            .call_msg(RUNTIME_SERVICE, runtime::UPDATE_CONTAINERS, &request, None)
            .await
            .map_err(Error::UpdateContainers)?;
        Ok(reply.failed)
    }

    /// True while the stub is registered with a runtime.
    pub fn is_connected(&self) -> bool {
        self.client().is_some_and(|c| !c.is_closed())
    }

    fn client(&self) -> Option<Client> {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set(&self, client: Option<Client>) {
        *self.client.write().unwrap_or_else(PoisonError::into_inner) = client;
    }
}
