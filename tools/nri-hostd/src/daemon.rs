//! [`Hostd`]: NRI for containers created through `nri-runc`. It turns the
//! wrapper's requests into NRI lifecycle events, keeps the pods and
//! containers in the state file, and is the [`Domain`] plugins synchronize
//! with and update.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nri_api::{Container, ContainerEviction, ContainerState, ContainerUpdate, PodSandbox};
use nri_integration::metrics::http::MetricsServer;
use nri_integration::metrics::NriMetrics;
use nri_integration::{BoxError, Domain, Nri};
use nri_oci::Generator;
use serde_json::{json, Value};

use crate::protocol::{Request, Response, RuntimeRef};
use crate::runtime;
use crate::spec;
use crate::state::{ContainerRecord, PodRecord, State};

/// The name of the daemon's one domain.
pub const DOMAIN: &str = "nri-hostd";

/// How long a killed container is followed until it has stopped.
const KILL_FOLLOW: Duration = Duration::from_secs(15);

/// The pods and containers created through the wrapper: the domain plugins
/// see.
pub struct HostDomain {
    state: Mutex<State>,
    state_file: PathBuf,
    scratch: PathBuf,
    /// Set by every change; the saver task writes the state file.
    dirty: tokio::sync::Notify,
    /// Counts changes (under the state lock).
    changes: AtomicU64,
    /// The change count the state file holds; [`HostDomain::flush`] waits on it.
    saved: tokio::sync::watch::Sender<u64>,
    /// One writer of the state file at a time, so that the newest copy is
    /// the one that stays.
    writer: Mutex<()>,
}

impl HostDomain {
    /// A domain with `state`, saved to `state_file`.
    pub fn new(state: State, state_file: &Path) -> HostDomain {
        let scratch = state_file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        HostDomain {
            state: Mutex::new(state),
            state_file: state_file.to_path_buf(),
            scratch,
            dirty: tokio::sync::Notify::new(),
            changes: AtomicU64::new(0),
            saved: tokio::sync::watch::Sender::new(0),
            writer: Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the state; the saver task writes it to the state file right
    /// after, in the background (changes made meanwhile are written
    /// together).
    fn change<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = {
            let mut state = self.lock();
            let out = f(&mut state);
            self.changes.fetch_add(1, Ordering::SeqCst);
            out
        };
        self.dirty.notify_one();
        out
    }

    /// Writes the current state to the state file now (a failed write is
    /// logged: the in-memory state stays right, a restart would lose the
    /// change). Writers take turns, each copying the state when its turn
    /// comes, so the file ends with the newest state.
    pub fn save_now(&self) {
        let _turn = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, version) = {
            let state = self.lock();
            (state.clone(), self.changes.load(Ordering::SeqCst))
        };
        match state.save(&self.state_file) {
            Ok(()) => {
                self.saved.send_if_modified(|saved| {
                    let newer = version > *saved;
                    if newer {
                        *saved = version;
                    }
                    newer
                });
            }
            Err(e) => tracing::error!(error = %e, "cannot save the state file"),
        }
    }

    /// Waits until the state file holds every change made before the call
    /// (written by the saver task).
    pub async fn flush(&self) {
        let target = self.changes.load(Ordering::SeqCst);
        let mut saved = self.saved.subscribe();
        // The sender lives as long as `self`: the wait ends only by reaching
        // the target.
        let _ = saved.wait_for(|v| *v >= target).await;
    }

    /// Saves the state file after every change, until aborted.
    async fn saver(self: Arc<Self>) {
        loop {
            self.dirty.notified().await;
            let me = self.clone();
            if tokio::task::spawn_blocking(move || me.save_now())
                .await
                .is_err()
            {
                tracing::error!("the state file writer panicked");
            }
        }
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> State {
        self.lock().clone()
    }

    fn record(&self, id: &str) -> Option<ContainerRecord> {
        self.lock().containers.get(id).cloned()
    }

    fn pod(&self, id: &str) -> Option<PodSandbox> {
        self.lock().pods.get(id).map(|p| p.pod.clone())
    }

    fn set_state(&self, id: &str, s: ContainerState) {
        self.change(|st| {
            if let Some(r) = st.containers.get_mut(id) {
                r.container.state = s as i32;
            }
        });
    }
}

#[nri_integration::async_trait]
impl Domain for HostDomain {
    fn name(&self) -> &str {
        DOMAIN
    }

