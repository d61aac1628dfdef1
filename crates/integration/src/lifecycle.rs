//! The lifecycle entry points of [`Nri`]: each is a no-op unless NRI is
//! enabled and running; stops and removals are claimed in the lifecycle
//! state first, so each reaches plugins once.

use nri_adaptation::Adaptation;
use nri_api::*;

use crate::error::Error;
use crate::nri::Nri;
use crate::outcome::{Adjustment, FailedUpdates, ResourceUpdate};

/// Keeps the first error of a sequence of calls that all have to run.
fn first_error(first: Result<(), Error>, second: Result<(), Error>) -> Result<(), Error> {
    match (first, second) {
        (Err(e), other) => {
            if let Err(later) = other {
                tracing::warn!(error = %later, "NRI call failed after an earlier failure");
            }
            Err(e)
        }
        (Ok(()), other) => other,
    }
}

impl Nri {
    fn adaptation(&self) -> Option<Adaptation> {
        self.core.current()
    }

    /// Applies the side effects of a lifecycle reply through the domains.
    async fn apply(
        &self,
        event: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> FailedUpdates {
        let failed = self.core.domains.apply(updates, evictions).await;
        if !failed.is_empty() {
            tracing::warn!(
                event,
                failed_updates = failed.updates.len(),
                failed_evictions = failed.evictions.len(),
                "container updates requested by NRI plugins failed"
            );
        }
        failed
    }

    /// A pod sandbox is being started.
    pub async fn run_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        self.core
            .lifecycle
            .pods
            .set_new(&pod.id, crate::LifecycleState::Running);
        a.run_pod_sandbox(RunPodSandboxRequest {
            pod: Some(pod.clone()),
        })
        .await?;
        Ok(())
    }

    /// A pod's resources are being updated (`overhead` and `resources` as
    /// requested).
    pub async fn update_pod_sandbox(
        &self,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        a.update_pod_sandbox(UpdatePodSandboxRequest {
            pod: Some(pod.clone()),
            overhead_linux_resources: overhead.cloned(),
            linux_resources: resources.cloned(),
        })
        .await?;
        Ok(())
    }

