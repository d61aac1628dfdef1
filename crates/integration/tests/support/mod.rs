//! Shared pieces of the integration tests: an in-memory runtime domain, a
//! configuration in a temporary directory, and nri-stub plugins that
//! record what they receive.

#![allow(dead_code)]

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_api::*;
use nri_integration::{BoxError, Config, Domain, Nri};
pub use nri_interop::fixtures::{container, pod, stub_on, Log};
use nri_stub::{Context, CreateContainerResult, Plugin, RuntimeHandle};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Bound on every wait, so a bug shows as a failure, not a hang.
pub const WAIT: Duration = Duration::from_secs(20);

/// Awaits `fut`, failing the test after [`WAIT`].
pub async fn bounded<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("operation did not finish in time")
}

/// Polls `cond` until it holds, failing the test after [`WAIT`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let ok = tokio::time::timeout(WAIT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(ok.is_ok(), "timed out waiting for: {what}");
}

/// A runtime namespace kept in memory; records updates and evictions.
#[derive(Default)]
pub struct TestDomain {
    pub name: String,
    pub pods: Mutex<Vec<PodSandbox>>,
    pub containers: Mutex<Vec<Container>>,
    /// Containers whose updates fail.
    pub failing: Mutex<HashSet<String>>,
    /// "update <id>" / "evict <id>" in the order applied.
    pub applied: Log,
}

impl TestDomain {
    pub fn new(name: &str) -> Arc<TestDomain> {
        Arc::new(TestDomain {
            name: name.into(),
            ..Default::default()
        })
    }

    pub fn with(self: Arc<Self>, pod_id: &str, ctrs: &[(&str, ContainerState)]) -> Arc<Self> {
        self.pods.lock().unwrap().push(pod(pod_id));
        for (id, state) in ctrs {
            let mut c = container(id, pod_id);
            c.state = *state as i32;
            self.containers.lock().unwrap().push(c);
        }
        self
    }

    pub fn fail_updates_of(&self, id: &str) {
        self.failing.lock().unwrap().insert(id.into());
    }
}

#[nri_integration::async_trait]
impl Domain for TestDomain {
    fn name(&self) -> &str {
        &self.name
    }
    async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> {
        self.pods.lock().unwrap().clone()
    }
    async fn list_containers(&self) -> Vec<Container> {
        self.containers.lock().unwrap().clone()
    }
    async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox> {
        self.pods
            .lock()
            .unwrap()
            .iter()
            .find(|p| p.id == id)
            .cloned()
    }
    async fn get_container(&self, id: &str) -> Option<Container> {
        self.containers
            .lock()
            .unwrap()
            .iter()
            .find(|c| c.id == id)
            .cloned()
    }
    async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError> {
        if self.failing.lock().unwrap().contains(&update.container_id) {
            return Err(format!("{}: cannot update {}", self.name, update.container_id).into());
        }
        self.applied.push(format!("update {}", update.container_id));
        Ok(())
    }
    async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError> {
        self.applied
            .push(format!("evict {}", eviction.container_id));
        Ok(())
    }
}

/// A temporary directory holding the socket and the plugin directories.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/nri.sock")
    }

    /// An enabled configuration with paths in the directory and short
    /// timeouts.
    pub fn config(&self) -> Config {
        Config {
            enable: true,
            socket_path: self.socket(),
            plugin_path: self.dir.path().join("plugins"),
            plugin_config_path: self.dir.path().join("conf.d"),
            registration_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            ..Config::default()
        }
    }

    pub fn nri(&self) -> Nri {
        Nri::builder(self.config())
            .runtime("test-runtime", "v1.0.0")
            .build()
    }

    /// Starts an integration with `domains` registered first.
    pub async fn start(&self, domains: &[Arc<TestDomain>]) -> Nri {
        let nri = self.nri();
        for d in domains {
            nri.register_domain(d.clone()).unwrap();
        }
        bounded(nri.start()).await.unwrap();
        nri
    }
}

/// Records every event it receives, as "<Event> <id>".
#[derive(Default)]
pub struct Recorder {
    pub log: Log,
    /// CreateContainer of this container fails.
    pub fail_create: Option<String>,
    /// StopContainer waits for a permit of this semaphore.
    pub stop_gate: Option<Arc<Semaphore>>,
    /// Returned from Synchronize.
    pub sync_updates: Vec<ContainerUpdate>,
    /// Returned from CreateContainer (besides no adjustment).
    pub create_updates: Vec<ContainerUpdate>,
    pub create_evictions: Vec<ContainerEviction>,
    /// While set, the next teardown event (Stop/Remove of a container or
    /// pod) fails, and clears it.
    pub fail_teardown: Arc<std::sync::atomic::AtomicBool>,
}

