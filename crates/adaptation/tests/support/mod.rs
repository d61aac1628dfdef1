//! Shared pieces of the integration tests: a recording runtime, an
//! adaptation on a socket in a temporary directory, and helpers to run
//! nri-stub plugins against it.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_adaptation::{Adaptation, AdaptationBuilder, BoxError, RuntimeHooks, Synchronizer};
use nri_api::{Container, ContainerEviction, ContainerUpdate, LinuxResources, PodSandbox};
#[allow(unused_imports)]
pub use nri_interop::fixtures::{container, pod, stub_on, Log};
use tokio::task::JoinHandle;

/// Bound on every wait, so a bug shows as a failure, not a hang.
pub const WAIT: Duration = Duration::from_secs(20);

/// Container id for which the runtime reports an unsolicited update as failed.
pub const FAILING: &str = "ctr-fails";

/// One unsolicited update request: plugin, updates, evictions.
pub type UpdateCall = (String, Vec<ContainerUpdate>, Vec<ContainerEviction>);

/// A runtime that records what NRI asks of it.
#[derive(Default)]
pub struct Runtime {
    pub pods: Mutex<Vec<PodSandbox>>,
    pub containers: Mutex<Vec<Container>>,
    /// Updates returned by synchronizations.
    pub synced: Mutex<Vec<ContainerUpdate>>,
    /// Unsolicited updates: (plugin, updates, evictions).
    pub updates: Mutex<Vec<UpdateCall>>,
    /// Errors returned by synchronizations.
    pub sync_errors: Mutex<Vec<String>>,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Runtime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let pods = self.pods.lock().unwrap().clone();
        let containers = self.containers.lock().unwrap().clone();
        match sync.synchronize(&pods, &containers).await {
            Ok(updates) => {
                self.synced.lock().unwrap().extend(updates);
                Ok(())
            }
            Err(e) => {
                self.sync_errors.lock().unwrap().push(e.to_string());
                Err(e.into())
            }
        }
    }

    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        let failed = updates
            .iter()
            .filter(|u| u.container_id == FAILING)
            .cloned()
            .collect();
        self.updates
            .lock()
            .unwrap()
            .push((plugin.to_string(), updates, evictions));
        Ok(failed)
    }
}

/// A temporary directory with the socket path and an empty plugin dir.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub runtime: Arc<Runtime>,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            runtime: Arc::new(Runtime::default()),
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/nri.sock")
    }

    pub fn plugin_dir(&self) -> PathBuf {
        self.dir.path().join("plugins")
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("conf.d")
    }

    /// A builder with short timeouts and paths in the directory.
    pub fn builder(&self) -> AdaptationBuilder {
        Adaptation::builder("test-runtime", "v1.0.0", self.runtime.clone())
            .plugin_path(self.plugin_dir())
            .plugin_config_path(self.conf_dir())
            .socket_path(self.socket())
            .registration_timeout(Duration::from_secs(2))
            .request_timeout(Duration::from_millis(1500))
    }

    pub async fn start(&self) -> Adaptation {
        self.start_with(|b| b).await
    }

    /// Starts an adaptation built from [`Env::builder`] as `configure` changes it.
    pub async fn start_with(
        &self,
        configure: impl FnOnce(AdaptationBuilder) -> AdaptationBuilder,
    ) -> Adaptation {
        let nri = configure(self.builder()).build();
        bounded(nri.start()).await.unwrap();
        nri
    }
}

/// Awaits `fut`, failing the test after [`WAIT`].
pub async fn bounded<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("operation did not finish in time")
}

/// Runs a stub plugin on `socket` in the background.
pub fn run_stub<P: nri_stub::Plugin>(
    plugin: P,
    name: &str,
    idx: &str,
    socket: &Path,
) -> JoinHandle<Result<(), nri_stub::Error>> {
    let stub = stub_on(plugin, name, idx, socket);
    tokio::spawn(async move { stub.run().await })
}

/// Waits until the adaptation lists exactly `names` (full names, in order).
pub async fn wait_plugins(nri: &Adaptation, names: &[&str]) {
    bounded(async {
        loop {
            let have: Vec<String> = nri
                .plugins()
                .iter()
                .map(|p| format!("{}-{}", p.index, p.name))
                .collect();
            if have == names {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The Linux resources an update carries; panics if it has none.
pub fn update_resources(u: &ContainerUpdate) -> &LinuxResources {
    u.linux.as_ref().unwrap().resources.as_ref().unwrap()
}

/// The plugin side of a self-launching test binary: runs `plugin` on the
/// connection the adaptation handed over, on a single-threaded runtime,
/// until that connection ends.
pub fn run_launched_plugin<P: nri_stub::Plugin>(plugin: P) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _ = rt.block_on(async { nri_stub::Stub::builder(plugin).build()?.run().await });
}

/// The test side of a self-launching test binary: runs `scenarios` on a
/// runtime with two worker threads.
pub fn run_scenarios<F: Future>(scenarios: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenarios)
}

impl Env {
    /// Installs the running test binary as the launched plugin
    /// `10-<name>`, with a state directory whose path is the plugin's
    /// configuration (`<name>.conf`); returns that directory.
    pub fn install_self_as_plugin(&self, name: &str) -> PathBuf {
        let dir = self.plugin_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(self.conf_dir()).unwrap();
        std::os::unix::fs::symlink(
            std::env::current_exe().unwrap(),
            dir.join(format!("10-{name}")),
        )
        .unwrap();
        let state = self.dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(
            self.conf_dir().join(format!("{name}.conf")),
            state.display().to_string(),
        )
        .unwrap();
        state
    }
}

impl Env {
    /// A builder for the launched plugin of [`Env::install_self_as_plugin`]
    /// alone: no socket, 5 s timeouts, restarts counted by `restarts`.
    pub fn launched_builder(
        &self,
        runtime: Arc<dyn RuntimeHooks>,
        restarts: Arc<Restarts>,
    ) -> AdaptationBuilder {
        Adaptation::builder("test-runtime", "v1.0.0", runtime)
            .plugin_path(self.plugin_dir())
            .plugin_config_path(self.conf_dir())
            .disable_external_connections()
            .registration_timeout(Duration::from_secs(5))
            .request_timeout(Duration::from_secs(5))
            .metrics(restarts)
    }
}

/// In the Configure of a plugin installed by [`Env::install_self_as_plugin`]:
/// appends the plugin's pid to `<state>/starts`; returns the state directory
/// (the plugin's configuration).
pub fn record_start(info: &nri_stub::ConfigureInfo) -> PathBuf {
    let dir = PathBuf::from(info.config.trim());
    let mut starts = std::fs::read_to_string(dir.join("starts")).unwrap_or_default();
    starts.push_str(&format!("{}\n", std::process::id()));
    std::fs::write(dir.join("starts"), starts).unwrap();
    dir
}

/// Pids of every start [`record_start`] recorded in `state` so far.
pub fn starts(state: &Path) -> Vec<String> {
    std::fs::read_to_string(state.join("starts"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Metrics that count plugin restarts, watched by a test.
#[derive(Default)]
pub struct Restarts(Mutex<Option<tokio::sync::watch::Sender<usize>>>);

impl Restarts {
    /// A receiver of the number of restarts recorded from now on.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<usize> {
        let (tx, rx) = tokio::sync::watch::channel(0);
        *self.0.lock().unwrap() = Some(tx);
        rx
    }
}

impl nri_adaptation::Metrics for Restarts {
    fn record_plugin_restart(&self, _plugin: &str) {
        if let Some(tx) = &*self.0.lock().unwrap() {
            tx.send_modify(|n| *n += 1);
        }
    }
}
