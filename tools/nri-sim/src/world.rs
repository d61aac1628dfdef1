//! The simulated runtime's pods and containers, and the [`Domain`] through
//! which the integration layer lists them and applies the updates and
//! evictions plugins ask for.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use nri_api::{Container, ContainerEviction, ContainerState, ContainerUpdate, PodSandbox};
use nri_integration::{BoxError, Domain};
use serde_json::Value;
use tokio::sync::Notify;

/// Where a container is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtrState {
    /// Declared, not created.
    Defined,
    /// Created.
    Created,
    /// Running.
    Running,
    /// Stopped (or exited).
    Stopped,
    /// Removed.
    Removed,
    /// Evicted by a plugin.
    Evicted,
}

impl CtrState {
    /// Lower-case name, as in reports and `expect.state`.
    pub fn as_str(self) -> &'static str {
        match self {
            CtrState::Defined => "defined",
            CtrState::Created => "created",
            CtrState::Running => "running",
            CtrState::Stopped => "stopped",
            CtrState::Removed => "removed",
            CtrState::Evicted => "evicted",
        }
    }

    fn nri(self) -> Option<ContainerState> {
        match self {
            CtrState::Created => Some(ContainerState::ContainerCreated),
            CtrState::Running => Some(ContainerState::ContainerRunning),
            CtrState::Stopped | CtrState::Evicted => Some(ContainerState::ContainerStopped),
            CtrState::Defined | CtrState::Removed => None,
        }
    }
}

/// Where a pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Declared, not run.
    Defined,
    /// Running.
    Ready,
    /// Stopped.
    Stopped,
    /// Removed.
    Removed,
}

/// A container.
#[derive(Debug, Clone)]
pub struct Ctr {
    /// Name.
    pub name: String,
    /// Id.
    pub id: String,
    /// Its pod's id.
    pub pod_id: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// The spec before any plugin touched it.
    pub base: Value,
    /// The current spec.
    pub spec: Value,
    /// State.
    pub state: CtrState,
    /// Exit code, once exited.
    pub exit_code: i32,
    /// Why it was evicted.
    pub evicted: Option<String>,
}

impl Ctr {
    /// The NRI view of the container (from its current spec).
    pub fn nri(&self) -> Container {
        let mut c =
            crate::spec::container(&self.id, &self.name, &self.pod_id, &self.labels, &self.spec);
        c.state = self.state.nri().map_or(0, |s| s as i32);
        c.exit_code = self.exit_code;
        c
    }
}

/// A pod.
#[derive(Debug, Clone)]
pub struct Pod {
    /// The NRI pod.
    pub pod: PodSandbox,
    /// State.
    pub state: PodState,
}

/// An update or eviction a plugin asked for.
#[derive(Debug, Clone)]
pub struct Applied {
    /// Container id.
    pub container: String,
    /// The update (`None` for an eviction).
    pub update: Option<ContainerUpdate>,
    /// Eviction reason.
    pub evicted: Option<String>,
    /// Why it could not be applied.
    pub error: Option<String>,
    /// Whether it arrived outside of a lifecycle step (a plugin's own
    /// initiative).
    pub unsolicited: bool,
}

#[derive(Default)]
struct State {
    pods: Vec<Pod>,
    ctrs: Vec<Ctr>,
    applied: Vec<Applied>,
    in_step: bool,
}

/// The simulated runtime namespace.
#[derive(Default)]
pub struct World {
    state: Mutex<State>,
    changed: Notify,
}

impl World {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a pod.
    pub fn add_pod(&self, pod: Pod) {
        self.lock().pods.push(pod);
    }

    /// Adds a container.
    pub fn add_ctr(&self, ctr: Ctr) {
        self.lock().ctrs.push(ctr);
    }

    /// The pod named `name`.
    pub fn pod(&self, name: &str) -> Option<Pod> {
        self.lock()
            .pods
            .iter()
            .find(|p| p.pod.name == name)
            .cloned()
    }

    /// The pod with id `id`.
    pub fn pod_by_id(&self, id: &str) -> Option<Pod> {
        self.lock().pods.iter().find(|p| p.pod.id == id).cloned()
    }

    /// The container named `name`.
    pub fn ctr(&self, name: &str) -> Option<Ctr> {
        self.lock().ctrs.iter().find(|c| c.name == name).cloned()
    }

    /// Every container, in declaration order.
    pub fn ctrs(&self) -> Vec<Ctr> {
        self.lock().ctrs.clone()
    }

    /// Changes the pod named `name`.
    pub fn set_pod_state(&self, name: &str, state: PodState) {
        if let Some(p) = self.lock().pods.iter_mut().find(|p| p.pod.name == name) {
            p.state = state;
        }
    }

    /// Changes the container named `name`.
    pub fn with_ctr(&self, name: &str, f: impl FnOnce(&mut Ctr)) {
        if let Some(c) = self.lock().ctrs.iter_mut().find(|c| c.name == name) {
            f(c);
        }
    }

    /// Container id to name.
    pub fn name_of(&self, id: &str) -> String {
        self.lock()
            .ctrs
            .iter()
            .find(|c| c.id == id)
            .map_or_else(|| id.to_string(), |c| c.name.clone())
    }

    /// Marks whether a lifecycle step is running.
    pub fn set_in_step(&self, in_step: bool) {
        self.lock().in_step = in_step;
    }

