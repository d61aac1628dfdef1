//! The runtime's in-memory pods and containers, each container with its
//! OCI spec, written to `<state-dir>/<container-id>/config.json` whenever
//! it changes. [`Store`] is also the NRI [`Domain`]: plugins list the pods
//! and containers from here, and their updates and evictions land here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nri_api::{
    Container, ContainerEviction, ContainerState, ContainerUpdate, LinuxResources, PodSandbox,
};
use nri_integration::{BoxError, Domain};
use nri_oci::{AdjustError, Generator};
use serde_json::Value;
use tokio::sync::watch;

/// Why the store could not do something.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No pod with that id.
    #[error("no pod {0:?}")]
    NoPod(String),
    /// No container with that id.
    #[error("no container {0:?}")]
    NoContainer(String),
    /// The id is taken.
    #[error("{0:?} already exists")]
    Exists(String),
    /// The spec could not be changed as asked.
    #[error("cannot adjust the spec of {id}: {source}")]
    Adjust {
        /// The container.
        id: String,
        /// Why.
        #[source]
        source: AdjustError,
    },
    /// Writing or removing a file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A container and its spec.
#[derive(Debug, Clone)]
struct Entry {
    ctr: Container,
    spec: Value,
}

#[derive(Default)]
struct Tables {
    pods: BTreeMap<String, PodSandbox>,
    containers: BTreeMap<String, Entry>,
}

/// A container a plugin evicted: out of the store, NRI still to be told.
#[derive(Debug, Clone)]
pub struct Evicted {
    /// Its pod (as it was stored, or just the id if the pod is gone).
    pub pod: PodSandbox,
    /// The container, state stopped, with the eviction reason.
    pub ctr: Container,
}

/// Pods, containers and their specs; the runtime's single NRI domain.
pub struct Store {
    state_dir: PathBuf,
    tables: Mutex<Tables>,
    evicted: Mutex<Vec<Evicted>>,
    /// How many plugin updates were applied so far.
    updates: watch::Sender<usize>,
}

impl Store {
    /// An empty store writing below `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> Store {
        Store {
            state_dir: state_dir.into(),
            tables: Mutex::default(),
            evicted: Mutex::default(),
            updates: watch::Sender::new(0),
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a running pod.
    pub fn add_pod(&self, pod: PodSandbox) -> Result<(), StoreError> {
        let mut t = self.tables();
        if t.pods.contains_key(&pod.id) {
            return Err(StoreError::Exists(pod.id));
        }
        t.pods.insert(pod.id.clone(), pod);
        Ok(())
    }

    /// The pod `id`.
    pub fn pod(&self, id: &str) -> Result<PodSandbox, StoreError> {
        self.tables()
            .pods
            .get(id)
            .cloned()
            .ok_or_else(|| StoreError::NoPod(id.into()))
    }

    /// Removes the pod `id`; refused while it has containers.
    pub fn remove_pod(&self, id: &str) -> Result<PodSandbox, StoreError> {
        let mut t = self.tables();
        if let Some(c) = t.containers.values().find(|e| e.ctr.pod_sandbox_id == id) {
            return Err(StoreError::Exists(format!("{} in pod {id}", c.ctr.id)));
        }
        t.pods
            .remove(id)
            .ok_or_else(|| StoreError::NoPod(id.into()))
    }

    /// Whether the container id is taken.
    pub fn has_container_id(&self, id: &str) -> bool {
        self.tables().containers.contains_key(id)
    }

    /// Adds a created container and writes its spec; returns the path.
    pub fn add_container(&self, ctr: Container, spec: Value) -> Result<PathBuf, StoreError> {
        let mut t = self.tables();
        if t.containers.contains_key(&ctr.id) {
            return Err(StoreError::Exists(ctr.id));
        }
        let path = self.write_spec(&ctr.id, &spec)?;
        t.containers.insert(ctr.id.clone(), Entry { ctr, spec });
        Ok(path)
    }

    /// The container `id` and its pod.
    pub fn container(&self, id: &str) -> Result<(PodSandbox, Container), StoreError> {
        let t = self.tables();
        let e = t
            .containers
            .get(id)
            .ok_or_else(|| StoreError::NoContainer(id.into()))?;
        let pod = t
            .pods
            .get(&e.ctr.pod_sandbox_id)
            .cloned()
            .ok_or_else(|| StoreError::NoPod(e.ctr.pod_sandbox_id.clone()))?;
        Ok((pod, e.ctr.clone()))
    }

    /// Sets the state of container `id`; returns the container as now
    /// stored.
    pub fn set_state(&self, id: &str, state: ContainerState) -> Result<Container, StoreError> {
        let mut t = self.tables();
        let e = t
            .containers
            .get_mut(id)
            .ok_or_else(|| StoreError::NoContainer(id.into()))?;
        e.ctr.state = state as i32;
        Ok(e.ctr.clone())
    }

    /// Merges `resources` into the spec of container `id` and rewrites
    /// its `config.json`; returns the path.
    pub fn update_resources(
        &self,
        id: &str,
        resources: &LinuxResources,
    ) -> Result<PathBuf, StoreError> {
        self.edit_spec(id, |g| g.apply_resources(resources))
    }

    /// Removes container `id` and its state directory.
    pub fn remove_container(&self, id: &str) -> Result<Container, StoreError> {
        let entry = self
            .tables()
            .containers
            .remove(id)
            .ok_or_else(|| StoreError::NoContainer(id.into()))?;
        self.remove_state(id)?;
        Ok(entry.ctr)
    }

    /// Deletes the state directory of container `id` (no error if there is
    /// none).
    pub fn remove_state(&self, id: &str) -> Result<(), StoreError> {
        let dir = self.state_dir.join(id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Io { path: dir, source }),
        }
    }

