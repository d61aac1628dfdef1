//! Per-pod and per-container lifecycle state: what plugins have been told,
//! so that StopXxx and RemoveXxx reach them exactly once.
//!
//! Every transition *claims* its event under a short lock before the event
//! is sent: of two concurrent stops (say an explicit stop and an exit
//! notification) exactly one sees `Created`/`Running` and sends
//! StopContainer; the other sees `Stopped` and sends nothing.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use nri_api::{Container, ContainerState, PodSandbox};

/// Where a pod or container is in its life, as far as plugins know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LifecycleState {
    /// Created (CreateContainer sent), not started yet. Pods are never in
    /// this state.
    Created,
    /// Running (RunPodSandbox or StartContainer sent, or listed as running
    /// or paused by a synchronization).
    Running,
    /// Stopped (StopPodSandbox or StopContainer sent).
    Stopped,
    /// Removed, or never known: nothing more is sent for it.
    Removed,
}

/// What a removal has to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RemoveClaim {
    /// The stop was missed: send it first.
    pub stop: bool,
    /// Send the removal.
    pub remove: bool,
}

impl RemoveClaim {
    /// The state to put back when the claimed events failed, so that a
    /// retried removal sends them again: running if the stop failed,
    /// stopped if only the removal did.
    pub fn retry_state(&self, stop_failed: bool) -> LifecycleState {
        if self.stop && stop_failed {
            LifecycleState::Running
        } else {
            LifecycleState::Stopped
        }
    }
}

/// The states of one kind of object (pods or containers). Removed objects
/// are not stored.
#[derive(Default)]
pub(crate) struct StateTable {
    map: Mutex<HashMap<String, LifecycleState>>,
}

impl StateTable {
    fn map(&self) -> MutexGuard<'_, HashMap<String, LifecycleState>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, id: &str) -> LifecycleState {
        self.map()
            .get(id)
            .copied()
            .unwrap_or(LifecycleState::Removed)
    }

    /// A new object: whatever was recorded under the id before is replaced.
    pub fn set_new(&self, id: &str, state: LifecycleState) {
        self.map().insert(id.to_string(), state);
    }

    /// Created (or unknown) becomes Running; a stopped object stays stopped.
    pub fn started(&self, id: &str) {
        let mut map = self.map();
        let state = map.entry(id.to_string()).or_insert(LifecycleState::Running);
        if *state == LifecycleState::Created {
            *state = LifecycleState::Running;
        }
    }

    /// True if the object must be stopped; it is then recorded as stopped.
    #[cfg(test)]
    pub fn claim_stop(&self, id: &str) -> bool {
        self.claim_stop_from(id).is_some()
    }

    /// As [`claim_stop`](Self::claim_stop), returning the state the object
    /// was in, for [`unclaim_stop`](Self::unclaim_stop).
    pub fn claim_stop_from(&self, id: &str) -> Option<LifecycleState> {
        match self.map().get_mut(id) {
            Some(s @ (LifecycleState::Created | LifecycleState::Running)) => {
                let was = *s;
                *s = LifecycleState::Stopped;
                Some(was)
            }
            _ => None,
        }
    }

    /// A claimed stop failed: the object is back in the state it was
    /// claimed from, so that the next stop sends the event again. Nothing
    /// changes if the object moved on meanwhile (removed).
    pub fn unclaim_stop(&self, id: &str, was: LifecycleState) {
        if let Some(s @ LifecycleState::Stopped) = self.map().get_mut(id) {
            *s = was;
        }
    }

    /// A claimed removal failed: the object is known again in `state`
    /// (see [`RemoveClaim::retry_state`]), unless it was recreated meanwhile.
    pub fn unclaim_remove(&self, id: &str, state: LifecycleState) {
        self.map().entry(id.to_string()).or_insert(state);
    }

    /// What removing the object has to send; it is then forgotten.
    pub fn claim_remove(&self, id: &str) -> RemoveClaim {
        match self.map().remove(id) {
            Some(LifecycleState::Created | LifecycleState::Running) => RemoveClaim {
                stop: true,
                remove: true,
            },
            Some(LifecycleState::Stopped) => RemoveClaim {
                stop: false,
                remove: true,
            },
            Some(LifecycleState::Removed) | None => RemoveClaim::default(),
        }
    }

    /// Records a state seen in a synchronization. States only move forward
    /// (Created, Running, Stopped): a listing taken before a stop was
    /// processed cannot make the object look running again.
    pub fn observe(&self, id: &str, seen: LifecycleState) {
        if seen == LifecycleState::Removed {
            return;
        }
        let mut map = self.map();
        let state = map.entry(id.to_string()).or_insert(seen);
        if seen > *state {
            *state = seen;
        }
    }

    pub fn clear(&self) {
        self.map().clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map().len()
    }
}