    async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> {
        self.lock().pods.values().map(|p| p.pod.clone()).collect()
    }

    async fn list_containers(&self) -> Vec<Container> {
        self.lock()
            .containers
            .values()
            .filter(|c| !c.sandbox)
            .map(|c| c.container.clone())
            .collect()
    }

    async fn get_pod_sandbox(&self, id: &str) -> Option<PodSandbox> {
        self.pod(id)
    }

    async fn get_container(&self, id: &str) -> Option<Container> {
        self.record(id).filter(|r| !r.sandbox).map(|r| r.container)
    }

    /// Applies the update to the container's spec and runs the real
    /// runtime's `update` with the resulting resources.
    async fn update_container(&self, update: &ContainerUpdate) -> Result<(), BoxError> {
        let rec = self
            .record(&update.container_id)
            .ok_or_else(|| format!("unknown container {}", update.container_id))?;
        let mut spec = rec.spec.clone();
        Generator::new(&mut spec).apply_update(update)?;
        let resources = spec
            .pointer("/linux/resources")
            .cloned()
            .unwrap_or_else(|| json!({}));
        runtime::update(
            &rec.runtime,
            &update.container_id,
            &resources,
            &self.scratch,
        )
        .await?;
        self.change(|st| {
            if let Some(r) = st.containers.get_mut(&update.container_id) {
                spec::refresh(&mut r.container, &spec);
                r.spec = spec;
            }
        });
        Ok(())
    }

    /// Kills the container with the real runtime's `kill ID KILL`.
    async fn evict_container(&self, eviction: &ContainerEviction) -> Result<(), BoxError> {
        let rec = self
            .record(&eviction.container_id)
            .ok_or_else(|| format!("unknown container {}", eviction.container_id))?;
        runtime::kill(&rec.runtime, &eviction.container_id).await?;
        Ok(())
    }
}

/// The daemon's request handling.
///
/// ```no_run
/// use std::sync::Arc;
/// use nri_hostd::{Hostd, HostdConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let hostd = Arc::new(Hostd::start(HostdConfig::default()).await?);
/// nri_hostd::server::serve(hostd.clone(), "/var/run/nri/nri-hostd.sock".as_ref()).await?;
/// # Ok(()) }
/// ```
pub struct Hostd {
    nri: Nri,
    domain: Arc<HostDomain>,
    saver: tokio::task::JoinHandle<()>,
    /// The `/metrics` endpoint, when configured.
    metrics: Option<MetricsServer>,
    /// Serializes lifecycle events (in the order their requests arrived:
    /// tokio's mutex is fair).
    ops: Arc<tokio::sync::Mutex<()>>,
    /// The directory of pre-installed plugins (`[nri] plugin_path`).
    plugin_path: std::path::PathBuf,
}

/// Whether `path` starts as a WebAssembly module (magic and version 1).
fn is_wasm_module(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == *b"\0asm\x01\0\0\0"
}

/// The full names (`NN-name`) of the pre-installed plugins of `dir`:
/// executable files (or WebAssembly modules) named `NN-name`, sorted. A
/// missing or unreadable directory has none.
pub fn preinstalled_plugins(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.metadata().is_ok_and(|m| {
                m.is_file() && (m.permissions().mode() & 0o111 != 0 || is_wasm_module(&e.path()))
            })
        })
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| nri_api::plugin::parse_plugin_name(n).is_ok())
        .collect();
    names.sort();
    names
}

/// The OpenMetrics text of `/metrics`: the plugin calls' metrics and, when
/// the builtin policy validator runs, its counters (`nri_policy_*`), as one
/// exposition (one `# EOF`).
fn metrics_text(calls: &NriMetrics, nri: &Nri) -> String {
    let text = calls.encode();
    let Some(policy) = nri.policy_metrics() else {
        return text;
    };
    let mut out = text
        .strip_suffix("# EOF\n")
        .map(str::to_owned)
        .unwrap_or(text);
    out.push_str(&policy.encode());
    out
}

/// The turn of one request's lifecycle events (see [`Hostd::turn`]).
pub(crate) type Turn = tokio::sync::OwnedMutexGuard<()>;