impl Recorder {
    /// Fails the teardown event if armed (once).
    fn teardown(&self) -> nri_stub::HandlerResult<()> {
        if self
            .fail_teardown
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err("teardown refused".into());
        }
        Ok(())
    }
}

impl Recorder {
    pub fn new(log: &Log) -> Recorder {
        Recorder {
            log: log.clone(),
            ..Default::default()
        }
    }
}

#[nri_stub::plugin]
impl Plugin for Recorder {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let pods: Vec<_> = pods.iter().map(|p| p.id.as_str()).collect();
        let ctrs: Vec<_> = containers.iter().map(|c| c.id.as_str()).collect();
        self.log.push(format!(
            "Synchronize pods=[{}] containers=[{}]",
            pods.join(","),
            ctrs.join(",")
        ));
        Ok(self.sync_updates.clone())
    }
    async fn shutdown(&self, _ctx: &Context) {
        self.log.push("Shutdown");
    }
    async fn run_pod_sandbox(&self, _c: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }
    async fn stop_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("StopPodSandbox {}", pod.id));
        self.teardown()
    }
    async fn remove_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("RemovePodSandbox {}", pod.id));
        self.teardown()
    }
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.log.push(format!("CreateContainer {}", ctr.id));
        if self.fail_create.as_deref() == Some(ctr.id.as_str()) {
            return Err("refusing this container".into());
        }
        Ok(CreateContainerResult::default()
            .with_updates(self.create_updates.clone())
            .with_evictions(self.create_evictions.clone()))
    }
    async fn start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("StartContainer {}", ctr.id));
        Ok(())
    }
    async fn update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
        _r: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.log.push(format!("UpdateContainer {}", ctr.id));
        let mut u = ContainerUpdate::for_container(&ctr.id);
        u.set_linux_cpu_shares(123);
        Ok(vec![u])
    }
    async fn stop_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.log.push(format!("StopContainer {} begin", ctr.id));
        if let Some(gate) = &self.stop_gate {
            let _permit = gate.acquire().await;
        }
        self.log.push(format!("StopContainer {}", ctr.id));
        self.teardown()?;
        Ok(Vec::new())
    }
    async fn remove_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("RemoveContainer {}", ctr.id));
        self.teardown()
    }
}

/// Runs a stub plugin on `socket` in the background; returns its task and
/// its handle for unsolicited updates.
pub fn run_stub<P: Plugin>(
    plugin: P,
    name: &str,
    idx: &str,
    socket: &Path,
) -> (JoinHandle<()>, RuntimeHandle) {
    spawn_stub(stub_on(plugin, name, idx, socket), false)
}

/// Like [`run_stub`], but connects again whenever the runtime goes away
/// (Shutdown, disconnect, or no socket yet), until aborted.
pub fn run_reconnecting<P: Plugin>(
    plugin: P,
    name: &str,
    idx: &str,
    socket: &Path,
) -> (JoinHandle<()>, RuntimeHandle) {
    spawn_stub(stub_on(plugin, name, idx, socket), true)
}

/// Runs `stub` in the background, once or, with `reconnect`, again whenever
/// a run ends; returns its task and its handle for unsolicited updates.
fn spawn_stub(stub: nri_stub::Stub, reconnect: bool) -> (JoinHandle<()>, RuntimeHandle) {
    let handle = stub.runtime_handle();
    let task = tokio::spawn(async move {
        loop {
            let _ = stub.run().await;
            if !reconnect {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (task, handle)
}

/// Waits until the integration lists exactly `names` as its plugins.
pub async fn wait_plugins(nri: &Nri, names: &[&str]) {
    eventually(&format!("plugins {names:?}"), || {
        let have: Vec<String> = nri
            .plugins()
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect();
        have == names
    })
    .await;
}

pub fn update(id: &str, ignore_failure: bool) -> ContainerUpdate {
    let mut u = ContainerUpdate::for_container(id);
    u.set_linux_cpu_shares(42);
    u.ignore_failure = ignore_failure;
    u
}