    /// A pod's resources were updated.
    pub async fn post_update_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        a.post_update_pod_sandbox(PostUpdatePodSandboxRequest {
            pod: Some(pod.clone()),
        })
        .await?;
        Ok(())
    }

    /// A pod sandbox is being stopped. Reaches plugins once: later calls
    /// for the same pod do nothing, unless this one failed (a retry
    /// delivers the event again).
    pub async fn stop_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        let Some(was) = self.core.lifecycle.pods.claim_stop_from(&pod.id) else {
            tracing::debug!(pod = %pod.id, "NRI: pod does not need stopping");
            return Ok(());
        };
        let stopped = a
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod: Some(pod.clone()),
            })
            .await;
        if stopped.is_err() {
            // A retried stop must reach the plugins again.
            self.core.lifecycle.pods.unclaim_stop(&pod.id, was);
        }
        stopped.map_err(Error::from)
    }

    /// A pod sandbox is being removed. Reaches plugins once; if the pod's
    /// stop never reached them, StopPodSandbox is sent first.
    pub async fn remove_pod_sandbox(&self, pod: &PodSandbox) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        let claim = self.core.lifecycle.pods.claim_remove(&pod.id);
        let stopped = if claim.stop {
            a.stop_pod_sandbox(StopPodSandboxRequest {
                pod: Some(pod.clone()),
            })
            .await
            .map_err(Error::from)
        } else {
            Ok(())
        };
        let removed = if claim.remove {
            a.remove_pod_sandbox(RemovePodSandboxRequest {
                pod: Some(pod.clone()),
            })
            .await
            .map_err(Error::from)
        } else {
            Ok(())
        };
        if removed.is_err() {
            // A retried removal must reach the plugins again (with the stop
            // if that failed too; a stop that failed before a removal that
            // reached them is over: the object is gone for them).
            let state = claim.retry_state(stopped.is_err());
            self.core.lifecycle.pods.unclaim_remove(&pod.id, state);
        }
        first_error(stopped, removed)
    }

    /// A container is being created: plugins may adjust it. Evictions and
    /// updates of other containers that plugins ask for are applied through
    /// the domains before this returns.
    ///
    /// The container counts as created even if this fails (a plugin may
    /// have reserved something for it): if the runtime gives up on the
    /// container, it calls
    /// [`undo_create_container`](Self::undo_create_container).
    pub async fn create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<Adjustment, Error> {
        let Some(a) = self.adaptation() else {
            return Ok(Adjustment::default());
        };
        self.core.exits.cancel(&ctr.id);
        self.core
            .lifecycle
            .containers
            .set_new(&ctr.id, crate::LifecycleState::Created);
        let reply = a
            .create_container(CreateContainerRequest {
                pod: Some(pod.clone()),
                container: Some(ctr.clone()),
            })
            .await?;
        let failed = self
            .apply("CreateContainer", reply.update, reply.evict)
            .await;
        Ok(Adjustment {
            adjust: reply.adjust,
            failed,
        })
    }

    /// Undoes a creation that failed after
    /// [`create_container`](Self::create_container) (whether that call
    /// failed or the runtime failed later): sends StopContainer and
    /// RemoveContainer, each only if still due, so plugins can release
    /// what they reserved. Both are attempted; the first error is returned.
    pub async fn undo_create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        self.remove(pod, ctr).await
    }

    /// A container was created.
    pub async fn post_create_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        a.post_create_container(PostCreateContainerRequest {
            pod: Some(pod.clone()),
            container: Some(ctr.clone()),
        })
        .await?;
        Ok(())
    }

    /// A container is being started.
    pub async fn start_container(&self, pod: &PodSandbox, ctr: &Container) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        self.core.lifecycle.containers.started(&ctr.id);
        a.start_container(StartContainerRequest {
            pod: Some(pod.clone()),
            container: Some(ctr.clone()),
        })
        .await?;
        Ok(())
    }

    /// A container was started.
    pub async fn post_start_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        a.post_start_container(PostStartContainerRequest {
            pod: Some(pod.clone()),
            container: Some(ctr.clone()),
        })
        .await?;
        Ok(())
    }

    /// A container's resources are being updated to `resources`. Returns
    /// the resources to apply: the plugins' merged result if one changed
    /// them, else `resources` unchanged (also when NRI is not running).
    /// Updates of other containers and evictions are applied through the
    /// domains before this returns.
    pub async fn update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> Result<ResourceUpdate, Error> {
        let unchanged = ResourceUpdate {
            resources: resources.cloned(),
            ..ResourceUpdate::default()
        };
        let Some(a) = self.adaptation() else {
            return Ok(unchanged);
        };
        let reply = a
            .update_container(UpdateContainerRequest {
                pod: Some(pod.clone()),
                container: Some(ctr.clone()),
                linux_resources: resources.cloned(),
            })
            .await?;
        let (target, others): (Vec<_>, Vec<_>) = reply
            .update
            .into_iter()
            .partition(|u| u.container_id == ctr.id);
        let failed = self.apply("UpdateContainer", others, reply.evict).await;
        let merged = target
            .into_iter()
            .next_back()
            .and_then(|u| u.linux)
            .and_then(|l| l.resources);
        Ok(match merged {
            Some(resources) => ResourceUpdate {
                resources: Some(resources),
                adjusted: true,
                failed,
            },
            None => ResourceUpdate {
                failed,
                ..unchanged
            },
        })
    }

    /// A container's resources were updated.
    pub async fn post_update_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        a.post_update_container(PostUpdateContainerRequest {
            pod: Some(pod.clone()),
            container: Some(ctr.clone()),
        })
        .await?;
        Ok(())
    }

    /// A container is being stopped. Reaches plugins once (later stops and
    /// exit notifications of the container do nothing, unless this one
    /// failed: a retry delivers it again); updates of other
    /// containers plugins answer with are applied through the domains.
    pub async fn stop_container(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<FailedUpdates, Error> {
        let Some(a) = self.adaptation() else {
            return Ok(FailedUpdates::default());
        };
        self.core.exits.cancel(&ctr.id);
        let Some(was) = self.core.lifecycle.containers.claim_stop_from(&ctr.id) else {
            tracing::debug!(container = %ctr.id, "NRI: container does not need stopping");
            return Ok(FailedUpdates::default());
        };
        let stopped = self.send_stop(&a, pod, ctr).await;
        if stopped.is_err() {
            // A retried stop must reach the plugins again.
            self.core.lifecycle.containers.unclaim_stop(&ctr.id, was);
        }
        stopped
    }

    async fn send_stop(
        &self,
        a: &Adaptation,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> Result<FailedUpdates, Error> {
        let reply = a
            .stop_container(StopContainerRequest {
                pod: Some(pod.clone()),
                container: Some(ctr.clone()),
            })
            .await?;
        Ok(self.apply("StopContainer", reply.update, Vec::new()).await)
    }

    /// A container exited. Returns at once: the notification is queued
    /// (coalesced per container) and delivered by a background task as
    /// StopContainer, unless the container's stop already reached plugins.
    ///
    /// While NRI is enabled but not running, or no domain is registered
    /// yet, notifications wait in the queue; when disabled they are
    /// dropped. See [`Nri`] on start-up.
    pub fn notify_container_exit(&self, pod: PodSandbox, ctr: Container) {
        if !self.is_enabled() {
            return;
        }
        let id = ctr.id.clone();
        if !self.core.exits.push(pod, ctr) {
            tracing::debug!(container = %id, "NRI exit notification merged into a pending one");
        }
    }

    /// Delivers one queued exit (called by the delivery task).
    pub(crate) async fn deliver_exit(&self, pod: PodSandbox, ctr: Container) {
        let Some(a) = self.adaptation() else {
            // NRI stopped meanwhile: keep it for the next start.
            self.core.exits.push_front(pod, ctr);
            return;
        };
        let Some(was) = self.core.lifecycle.containers.claim_stop_from(&ctr.id) else {
            tracing::debug!(container = %ctr.id, "NRI: exited container needs no stop");
            return;
        };
        tracing::debug!(container = %ctr.id, "NRI: delivering container exit");
        if let Err(e) = self.send_stop(&a, &pod, &ctr).await {
            tracing::warn!(container = %ctr.id, error = %e,
                "NRI StopContainer for an exited container failed");
            // The runtime's own stop or removal of the container sends it again.
            self.core.lifecycle.containers.unclaim_stop(&ctr.id, was);
        }
    }

    /// A container is being removed. Reaches plugins once; if the
    /// container's stop never reached them, StopContainer is sent first
    /// (and a pending exit notification is dropped).
    pub async fn remove_container(&self, pod: &PodSandbox, ctr: &Container) -> Result<(), Error> {
        self.remove(pod, ctr).await
    }

    async fn remove(&self, pod: &PodSandbox, ctr: &Container) -> Result<(), Error> {
        let Some(a) = self.adaptation() else {
            return Ok(());
        };
        self.core.exits.cancel(&ctr.id);
        let claim = self.core.lifecycle.containers.claim_remove(&ctr.id);
        let stopped = if claim.stop {
            self.send_stop(&a, pod, ctr).await.map(|_| ())
        } else {
            Ok(())
        };
        let removed = if claim.remove {
            a.remove_container(RemoveContainerRequest {
                pod: Some(pod.clone()),
                container: Some(ctr.clone()),
            })
            .await
            .map_err(Error::from)
        } else {
            Ok(())
        };
        if removed.is_err() {
            // A retried removal must reach the plugins again (with the stop
            // if that failed too; a stop that failed before a removal that
            // reached them is over: the object is gone for them).
            let state = claim.retry_state(stopped.is_err());
            self.core
                .lifecycle
                .containers
                .unclaim_remove(&ctr.id, state);
        }
        first_error(stopped, removed)
    }
}