/// Errors of starting the daemon.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state file cannot be read.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// NRI failed to start.
    #[error(transparent)]
    Nri(#[from] nri_integration::Error),
    /// The metrics endpoint cannot be served.
    #[error(transparent)]
    Metrics(#[from] nri_integration::metrics::http::MetricsError),
}

impl Hostd {
    /// Loads the state file, reconciles it with what the real runtimes
    /// have, and starts NRI (pre-installed plugins are launched and
    /// synchronized with the reconciled state).
    pub async fn start(config: crate::HostdConfig) -> Result<Hostd, StartError> {
        let state = State::load(&config.hostd.state_file)?;
        let state = reconcile(state).await;
        if let Err(e) = state.save(&config.hostd.state_file) {
            tracing::error!(error = %e, "cannot save the state file");
        }
        tracing::info!(
            pods = state.pods.len(),
            containers = state.containers.len(),
            "state reconciled with the real runtime"
        );
        let domain = Arc::new(HostDomain::new(state, &config.hostd.state_file));
        let metrics_addr = match config.hostd.metrics_address.as_str() {
            "" => None,
            a => Some(nri_integration::metrics::http::parse_addr(a)?),
        };
        let plugin_path = config.nri.plugin_path.clone();
        let mut builder =
            Nri::builder(config.nri).runtime(config.hostd.runtime_name, env!("CARGO_PKG_VERSION"));
        let metrics = metrics_addr.map(|a| (a, NriMetrics::new()));
        if let Some((_, m)) = &metrics {
            builder = builder.metrics(Arc::new(m.clone()));
        }
        let nri = builder.build();
        // Served before NRI starts, so that the pre-installed plugins'
        // registrations are counted and a bad address fails the start.
        // The builtin policy validator's counters join the plugin calls'
        // when it is enabled (they exist once NRI has built it).
        let metrics = match metrics {
            Some((addr, m)) => {
                let n = nri.clone();
                Some(MetricsServer::start_with(addr, move || metrics_text(&m, &n)).await?)
            }
            None => None,
        };
        nri.register_domain(domain.clone())?;
        nri.start().await?;
        let saver = tokio::spawn(domain.clone().saver());
        let hostd = Hostd {
            nri,
            domain,
            saver,
            metrics,
            ops: Arc::new(tokio::sync::Mutex::new(())),
            plugin_path,
        };
        hostd.log_plugins();
        Ok(hostd)
    }

    /// The plugins that run and the pre-installed ones that do not
    /// ([`Response::Plugins`]).
    pub fn plugins(&self) -> (Vec<String>, Vec<String>) {
        let running: Vec<String> = self
            .nri
            .plugins()
            .iter()
            .map(|p| nri_api::plugin::qualified_name(&p.index, &p.name))
            .collect();
        let not_running = preinstalled_plugins(&self.plugin_path)
            .into_iter()
            .filter(|n| !running.contains(n))
            .collect();
        (running, not_running)
    }

    /// At start: the running plugins at info, and an error for each
    /// pre-installed plugin that does not run (the adaptation's warning
    /// before it says why): containers are created without it.
    fn log_plugins(&self) {
        let (running, not_running) = self.plugins();
        tracing::info!(plugins = %running.join(", "), "NRI plugins running");
        for name in not_running {
            tracing::error!(
                plugin = %name,
                dir = %self.plugin_path.display(),
                "pre-installed NRI plugin is not running (it failed to start, register or \
                 configure: see the warning before); containers are created without it. \
                 `nri-hostd status` lists the plugins; a container annotated \
                 required-plugins.noderesource.dev is refused while a plugin it names is missing"
            );
        }
    }

    /// Whether the configuration in force enables the builtin policy
    /// validator.
    pub fn policy_validator_enabled(&self) -> bool {
        self.nri.config().policy_validator.is_some_and(|p| p.enable)
    }

    /// The NRI integration.
    pub fn nri(&self) -> &Nri {
        &self.nri
    }

    /// The domain.
    pub fn domain(&self) -> &Arc<HostDomain> {
        &self.domain
    }

    /// The address of the `/metrics` endpoint, when `metrics_address` is
    /// set.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::addr)
    }

    /// Stops NRI (plugins get Shutdown; launched ones end) and writes the
    /// state file a last time.
    pub async fn stop(&self) {
        self.nri.stop().await;
        self.saver.abort();
        self.domain.save_now();
    }

    /// Handles one request of the wrapper, after the lifecycle events of
    /// every request that came before it.
    pub async fn handle(self: &Arc<Self>, req: Request) -> Response {
        let turn = self.turn().await;
        self.handle_in_turn(req, turn).await
    }

    /// Takes the turn for lifecycle events: the requests' events run in the
    /// order their turns were taken (tokio's mutex is fair). The control
    /// server takes turns in the order connections were accepted.
    pub(crate) async fn turn(&self) -> Turn {
        self.ops.clone().lock_owned().await
    }

    /// Handles one request with the turn taken ([`turn`](Self::turn)).
    pub(crate) async fn handle_in_turn(self: &Arc<Self>, req: Request, turn: Turn) -> Response {
        match req {
            Request::Ping => Response::Ok,
            Request::Plugins => {
                drop(turn);
                let (running, not_running) = self.plugins();
                Response::Plugins {
                    running,
                    not_running,
                }
            }
            Request::Audit { id } => {
                drop(turn);
                if !self.policy_validator_enabled() {
                    return Response::Error {
                        message: "the builtin policy validator is not enabled \
                                  ([policy_validator] enable = true in nri-hostd's configuration)"
                            .into(),
                    };
                }
                Response::Audit {
                    records: self.nri.policy_audit(id.as_deref()),
                }
            }
            Request::Create {
                id,
                bundle,
                runtime,
                spec,
            } => self.create(turn, id, bundle, runtime, spec).await,
            Request::Created { id, ok } => {
                self.in_order(turn, move |me| async move { me.created(&id, ok).await })
            }
            Request::Start { id } => self.start_container(turn, &id).await,
            Request::Started { id, ok } => {
                self.in_order(turn, move |me| async move { me.started(&id, ok).await })
            }
            Request::Killed { id } => {
                drop(turn);
                self.follow_kill(id);
                Response::Ok
            }
            Request::Deleted { id } => self.in_order(turn, move |me| async move {
                let _sync = me.nri.block_plugin_sync().await;
                me.deleted(&id).await;
            }),
            Request::Update { id, resources } => self.update(turn, &id, resources).await,
            Request::Updated { id, ok } => {
                self.in_order(turn, move |me| async move { me.updated(&id, ok).await })
            }
            Request::Paused { id, paused } => {
                drop(turn);
                if self.domain.record(&id).is_some() {
                    let s = if paused {
                        ContainerState::ContainerPaused
                    } else {
                        ContainerState::ContainerRunning
                    };
                    self.domain.set_state(&id, s);
                }
                Response::Ok
            }
        }
    }

    /// Runs `work` for a notification after everything that arrived before
    /// it and before everything that arrives later, without making the
    /// wrapper wait: the turn is already taken, the work done in the
    /// background, and the wrapper answered at once. The runtime command
    /// has already run; nothing the plugins say can change it.
    fn in_order<F, Fut>(self: &Arc<Self>, turn: Turn, work: F) -> Response
    where
        F: FnOnce(Arc<Self>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let me = self.clone();
        tokio::spawn(async move {
            let _turn = turn;
            work(me).await;
        });
        Response::Ok
    }

    async fn create(
        &self,
        _turn: Turn,
        id: String,
        bundle: String,
        runtime: RuntimeRef,
        mut spec: Value,
    ) -> Response {
        let _sync = self.nri.block_plugin_sync().await;
        if self.domain.record(&id).is_some() {
            return Response::Error {
                message: format!("container {id} already exists"),
            };
        }
        let place = spec::placement(&id, &spec);
        let record = |container, spec, sandbox| ContainerRecord {
            container,
            runtime: runtime.clone(),
            bundle: bundle.clone(),
            spec,
            sandbox,
        };
        if place.sandbox {
            let mut pod = place.pod;
            pod.id = id.clone();
            self.domain.change(|st| {
                st.pods.insert(
                    id.clone(),
                    PodRecord {
                        pod: pod.clone(),
                        sandbox: Some(id.clone()),
                    },
                );
                let ctr = spec::container(&id, &id, &place.name, &spec);
                st.containers
                    .insert(id.clone(), record(ctr, spec.clone(), true));
            });
            if let Err(e) = self.nri.run_pod_sandbox(&pod).await {
                self.forget_pod(&pod).await;
                self.domain.change(|st| st.containers.remove(&id));
                return Response::Rejected {
                    message: e.to_string(),
                };
            }
            return Response::Spec { spec: None };
        }

        let (pod, new_pod) = match self.domain.pod(&place.pod.id) {
            Some(pod) => (pod, false),
            None => (place.pod, true),
        };
        if new_pod {
            self.domain.change(|st| {
                st.pods.insert(
                    pod.id.clone(),
                    PodRecord {
                        pod: pod.clone(),
                        sandbox: None,
                    },
                )
            });
            if let Err(e) = self.nri.run_pod_sandbox(&pod).await {
                self.forget_pod(&pod).await;
                return Response::Rejected {
                    message: e.to_string(),
                };
            }
        }
        let mut ctr = spec::container(&id, &pod.id, &place.name, &spec);
        let original = spec.clone();
        let outcome = match self.nri.create_container(&pod, &ctr).await {
            Ok(created) => {
                match created.adjust {
                    // Nothing to change: the spec (and config.json) stays as is.
                    None => Ok(()),
                    Some(adjust) if changes_nothing(&adjust) => Ok(()),
                    Some(adjust) => Generator::new(&mut spec)
                        .adjust(&adjust)
                        .map_err(|e| format!("cannot apply the NRI adjustment: {e}")),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(message) = outcome {
            if let Err(e) = self.nri.undo_create_container(&pod, &ctr).await {
                tracing::warn!(container = %id, error = %e, "undoing the NRI creation failed");
            }
            if new_pod {
                self.forget_pod(&pod).await;
            }
            tracing::info!(container = %id, %message, "container refused by NRI");
            return Response::Rejected { message };
        }
        spec::refresh(&mut ctr, &spec);
        self.domain.change(|st| {
            st.containers
                .insert(id.clone(), record(ctr, spec.clone(), false))
        });
        let adjusted = spec != original;
        tracing::info!(container = %id, pod = %pod.name, name = %place.name, adjusted,
            "container created through NRI");
        Response::Spec {
            spec: adjusted.then_some(spec),
        }
    }

    /// Tells plugins a pod is gone (stop and removal, each if still due)
    /// and forgets it.
    async fn forget_pod(&self, pod: &PodSandbox) {
        if let Err(e) = self.nri.remove_pod_sandbox(pod).await {
            tracing::warn!(pod = %pod.id, error = %e, "NRI RemovePodSandbox failed");
        }
        self.domain.change(|st| st.pods.remove(&pod.id));
    }

    fn pod_and_container(&self, id: &str) -> Option<(PodSandbox, ContainerRecord)> {
        let rec = self.domain.record(id)?;
        let pod = self.domain.pod(&rec.container.pod_sandbox_id)?;
        Some((pod, rec))
    }

    /// The caller holds `ops`.
    async fn created(&self, id: &str, ok: bool) {
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return;
        };
        if ok {
            if !rec.sandbox {
                if let Err(e) = self.nri.post_create_container(&pod, &rec.container).await {
                    tracing::warn!(container = %id, error = %e, "NRI PostCreateContainer failed");
                }
            }
        } else {
            let _sync = self.nri.block_plugin_sync().await;
            self.deleted(id).await;
        }
    }

    async fn start_container(&self, _turn: Turn, id: &str) -> Response {
        let _sync = self.nri.block_plugin_sync().await;
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return Response::Ok;
        };
        self.domain.set_state(id, ContainerState::ContainerRunning);
        if !rec.sandbox {
            let mut ctr = rec.container;
            ctr.state = ContainerState::ContainerRunning as i32;
            if let Err(e) = self.nri.start_container(&pod, &ctr).await {
                tracing::warn!(container = %id, error = %e, "NRI StartContainer failed");
            }
        }
        Response::Ok
    }

    /// The caller holds `ops`.
    async fn started(&self, id: &str, ok: bool) {
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return;
        };
        if ok && !rec.sandbox {
            if let Err(e) = self.nri.post_start_container(&pod, &rec.container).await {
                tracing::warn!(container = %id, error = %e, "NRI PostStartContainer failed");
            }
        }
    }

    /// Follows a killed container until it stops (or the time is up).
    fn follow_kill(self: &Arc<Self>, id: String) {
        let Some(rec) = self.domain.record(&id) else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            while start.elapsed() < KILL_FOLLOW {
                match runtime::status(&rec.runtime, &id).await.as_deref() {
                    Some("stopped") | None => {
                        me.stopped(&id).await;
                        return;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
    }

    /// The container `id` has stopped: StopContainer, or StopPodSandbox
    /// for a sandbox.
    pub async fn stopped(&self, id: &str) {
        let _ops = self.ops.lock().await;
        let _sync = self.nri.block_plugin_sync().await;
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return;
        };
        if rec.container.state == ContainerState::ContainerStopped as i32 {
            return;
        }
        self.domain.set_state(id, ContainerState::ContainerStopped);
        let result = if rec.sandbox {
            self.nri.stop_pod_sandbox(&pod).await.map(|_| ())
        } else {
            let mut ctr = rec.container;
            ctr.state = ContainerState::ContainerStopped as i32;
            self.nri.stop_container(&pod, &ctr).await.map(|_| ())
        };
        if let Err(e) = result {
            tracing::warn!(container = %id, error = %e, "NRI stop failed");
        }
    }

    /// The container `id` is gone: RemoveContainer (with the stop if
    /// missed), and the pod's stop and removal when nothing of it is left.
    /// The caller holds `ops` and a sync block.
    async fn deleted(&self, id: &str) {
        let Some((pod, rec)) = self.pod_and_container(id) else {
            self.domain.change(|st| st.containers.remove(id));
            return;
        };
        if !rec.sandbox {
            if let Err(e) = self.nri.remove_container(&pod, &rec.container).await {
                tracing::warn!(container = %id, error = %e, "NRI RemoveContainer failed");
            }
        }
        let pod_done = self.domain.change(|st| {
            st.containers.remove(id);
            let members = st.members(&pod.id);
            match st.pods.get_mut(&pod.id) {
                Some(p) => {
                    if p.sandbox.as_deref() == Some(id) {
                        p.sandbox = None;
                    }
                    members.is_empty() && p.sandbox.is_none()
                }
                None => false,
            }
        });
        if pod_done {
            self.forget_pod(&pod).await;
        }
    }

    async fn update(&self, _turn: Turn, id: &str, resources: Value) -> Response {
        let _sync = self.nri.block_plugin_sync().await;
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return Response::Resources { resources };
        };
        if rec.sandbox {
            return Response::Resources { resources };
        }
        let requested = spec::resources(&resources);
        match self
            .nri
            .update_container(&pod, &rec.container, Some(&requested))
            .await
        {
            Ok(update) if update.adjusted => {
                let mut holder = json!({"linux": {"resources": resources}});
                let merged = update.resources.unwrap_or_default();
                if let Err(e) = Generator::new(&mut holder).apply_resources(&merged) {
                    return Response::Error {
                        message: format!("cannot apply the NRI resources: {e}"),
                    };
                }
                Response::Resources {
                    resources: holder["linux"]["resources"].take(),
                }
            }
            Ok(_) => Response::Resources { resources },
            Err(e) => Response::Rejected {
                message: e.to_string(),
            },
        }
    }

    /// The caller holds `ops`.
    async fn updated(&self, id: &str, ok: bool) {
        let Some((pod, rec)) = self.pod_and_container(id) else {
            return;
        };
        if ok && !rec.sandbox {
            if let Err(e) = self.nri.post_update_container(&pod, &rec.container).await {
                tracing::warn!(container = %id, error = %e, "NRI PostUpdateContainer failed");
            }
        }
    }

    /// Checks the containers believed running against the real runtimes:
    /// stopped ones get their stop, vanished ones their removal. Containers
    /// not started yet are left alone: the real `create` of a container the
    /// daemon already knows may still be under way.
    pub async fn check_exits(&self) {
        let state = self.domain.snapshot();
        let started = |r: &&ContainerRecord| {
            r.container.state == ContainerState::ContainerRunning as i32
                || r.container.state == ContainerState::ContainerPaused as i32
        };
        let runtimes: BTreeSet<RuntimeRef> = state
            .containers
            .values()
            .filter(started)
            .map(|r| r.runtime.clone())
            .collect();
        for rt in runtimes {
            let Ok(listed) = runtime::list(&rt).await else {
                continue;
            };
            for rec in state.containers.values().filter(started) {
                if rec.runtime != rt {
                    continue;
                }
                match listed.get(&rec.container.id).map(String::as_str) {
                    Some("stopped") => self.stopped(&rec.container.id).await,
                    Some(_) => {}
                    // Not listed: gone, unless it shows up when asked alone
                    // (a listing can skip containers being changed).
                    None if runtime::status(&rt, &rec.container.id).await.is_some() => {}
                    None => {
                        let _ops = self.ops.lock().await;
                        let _sync = self.nri.block_plugin_sync().await;
                        // Deleted meanwhile by someone else than the wrapper.
                        if self.domain.record(&rec.container.id).is_some() {
                            self.deleted(&rec.container.id).await;
                        }
                    }
                }
            }
        }
    }
}

/// Whether an adjustment is empty, also when it holds empty parts (the
/// adaptation returns empty `hooks`, `linux.resources.cpu`, ... when no
/// plugin changed anything; applied, they would only add empty objects to
/// the spec and make the wrapper rewrite `config.json` for nothing). Only
/// structural parts are dropped: a value set on purpose, even zero (an
/// `Optional*` wrapper), is a change.
fn changes_nothing(adjust: &nri_api::ContainerAdjustment) -> bool {
    fn none_if_default<T: Default + PartialEq>(v: &mut Option<T>) {
        if v.as_ref().is_some_and(|x| *x == T::default()) {
            *v = None;
        }
    }
    let mut a = adjust.clone();
    none_if_default(&mut a.hooks);
    if let Some(linux) = &mut a.linux {
        if let Some(r) = &mut linux.resources {
            none_if_default(&mut r.memory);
            none_if_default(&mut r.cpu);
            none_if_default(&mut r.pids);
        }
        none_if_default(&mut linux.resources);
    }
    none_if_default(&mut a.linux);
    a == nri_api::ContainerAdjustment::default()
}

/// Keeps of `state` only what the real runtimes still have, with the
/// statuses they report. Containers of a runtime that cannot be listed are
/// kept as they are.
pub async fn reconcile(mut state: State) -> State {
    let runtimes: BTreeSet<RuntimeRef> = state
        .containers
        .values()
        .map(|r| r.runtime.clone())
        .collect();
    let mut listed: BTreeMap<RuntimeRef, BTreeMap<String, String>> = BTreeMap::new();
    for rt in runtimes {
        match runtime::list(&rt).await {
            Ok(l) => {
                listed.insert(rt, l);
            }
            Err(e) => tracing::warn!(error = %e, "cannot list containers; keeping them as known"),
        }
    }
    state.containers.retain(|id, rec| {
        let Some(l) = listed.get(&rec.runtime) else {
            return true;
        };
        let status = match l.get(id).map(String::as_str) {
            None => {
                tracing::info!(container = %id, "container is gone: forgotten");
                return false;
            }
            Some("created") => ContainerState::ContainerCreated,
            Some("running") => ContainerState::ContainerRunning,
            Some("paused") => ContainerState::ContainerPaused,
            Some(_) => ContainerState::ContainerStopped,
        };
        rec.container.state = status as i32;
        true
    });
    let containers = &state.containers;
    state.pods.retain(|id, pod| {
        if pod
            .sandbox
            .as_ref()
            .is_some_and(|s| !containers.contains_key(s))
        {
            pod.sandbox = None;
        }
        pod.sandbox.is_some()
            || containers
                .values()
                .any(|c| !c.sandbox && c.container.pod_sandbox_id == *id)
    });
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostdConfig;

    /// A daemon with NRI running (no plugins, no external connections),
    /// its state file in `dir`.
    async fn hostd(dir: &Path) -> Arc<Hostd> {
        let mut config = HostdConfig::default();
        config.nri.disable_connections = true;
        config.nri.plugin_path = dir.join("plugins");
        config.nri.plugin_config_path = dir.join("conf.d");
        config.hostd.state_file = dir.join("state.json");
        Arc::new(Hostd::start(config).await.unwrap())
    }

    fn create(id: &str, spec: Value) -> Request {
        Request::Create {
            id: id.into(),
            bundle: "/b".into(),
            runtime: RuntimeRef {
                path: "/nonexistent/runc".into(),
                global_args: vec![],
            },
            spec,
        }
    }

    /// Waits until the background work of earlier requests is done.
    async fn settle(h: &Hostd) {
        drop(h.ops.lock().await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn own_pod_lives_and_dies_with_its_container() {
        let dir = tempfile::tempdir().unwrap();
        let h = hostd(dir.path()).await;
        let spec = json!({"hostname": "web", "process": {"args": ["sh"]}});
        let created = h.handle(create("c1", spec)).await;
        assert!(
            matches!(created, Response::Spec { spec: None }),
            "{created:?}"
        );
        h.handle(Request::Created {
            id: "c1".into(),
            ok: true,
        })
        .await;
        h.handle(Request::Start { id: "c1".into() }).await;
        settle(&h).await;
        h.domain().flush().await;
        let saved = State::load(&dir.path().join("state.json")).unwrap();
        assert_eq!(saved.pods["c1"].pod.name, "web");
        assert_eq!(
            saved.containers["c1"].container.state,
            ContainerState::ContainerRunning as i32
        );
        // A second create of the same id is refused.
        assert!(matches!(
            h.handle(create("c1", json!({}))).await,
            Response::Error { .. }
        ));
        h.handle(Request::Deleted { id: "c1".into() }).await;
        settle(&h).await;
        // Written by the saver task.
        h.domain().flush().await;
        let saved = State::load(&dir.path().join("state.json")).unwrap();
        assert!(saved.pods.is_empty() && saved.containers.is_empty());
        // Unknown containers are fine: created while the daemon was away.
        assert!(matches!(
            h.handle(Request::Start { id: "zz".into() }).await,
            Response::Ok
        ));
        h.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_real_create_forgets_the_container_and_its_pod() {
        let dir = tempfile::tempdir().unwrap();
        let h = hostd(dir.path()).await;
        h.handle(create("c1", json!({}))).await;
        h.handle(Request::Created {
            id: "c1".into(),
            ok: false,
        })
        .await;
        settle(&h).await;
        assert_eq!(h.domain().snapshot(), State::default());
        h.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sandbox_pods_outlive_their_members_until_the_sandbox_goes() {
        let dir = tempfile::tempdir().unwrap();
        let h = hostd(dir.path()).await;
        let sandbox = json!({"annotations": {"io.kubernetes.cri.container-type": "sandbox",
            "io.kubernetes.cri.sandbox-name": "nginx"}});
        let member = json!({"annotations": {"io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.sandbox-id": "sb", "io.kubernetes.cri.container-name": "app"}});
        h.handle(create("sb", sandbox)).await;
        h.handle(create("app", member)).await;
        let listed = h.domain().list_containers().await;
        assert_eq!(listed.len(), 1, "the sandbox is not a container");
        assert_eq!(listed[0].pod_sandbox_id, "sb");
        h.handle(Request::Deleted { id: "app".into() }).await;
        settle(&h).await;
        assert_eq!(h.domain().list_pod_sandboxes().await.len(), 1);
        h.handle(Request::Deleted { id: "sb".into() }).await;
        settle(&h).await;
        assert!(h.domain().list_pod_sandboxes().await.is_empty());
        h.stop().await;
    }

    #[test]
    fn empty_parts_change_nothing_but_values_do() {
        let mut a = nri_api::ContainerAdjustment {
            hooks: Some(Default::default()),
            linux: Some(nri_api::LinuxContainerAdjustment {
                resources: Some(nri_api::LinuxResources {
                    cpu: Some(Default::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(changes_nothing(&a));
        a.linux.as_mut().unwrap().oom_score_adj = Some(nri_api::OptionalInt { value: 0 });
        assert!(!changes_nothing(&a), "a zero set on purpose is a change");
        let mut b = nri_api::ContainerAdjustment::default();
        b.add_env("A", "");
        assert!(!changes_nothing(&b));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reconcile_keeps_what_an_unlistable_runtime_has() {
        // The runtime cannot be run: nothing is dropped.
        let mut state = crate::state::one_pod_one_container("/nonexistent/runc");
        state.pods.insert(
            "empty".into(),
            PodRecord {
                pod: PodSandbox::default(),
                sandbox: Some("gone".into()),
            },
        );
        let out = reconcile(state).await;
        assert!(out.containers.contains_key("c"));
        assert!(out.pods.contains_key("p"));
        assert!(
            !out.pods.contains_key("empty"),
            "a pod with nothing left goes"
        );
    }
}