    /// The containers plugins evicted since the last call.
    pub fn take_evicted(&self) -> Vec<Evicted> {
        std::mem::take(&mut *self.evicted.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits until `count` plugin updates have been applied in total;
    /// false on timeout.
    pub async fn wait_updates(&self, count: usize, timeout: Duration) -> bool {
        let mut rx = self.updates.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n >= count))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Edits the spec of `id` with the generator and writes it. The spec
    /// is replaced only if the edit and the write succeed.
    fn edit_spec(
        &self,
        id: &str,
        edit: impl FnOnce(&mut Generator<'_>) -> Result<(), AdjustError>,
    ) -> Result<PathBuf, StoreError> {
        let mut t = self.tables();
        let e = t
            .containers
            .get_mut(id)
            .ok_or_else(|| StoreError::NoContainer(id.into()))?;
        let mut spec = e.spec.clone();
        edit(&mut Generator::new(&mut spec)).map_err(|source| StoreError::Adjust {
            id: id.into(),
            source,
        })?;
        let path = self.write_spec(id, &spec)?;
        e.spec = spec;
        Ok(path)
    }

    /// Writes `<state-dir>/<id>/config.json` (through a temporary file, so
    /// a reader never sees half of it).
    fn write_spec(&self, id: &str, spec: &Value) -> Result<PathBuf, StoreError> {
        let dir = self.state_dir.join(id);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join("config.json");
        let tmp = dir.join("config.json.tmp");
        let mut text = serde_json::to_vec_pretty(spec).map_err(|e| StoreError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        text.push(b'\n');
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        Ok(path)
    }
}

#[nri_integration::async_trait]
impl Domain for Store {
    fn name(&self) -> &str {
        "mini"
    }

    async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> {
        self.tables().pods.values().cloned().collect()
    }

    async fn list_containers(&self) -> Vec<Container> {
        self.tables()
            .containers
            .values()
            .map(|e| e.ctr.clone())
            .collect()
    }

    async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox> {
        self.tables().pods.get(id).cloned()
    }

    async fn get_container(&self, id: &str) -> Option<Container> {
        self.tables().containers.get(id).map(|e| e.ctr.clone())
    }

    async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError> {
        let id = &update.container_id;
        let path = self.edit_spec(id, |g| g.apply_update(update))?;
        println!("plugin update {id}: wrote {}", path.display());
        self.updates.send_modify(|n| *n += 1);
        Ok(())
    }

    async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError> {
        let id = &eviction.container_id;
        let mut entry = {
            let mut t = self.tables();
            let entry = t
                .containers
                .remove(id)
                .ok_or_else(|| StoreError::NoContainer(id.clone()))?;
            let pod = t
                .pods
                .get(&entry.ctr.pod_sandbox_id)
                .cloned()
                .unwrap_or_else(|| PodSandbox {
                    id: entry.ctr.pod_sandbox_id.clone(),
                    ..PodSandbox::default()
                });
            (pod, entry.ctr)
        };
        entry.1.state = ContainerState::ContainerStopped as i32;
        entry.1.status_reason = "Evicted".into();
        entry.1.status_message = eviction.reason.clone();
        println!("plugin eviction {id}: {}", eviction.reason);
        self.evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Evicted {
                pod: entry.0,
                ctr: entry.1,
            });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctr(id: &str) -> Container {
        Container {
            id: id.into(),
            pod_sandbox_id: "p0".into(),
            ..Container::default()
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store
            .add_pod(PodSandbox {
                id: "p0".into(),
                ..PodSandbox::default()
            })
            .unwrap();
        (dir, store)
    }

    fn read(path: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn plugin_updates_rewrite_the_config() {
        let (_dir, store) = store();
        let path = store
            .add_container(ctr("c0"), json!({"ociVersion": "1.2.0"}))
            .unwrap();
        assert_eq!(read(&path), json!({"ociVersion": "1.2.0"}));

        let mut update = ContainerUpdate::for_container("c0");
        update.set_linux_cpu_shares(512);
        store.update_container(&update).await.unwrap();
        assert_eq!(
            read(&path)["linux"]["resources"]["cpu"],
            json!({"shares": 512})
        );
        assert!(store.wait_updates(1, Duration::from_secs(5)).await);
        assert!(!store.wait_updates(2, Duration::from_millis(10)).await);

        let missing = ContainerUpdate::for_container("nope");
        let err = store.update_container(&missing).await.unwrap_err();
        assert_eq!(err.to_string(), "no container \"nope\"");
    }

    #[tokio::test]
    async fn a_failed_adjustment_leaves_the_spec_alone() {
        let (_dir, store) = store();
        let path = store
            .add_container(ctr("c0"), json!({"linux": {"resources": 7}}))
            .unwrap();
        let mut update = ContainerUpdate::for_container("c0");
        update.set_linux_cpu_shares(512);
        assert!(store.update_container(&update).await.is_err());
        assert_eq!(read(&path), json!({"linux": {"resources": 7}}));
    }

    #[tokio::test]
    async fn eviction_removes_and_queues_the_container() {
        let (_dir, store) = store();
        store.add_container(ctr("c0"), json!({})).unwrap();
        let eviction = ContainerEviction {
            container_id: "c0".into(),
            reason: "make room".into(),
        };
        store.evict_container(&eviction).await.unwrap();
        assert!(store.get_container("c0").await.is_none());
        let evicted = store.take_evicted();
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0].pod.id, "p0");
        assert_eq!(evicted[0].ctr.status_message, "make room");
        assert_eq!(
            evicted[0].ctr.state,
            ContainerState::ContainerStopped as i32
        );
        assert!(store.take_evicted().is_empty());
        assert!(store.evict_container(&eviction).await.is_err());
    }

    #[tokio::test]
    async fn removal_deletes_the_state_dir_and_pods_need_to_be_empty() {
        let (dir, store) = store();
        store.add_container(ctr("c0"), json!({})).unwrap();
        assert!(matches!(
            store.add_container(ctr("c0"), json!({})),
            Err(StoreError::Exists(_))
        ));
        assert!(store.remove_pod("p0").is_err());
        store.remove_container("c0").unwrap();
        assert!(!dir.path().join("c0").exists());
        assert_eq!(store.list_containers().await, []);
        store.remove_pod("p0").unwrap();
        assert!(store.list_pod_sandboxes().await.is_empty());
    }
}
