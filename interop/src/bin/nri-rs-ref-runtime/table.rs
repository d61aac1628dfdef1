//! The runtime's in-memory pods and containers (as `nri-ref-runtime` keeps
//! them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use nri_api::{
    Container, ContainerState, ContainerUpdate, LinuxContainer, LinuxResources, PodSandbox,
};

use crate::scenario::Scenario;

#[derive(Default)]
struct Inner {
    def_pods: BTreeMap<String, PodSandbox>,
    def_ctrs: BTreeMap<String, Container>,
    pods: BTreeMap<String, PodSandbox>,
    containers: BTreeMap<String, Container>,
    pod_order: Vec<String>,
    ctr_order: Vec<String>,
}

/// The table; safe for concurrent use (the adaptation calls the runtime
/// hooks from its own tasks while steps run).
#[derive(Default)]
pub struct Table {
    inner: Mutex<Inner>,
}

impl Table {
    /// The initial table: every pod and container of the scenario except
    /// those a step creates.
    pub fn new(s: &Scenario) -> Table {
        let (created_pods, created_ctrs) = s.created();
        let mut t = Inner::default();
        for p in &s.pods {
            t.def_pods.insert(p.id.clone(), p.clone());
            t.pod_order.push(p.id.clone());
            if !created_pods.contains(&p.id) {
                t.pods.insert(p.id.clone(), p.clone());
            }
        }
        for c in &s.containers {
            t.def_ctrs.insert(c.id.clone(), c.clone());
            t.ctr_order.push(c.id.clone());
            if !created_ctrs.contains(&c.id) {
                t.containers.insert(c.id.clone(), c.clone());
            }
        }
        Table {
            inner: Mutex::new(t),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies of the pods and containers in the table, in scenario order.
    pub fn snapshot(&self) -> (Vec<PodSandbox>, Vec<Container>) {
        let t = self.lock();
        let pods = t
            .pod_order
            .iter()
            .filter_map(|id| t.pods.get(id).cloned())
            .collect();
        let ctrs = t
            .ctr_order
            .iter()
            .filter_map(|id| t.containers.get(id).cloned())
            .collect();
        (pods, ctrs)
    }

    /// The pod: table entry, else definition, else a bare pod.
    pub fn pod(&self, id: &str) -> PodSandbox {
        let t = self.lock();
        t.pods
            .get(id)
            .or_else(|| t.def_pods.get(id))
            .cloned()
            .unwrap_or_else(|| PodSandbox {
                id: id.to_string(),
                ..Default::default()
            })
    }

    /// The container (table entry, else definition, else bare) and its pod.
    pub fn container(&self, id: &str) -> (PodSandbox, Container) {
        let ctr = {
            let t = self.lock();
            t.containers
                .get(id)
                .or_else(|| t.def_ctrs.get(id))
                .cloned()
                .unwrap_or_else(|| Container {
                    id: id.to_string(),
                    ..Default::default()
                })
        };
        (self.pod(&ctr.pod_sandbox_id), ctr)
    }

    pub fn add_pod(&self, p: PodSandbox) {
        let mut t = self.lock();
        if !t.pod_order.contains(&p.id) {
            t.pod_order.push(p.id.clone());
        }
        t.pods.insert(p.id.clone(), p);
    }

    pub fn remove_pod(&self, id: &str) {
        self.lock().pods.remove(id);
    }

    pub fn add_container(&self, c: Container) {
        let mut t = self.lock();
        if !t.ctr_order.contains(&c.id) {
            t.ctr_order.push(c.id.clone());
        }
        t.containers.insert(c.id.clone(), c);
    }

    pub fn remove_container(&self, id: &str) {
        self.lock().containers.remove(id);
    }

    pub fn set_state(&self, id: &str, state: ContainerState) {
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.state = state as i32;
        }
    }

    fn has(&self, id: &str) -> bool {
        self.lock().containers.contains_key(id)
    }

    /// Replaces the Linux resources of a container in the table.
    pub fn set_resources(&self, id: &str, res: Option<&LinuxResources>) {
        let Some(res) = res else { return };
        if let Some(c) = self.lock().containers.get_mut(id) {
            c.linux
                .get_or_insert_with(LinuxContainer::default)
                .resources = Some(res.clone());
        }
    }

    /// Applies updates (replacing each updated container's resources) and
    /// returns those that failed: listed in `fail` or not in the table.
    pub fn apply_updates(
        &self,
        updates: &[ContainerUpdate],
        fail: &BTreeSet<String>,
    ) -> Vec<ContainerUpdate> {
        let mut failed = Vec::new();
        for u in updates {
            if fail.contains(&u.container_id) || !self.has(&u.container_id) {
                failed.push(u.clone());
                continue;
            }
            if let Some(linux) = &u.linux {
                self.set_resources(&u.container_id, linux.resources.as_ref());
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        serde_json::from_str(
            r#"{"pods":[{"id":"p0"},{"id":"p1"}],
                "containers":[{"id":"c0","pod_sandbox_id":"p0"},{"id":"c1","pod_sandbox_id":"p1"}],
                "steps":[{"op":"RunPodSandbox","pod":"p1"},{"op":"CreateContainer","container":"c1"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn created_objects_join_later_and_updates_apply() {
        let t = Table::new(&scenario());
        let (pods, ctrs) = t.snapshot();
        assert_eq!(pods.len(), 1);
        assert_eq!(ctrs.len(), 1);
        let (pod, c1) = t.container("c1");
        assert_eq!(pod.id, "p1");
        t.add_container(c1);
        assert_eq!(t.container("nope").1.id, "nope");

        let res = LinuxResources {
            pids: Some(nri_api::LinuxPids { limit: 7 }),
            ..Default::default()
        };
        let upd = |id: &str| ContainerUpdate {
            container_id: id.into(),
            linux: Some(nri_api::LinuxContainerUpdate {
                resources: Some(res.clone()),
            }),
            ..Default::default()
        };
        let fail: BTreeSet<String> = ["c0".to_string()].into();
        let failed = t.apply_updates(&[upd("c0"), upd("c1"), upd("cx")], &fail);
        let ids: Vec<_> = failed.iter().map(|u| u.container_id.as_str()).collect();
        assert_eq!(ids, ["c0", "cx"]);
        let c1 = t.container("c1").1;
        assert_eq!(c1.linux.unwrap().resources.unwrap().pids.unwrap().limit, 7);
        t.remove_container("c1");
        assert_eq!(t.snapshot().1.len(), 1);
    }
}