    /// Number of updates and evictions so far.
    pub fn applied_len(&self) -> usize {
        self.lock().applied.len()
    }

    /// The updates and evictions from position `from` on.
    pub fn applied_since(&self, from: usize) -> Vec<Applied> {
        self.lock()
            .applied
            .get(from..)
            .map(<[Applied]>::to_vec)
            .unwrap_or_default()
    }

    /// The updates and evictions that arrived outside of lifecycle steps.
    pub fn unsolicited(&self) -> Vec<Applied> {
        self.lock()
            .applied
            .iter()
            .filter(|a| a.unsolicited)
            .cloned()
            .collect()
    }

    /// Waits until at least `count` unsolicited updates or evictions have
    /// arrived, or until `deadline`; returns how many there are.
    pub async fn wait_unsolicited(&self, count: usize, deadline: tokio::time::Instant) -> usize {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let n = self.lock().applied.iter().filter(|a| a.unsolicited).count();
            if n >= count {
                return n;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.lock().applied.iter().filter(|a| a.unsolicited).count();
            }
        }
    }

    fn record(&self, a: Applied) {
        let mut st = self.lock();
        let unsolicited = !st.in_step;
        st.applied.push(Applied { unsolicited, ..a });
        drop(st);
        self.changed.notify_waiters();
    }
}

#[nri_integration::async_trait]
impl Domain for World {
    fn name(&self) -> &str {
        "k8s.io"
    }

    async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> {
        self.lock()
            .pods
            .iter()
            .filter(|p| matches!(p.state, PodState::Ready | PodState::Stopped))
            .map(|p| p.pod.clone())
            .collect()
    }

    async fn list_containers(&self) -> Vec<Container> {
        self.lock()
            .ctrs
            .iter()
            .filter(|c| c.state.nri().is_some())
            .map(Ctr::nri)
            .collect()
    }

    async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox> {
        self.pod_by_id(id).map(|p| p.pod)
    }

    async fn get_container(&self, id: &str) -> Option<Container> {
        self.lock()
            .ctrs
            .iter()
            .find(|c| c.id == id && c.state.nri().is_some())
            .map(Ctr::nri)
    }

    async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError> {
        let result = {
            let mut st = self.lock();
            match st
                .ctrs
                .iter_mut()
                .find(|c| c.id == update.container_id && c.state.nri().is_some())
            {
                None => Err(format!("no container {:?}", update.container_id)),
                Some(c) => {
                    let mut spec = c.spec.clone();
                    let applied = nri_oci::Generator::new(&mut spec)
                        .without_mount_propagation_check()
                        .apply_update(update);
                    match applied {
                        Ok(()) => {
                            c.spec = spec;
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    }
                }
            }
        };
        self.record(Applied {
            container: update.container_id.clone(),
            update: Some(update.clone()),
            evicted: None,
            error: result.as_ref().err().cloned(),
            unsolicited: false,
        });
        result.map_err(Into::into)
    }

    async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError> {
        let result = {
            let mut st = self.lock();
            match st
                .ctrs
                .iter_mut()
                .find(|c| c.id == eviction.container_id && c.state.nri().is_some())
            {
                None => Err(format!("no container {:?}", eviction.container_id)),
                Some(c) => {
                    c.state = CtrState::Evicted;
                    c.evicted = Some(eviction.reason.clone());
                    Ok(())
                }
            }
        };
        self.record(Applied {
            container: eviction.container_id.clone(),
            update: None,
            evicted: Some(eviction.reason.clone()),
            error: result.as_ref().err().cloned(),
            unsolicited: false,
        });
        result.map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        let w = World::default();
        let spec = crate::spec::default_spec("app", "u");
        w.add_ctr(Ctr {
            name: "app".into(),
            id: "ctr-app".into(),
            pod_id: "pod".into(),
            labels: BTreeMap::new(),
            base: spec.clone(),
            spec,
            state: CtrState::Running,
            exit_code: 0,
            evicted: None,
        });
        w
    }

    #[tokio::test]
    async fn updates_change_the_spec_and_are_recorded() {
        let w = world();
        let mut u = ContainerUpdate::for_container("ctr-app");
        u.set_linux_cpu_shares(512);
        w.update_container(&u).await.unwrap();
        assert_eq!(
            w.ctr("app").unwrap().spec["linux"]["resources"]["cpu"]["shares"],
            512
        );
        let applied = w.applied_since(0);
        assert!(applied[0].unsolicited && applied[0].error.is_none());

        w.set_in_step(true);
        let err = w
            .update_container(&ContainerUpdate::for_container("nope"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no container"));
        let applied = w.applied_since(1);
        assert!(!applied[0].unsolicited);
        assert!(applied[0].error.is_some());
    }

    #[tokio::test]
    async fn evictions_mark_the_container() {
        let w = world();
        w.evict_container(&ContainerEviction {
            container_id: "ctr-app".into(),
            reason: "memory".into(),
        })
        .await
        .unwrap();
        let c = w.ctr("app").unwrap();
        assert_eq!(c.state, CtrState::Evicted);
        assert_eq!(c.evicted.as_deref(), Some("memory"));
        assert_eq!(
            w.list_containers().await[0].state,
            ContainerState::ContainerStopped as i32
        );
    }
}
