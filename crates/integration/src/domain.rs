//! [`Domain`]: one runtime namespace's pods and containers, as NRI sees
//! them; and the table of registered domains.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use nri_adaptation::BoxError;
use nri_api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};

use crate::error::Error;
use crate::outcome::FailedUpdates;

/// The pods and containers of one runtime namespace (containerd's `k8s.io`
/// for CRI, `moby`, ...), and how to change them.
///
/// Register one per namespace with
/// [`Nri::register_domain`](crate::Nri::register_domain). The integration
/// lists every domain's pods and containers when plugins synchronize, and
/// routes each container update or eviction a plugin asks for to the domain
/// that has the container.
///
/// The methods are called without any lock of the integration held, and
/// possibly while a lifecycle call of the runtime is waiting for plugins
/// (a plugin may ask for updates from inside its handler). They must not
/// wait for locks the runtime holds around its NRI lifecycle calls, nor for
/// a [`SyncBlock`](crate::SyncBlock).
///
/// ```
/// use std::sync::Mutex;
/// use nri_integration::{BoxError, Domain};
/// use nri_api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};
///
/// #[derive(Default)]
/// struct Store {
///     pods: Mutex<Vec<PodSandbox>>,
///     containers: Mutex<Vec<Container>>,
/// }
///
/// #[nri_integration::async_trait]
/// impl Domain for Store {
///     fn name(&self) -> &str {
///         "k8s.io"
///     }
///     async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> {
///         self.pods.lock().unwrap().clone()
///     }
///     async fn list_containers(&self) -> Vec<Container> {
///         self.containers.lock().unwrap().clone()
///     }
///     async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox> {
///         self.pods.lock().unwrap().iter().find(|p| p.id == id).cloned()
///     }
///     async fn get_container(&self, id: &str) -> Option<Container> {
///         self.containers.lock().unwrap().iter().find(|c| c.id == id).cloned()
///     }
///     async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError> {
///         Err(format!("cannot update {}", update.container_id).into())
///     }
///     async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError> {
///         self.containers.lock().unwrap().retain(|c| c.id != eviction.container_id);
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait Domain: Send + Sync + 'static {
    /// The namespace's name; unique among registered domains.
    fn name(&self) -> &str;

    /// Every pod plugins should know about.
    async fn list_pod_sandboxes(&self) -> Vec<PodSandbox>;

    /// Every container plugins should know about (exited ones may be left
    /// out), with its current `state`.
    async fn list_containers(&self) -> Vec<Container>;

    /// The pod `id`, if this domain has it.
    async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox>;

    /// The container `id`, if this domain has it.
    async fn get_container(&self, id: &str) -> Option<Container>;

    /// Whether this domain has the container `id`; used to route updates
    /// and evictions. Defaults to [`get_container`](Self::get_container).
    async fn has_container(&self, id: &str) -> bool {
        self.get_container(id).await.is_some()
    }

    /// Applies a plugin's update of one of this domain's containers.
    async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError>;

    /// Evicts (stops) one of this domain's containers, as a plugin asked.
    async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError>;
}

/// The registered domains, by name.
#[derive(Default)]
pub(crate) struct DomainTable {
    domains: RwLock<BTreeMap<String, Arc<dyn Domain>>>,
}

impl DomainTable {
    pub fn add(&self, domain: Arc<dyn Domain>) -> Result<(), Error> {
        let name = domain.name().to_string();
        let mut map = self.domains.write().unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(&name) {
            return Err(Error::DomainExists(name));
        }
        map.insert(name, domain);
        Ok(())
    }

    pub fn remove(&self, name: &str) -> Option<Arc<dyn Domain>> {
        self.domains
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
    }

    /// The domains in name order (a copy: no lock is held while they work).
    pub fn snapshot(&self) -> Vec<Arc<dyn Domain>> {
        self.domains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.domains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.domains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Every domain's pods and containers, domains in name order.
    pub async fn list(&self) -> (Vec<PodSandbox>, Vec<Container>) {
        let (mut pods, mut containers) = (Vec::new(), Vec::new());
        for d in self.snapshot() {
            pods.extend(d.list_pod_sandboxes().await);
            containers.extend(d.list_containers().await);
        }
        (pods, containers)
    }

    /// The domain that has container `id` (the first in name order).
    async fn owner(domains: &[Arc<dyn Domain>], id: &str) -> Option<Arc<dyn Domain>> {
        for d in domains {
            if d.has_container(id).await {
                return Some(d.clone());
            }
        }
        None
    }

    /// Applies evictions, then updates, each through the domain that has
    /// the container. A container no domain has counts as failed. Updates
    /// marked `ignore_failure` never count as failed.
    pub async fn apply(
        &self,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> FailedUpdates {
        let mut failed = FailedUpdates::default();
        if updates.is_empty() && evictions.is_empty() {
            return failed;
        }
        let domains = self.snapshot();
        for e in evictions {
            match Self::owner(&domains, &e.container_id).await {
                None => {
                    tracing::warn!(container = %e.container_id,
                        "NRI eviction of a container no domain has");
                    failed.evictions.push(e);
                }
                Some(d) => match d.evict_container(&e).await {
                    Ok(()) => {
                        tracing::info!(domain = d.name(), container = %e.container_id,
                            reason = %e.reason, "NRI evicted container");
                    }
                    Err(err) => {
                        tracing::warn!(domain = d.name(), container = %e.container_id,
                            error = %err, "NRI eviction failed");
                        failed.evictions.push(e);
                    }
                },
            }
        }
        for u in updates {
            match Self::owner(&domains, &u.container_id).await {
                None => {
                    tracing::warn!(container = %u.container_id,
                        ignored = u.ignore_failure, "NRI update of a container no domain has");
                    if !u.ignore_failure {
                        failed.updates.push(u);
                    }
                }
                Some(d) => match d.update_container(&u).await {
                    Ok(()) => {
                        tracing::debug!(domain = d.name(), container = %u.container_id,
                            "NRI updated container");
                    }
                    Err(err) => {
                        tracing::warn!(domain = d.name(), container = %u.container_id,
                            ignored = u.ignore_failure, error = %err, "NRI update failed");
                        if !u.ignore_failure {
                            failed.updates.push(u);
                        }
                    }
                },
            }
        }
        failed
    }
}