/// The state tables of pods and containers.
#[derive(Default)]
pub(crate) struct Lifecycle {
    pub pods: StateTable,
    pub containers: StateTable,
}

impl Lifecycle {
    /// Records what a synchronization told plugins: listed pods are running
    /// (unless already stopped), listed containers in the state they were
    /// listed with.
    pub fn synchronized(&self, pods: &[PodSandbox], containers: &[Container]) {
        for pod in pods {
            self.pods.observe(&pod.id, LifecycleState::Running);
        }
        for ctr in containers {
            self.containers.observe(&ctr.id, container_state(ctr.state));
        }
    }

    pub fn clear(&self) {
        self.pods.clear();
        self.containers.clear();
    }
}

/// The lifecycle state of a listed container state.
fn container_state(state: i32) -> LifecycleState {
    match ContainerState::try_from(state) {
        Ok(ContainerState::ContainerCreated) => LifecycleState::Created,
        Ok(ContainerState::ContainerRunning | ContainerState::ContainerPaused) => {
            LifecycleState::Running
        }
        Ok(ContainerState::ContainerStopped) => LifecycleState::Stopped,
        Ok(ContainerState::ContainerUnknown) | Err(_) => LifecycleState::Removed,
    }
}

#[cfg(test)]
mod tests {
    use super::LifecycleState::*;
    use super::*;

    #[test]
    fn stop_is_claimed_once() {
        let t = StateTable::default();
        assert!(!t.claim_stop("c"), "unknown objects are not stopped");
        t.set_new("c", Created);
        assert!(t.claim_stop("c"));
        assert!(!t.claim_stop("c"));
        assert_eq!(t.get("c"), Stopped);
        assert_eq!(
            t.claim_remove("c"),
            RemoveClaim {
                stop: false,
                remove: true
            }
        );
        assert_eq!(t.claim_remove("c"), RemoveClaim::default());
        assert_eq!(t.get("c"), Removed);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn failed_claims_are_given_back_for_a_retry() {
        let t = StateTable::default();
        t.set_new("c", Created);
        t.started("c");
        assert_eq!(t.claim_stop_from("c"), Some(Running));
        assert_eq!(t.claim_stop_from("c"), None);
        t.unclaim_stop("c", Running);
        assert!(t.claim_stop("c"), "a failed stop is sent again");

        t.set_new("d", Running);
        let claim = t.claim_remove("d");
        assert!(claim.stop && claim.remove);
        // The stop sent first failed: the retry sends both again.
        t.unclaim_remove("d", claim.retry_state(true));
        assert_eq!(t.claim_remove("d"), claim);
        // Only the removal failed: the retry sends the removal alone.
        t.unclaim_remove("d", claim.retry_state(false));
        assert_eq!(
            t.claim_remove("d"),
            RemoveClaim {
                stop: false,
                remove: true
            }
        );
        // A stop given back after the object was removed changes nothing.
        t.unclaim_stop("d", Running);
        assert_eq!(t.get("d"), Removed);
    }

    #[test]
    fn remove_implies_a_missed_stop() {
        let t = StateTable::default();
        t.set_new("c", Created);
        t.started("c");
        assert_eq!(t.get("c"), Running);
        assert_eq!(
            t.claim_remove("c"),
            RemoveClaim {
                stop: true,
                remove: true
            }
        );
        assert!(!t.claim_stop("c"));
    }

    #[test]
    fn start_never_revives_a_stopped_object() {
        let t = StateTable::default();
        t.set_new("c", Created);
        assert!(t.claim_stop("c"));
        t.started("c");
        assert_eq!(t.get("c"), Stopped);
        t.started("unknown");
        assert_eq!(t.get("unknown"), Running);
    }

    #[test]
    fn synchronization_only_moves_forward() {
        let l = Lifecycle::default();
        l.containers.set_new("a", Created);
        assert!(l.containers.claim_stop("a"));
        let listed = |id: &str, s: ContainerState| Container {
            id: id.into(),
            state: s as i32,
            ..Default::default()
        };
        l.synchronized(
            &[PodSandbox {
                id: "p".into(),
                ..Default::default()
            }],
            &[
                listed("a", ContainerState::ContainerRunning),
                listed("b", ContainerState::ContainerPaused),
                listed("c", ContainerState::ContainerCreated),
                listed("d", ContainerState::ContainerUnknown),
            ],
        );
        assert_eq!(l.containers.get("a"), Stopped);
        assert_eq!(l.containers.get("b"), Running);
        assert_eq!(l.containers.get("c"), Created);
        assert_eq!(l.containers.get("d"), Removed);
        assert_eq!(l.pods.get("p"), Running);
        l.clear();
        assert_eq!(l.containers.get("b"), Removed);
    }
}
