//! [`Nri`]: the integration's handle; its construction, start, stop,
//! reload, domains and the task delivering exit notifications.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use nri_adaptation::{
    Adaptation, BuiltinPlugin, Metrics, MetricsFanout, PluginInfo, PluginSyncBlock,
};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::domain::{Domain, DomainTable};
use crate::error::Error;
use crate::exits::ExitQueue;
use crate::hooks::DomainHooks;
use crate::state::{Lifecycle, LifecycleState};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Options of an [`Nri`] that are not part of the configuration file;
/// created by [`Nri::builder`].
pub struct NriBuilder {
    config: Config,
    runtime_name: String,
    runtime_version: String,
    builtin: Vec<Arc<dyn BuiltinPlugin>>,
    metrics: Option<Arc<dyn Metrics>>,
}

impl NriBuilder {
    /// The runtime's name and version, as plugins see them in Configure
    /// (default: `nri-rs` and this crate's version).
    pub fn runtime(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.runtime_name = name.into();
        self.runtime_version = version.into();
        self
    }

    /// Builtin (in-process) plugins, started by every NRI instance this
    /// integration runs (also after a reload).
    pub fn builtin_plugins(
        mut self,
        plugins: impl IntoIterator<Item = Arc<dyn BuiltinPlugin>>,
    ) -> Self {
        self.builtin.extend(plugins);
        self
    }

    /// Receives measurements of plugin calls; called more than once, every
    /// sink receives them all (in the order given).
    ///
    /// ```
    /// # #[cfg(feature = "prometheus")] {
    /// use std::sync::Arc;
    /// use nri_integration::{metrics::NriMetrics, Config, Nri};
    ///
    /// let metrics = NriMetrics::new();
    /// let nri = Nri::builder(Config::disabled())
    ///     .metrics(Arc::new(metrics.clone()))
    ///     .build();
    /// // Serve `metrics.encode()` on /metrics, or read figures in code:
    /// assert_eq!(metrics.active_plugins(), 0);
    /// # drop(nri); }
    /// ```
    pub fn metrics(mut self, metrics: Arc<dyn Metrics>) -> Self {
        self.metrics = Some(match self.metrics.take() {
            None => metrics,
            Some(first) => Arc::new(MetricsFanout::new([first, metrics])),
        });
        self
    }

    /// Creates the integration. Nothing runs before [`Nri::start`]; no
    /// tokio runtime is needed yet.
    pub fn build(self) -> Nri {
        if !self.config.enable {
            tracing::info!("NRI is disabled by configuration");
        }
        Nri {
            core: Arc::new(Core {
                identity: Identity {
                    runtime_name: self.runtime_name,
                    runtime_version: self.runtime_version,
                    builtin: self.builtin,
                    metrics: self.metrics,
                },
                enabled: AtomicBool::new(self.config.enable),
                config: Mutex::new(self.config),
                adaptation: Mutex::new(None),
                control: tokio::sync::Mutex::new(Control::default()),
                domains: DomainTable::default(),
                lifecycle: Lifecycle::default(),
                exits: Arc::new(ExitQueue::default()),
                worker: Mutex::new(None),
                policy: crate::policy::PolicyState::default(),
            }),
        }
    }
}

/// The runtime's integration with NRI: what a container runtime embeds to
/// let NRI plugins take part in the lifecycle of its pods and containers.
///
/// It runs an [`Adaptation`] as its [`Config`] says (or nothing at all
/// when NRI is disabled), and adds what every runtime needs around it:
///
/// * **Domains** ([`Domain`], one per runtime namespace): the integration
///   lists their pods and containers when plugins synchronize, and routes
///   the container updates and evictions plugins ask for to the domain that
///   has the container (failed updates go back to the plugin).
/// * **Exactly-once stops and removals**: pods and containers carry a
///   [`LifecycleState`], so StopContainer and RemoveContainer (and the pod
///   events) reach plugins once, however often the runtime reports them;
///   a removal sends the stop first if it was missed, and
///   [`undo_create_container`](Self::undo_create_container) sends both
///   after a failed creation.
/// * **Asynchronous exit notifications**
///   ([`notify_container_exit`](Self::notify_container_exit)): queued,
///   coalesced per container, delivered by a background task as
///   StopContainer.
/// * **Start, stop and reload** with a new configuration (prepared first;
///   a configuration that cannot be prepared leaves the running instance
///   alone).
///
/// When disabled every entry point is a cheap no-op: notifications do
/// nothing, [`create_container`](Self::create_container) adjusts nothing,
/// [`update_container`](Self::update_container) returns the requested
/// resources unchanged. The same holds while NRI is enabled but not
/// started (or stopped): plugins that connect later learn the runtime's
/// state from the domains when they synchronize.
///
/// # Start-up
///
/// Register the domains, then [`start`](Self::start). Whatever arrives
/// earlier is handled safely:
///
/// * exit notifications are queued (while NRI is enabled) and delivered
///   once NRI runs *and* at least one domain is registered;
/// * container updates plugins ask for while no domain is registered fail
///   as a whole with [`Error::NoDomain`], which the plugin receives as the
///   error of its request; updates of containers no domain has are
///   returned to the plugin as failed;
/// * plugins that synchronize before any domain is registered see no pods
///   or containers (with a warning in the log).
///
/// `Nri` is a cheap handle: clones share the same state.
///
/// ```
/// use std::sync::Arc;
/// use nri_integration::{Config, Nri};
/// use nri_api::{Container, PodSandbox};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), nri_integration::Error> {
/// let tmp = tempfile::tempdir().unwrap();
/// let config = Config {
///     socket_path: tmp.path().join("nri.sock"),
///     plugin_path: tmp.path().join("plugins"),
///     plugin_config_path: tmp.path().join("conf.d"),
///     ..Config::default()
/// };
/// let nri = Nri::builder(config).runtime("my-runtime", "1.0.0").build();
/// // nri.register_domain(Arc::new(MyNamespace::new(...)))?;
/// nri.start().await?;
///
/// let pod = PodSandbox { id: "pod0".into(), ..Default::default() };
/// let ctr = Container { id: "ctr0".into(), pod_sandbox_id: "pod0".into(), ..Default::default() };
/// nri.run_pod_sandbox(&pod).await?;
/// let created = nri.create_container(&pod, &ctr).await?;
/// assert!(created.adjust.unwrap_or_default().env.is_empty()); // no plugin connected
/// nri.start_container(&pod, &ctr).await?;
/// nri.notify_container_exit(pod.clone(), ctr.clone()); // returns at once
/// nri.remove_container(&pod, &ctr).await?; // sends the stop too, if still due
///
/// nri.stop().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Nri {
    pub(crate) core: Arc<Core>,
}

struct Identity {
    runtime_name: String,
    runtime_version: String,
    builtin: Vec<Arc<dyn BuiltinPlugin>>,
    metrics: Option<Arc<dyn Metrics>>,
}

/// State changed only by start, stop and reload (which it serializes).
#[derive(Default)]
struct Control {
    /// The runtime asked for NRI to run (start without a later stop).
    started: bool,
}

pub(crate) struct Core {
    identity: Identity,
    enabled: AtomicBool,
    config: Mutex<Config>,
    /// The running instance. Held only to clone, take or put; never across
    /// an await.
    adaptation: Mutex<Option<Adaptation>>,
    control: tokio::sync::Mutex<Control>,
    pub domains: DomainTable,
    pub lifecycle: Lifecycle,
    pub exits: Arc<ExitQueue>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The builtin policy validator's counters and audit records, kept
    /// across reloads.
    pub policy: crate::policy::PolicyState,
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Some(worker) = lock(&self.worker).take() {
            worker.abort();
        }
    }
}

impl Core {
    /// The running adaptation, if NRI is enabled and running.
    pub fn current(&self) -> Option<Adaptation> {
        if !self.enabled.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.adaptation).clone()
    }

    fn take(&self) -> Option<Adaptation> {
        lock(&self.adaptation).take()
    }

    fn install(&self, adaptation: Adaptation) {
        *lock(&self.adaptation) = Some(adaptation);
        self.exits.wake();
    }

    fn set_config(&self, config: Config) -> Config {
        self.enabled.store(config.enable, Ordering::Release);
        std::mem::replace(&mut *lock(&self.config), config)
    }

    /// Exit notifications can be delivered: NRI runs and a domain is there
    /// to take the updates plugins may answer with.
    pub fn exits_deliverable(&self) -> bool {
        !self.domains.is_empty() && self.current().is_some()
    }

    fn build(self: &Arc<Self>, cfg: &Config) -> Adaptation {
        let hooks = Arc::new(DomainHooks {
            core: Arc::downgrade(self),
        });
        let id = &self.identity;
        let mut b = Adaptation::builder(&id.runtime_name, &id.runtime_version, hooks)
            .plugin_path(&cfg.plugin_path)
            .plugin_config_path(&cfg.plugin_config_path)
            .socket_path(&cfg.socket_path)
            .socket_access(cfg.socket_access())
            .builtin_plugins(id.builtin.iter().cloned());
        if !cfg.registration_timeout.is_zero() {
            b = b.registration_timeout(cfg.registration_timeout);
        }
        if !cfg.request_timeout.is_zero() {
            b = b.request_timeout(cfg.request_timeout);
        }
        if let Some(window) = cfg.busy_poll {
            b = b.plugin_busy_poll(window);
        }
        if cfg.teardown_stops_at_first_error {
            b = b.teardown_stops_at_first_error(true);
        }
        if cfg.disable_connections {
            b = b.disable_external_connections();
        }
        if let Some(v) = &cfg.default_validator {
            b = b.default_validator(v.clone());
        }
        if let Some(p) = cfg.policy_validator.as_ref().filter(|p| p.enable) {
            let policy: Arc<dyn nri_adaptation::BuiltinPlugin> = Arc::new(self.policy.builtin(p));
            b = b.builtin_plugins([policy]);
        }
        if let Some(m) = &id.metrics {
            b = b.metrics(m.clone());
        }
        b.build()
    }

    /// Builds and starts an adaptation for `cfg`; a failed one is stopped
    /// (which also ends plugins it launched).
    async fn launch(self: &Arc<Self>, cfg: &Config) -> Result<Adaptation, nri_adaptation::Error> {
        let adaptation = self.build(cfg);
        match adaptation.start().await {
            Ok(()) => Ok(adaptation),
            Err(e) => {
                adaptation.stop().await;
                Err(e)
            }
        }
    }

    /// Starts the exit delivery task, once, if a tokio runtime is there.
    fn ensure_worker(self: &Arc<Self>) {
        let mut worker = lock(&self.worker);
        if worker.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                *worker = Some(rt.spawn(deliver_exits(Arc::downgrade(self), self.exits.clone())));
            }
            Err(_) => tracing::warn!("no tokio runtime: NRI exit notifications stay queued"),
        }
    }
}

/// Delivers queued exit notifications, one at a time, while they can be
/// delivered; sleeps until woken otherwise. Holds the integration only
/// weakly while it sleeps, and ends when the integration is dropped.
async fn deliver_exits(core: Weak<Core>, exits: Arc<ExitQueue>) {
    loop {
        let next = {
            let Some(core) = core.upgrade() else { return };
            if core.exits_deliverable() {
                exits.pop().map(|exit| (core, exit))
            } else {
                None
            }
        };
        match next {
            Some((core, (pod, ctr))) => Nri { core }.deliver_exit(pod, ctr).await,
            None => exits.woken().await,
        }
    }
}

/// While held, no NRI plugin is synchronized or added; returned by
/// [`Nri::block_plugin_sync`]. Inert when NRI is not running.
pub struct SyncBlock(#[allow(dead_code)] Option<PluginSyncBlock>);

impl SyncBlock {
    /// Releases the block (same as dropping it).
    pub fn unblock(self) {}

    /// Whether it blocks anything (false when NRI is disabled or not
    /// running).
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }
}

impl Nri {
    /// An integration with `config` and the default options.
    pub fn new(config: Config) -> Nri {
        Nri::builder(config).build()
    }

    /// Starts configuring an integration with `config`.
    pub fn builder(config: Config) -> NriBuilder {
        NriBuilder {
            config,
            runtime_name: "nri-rs".into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            builtin: Vec::new(),
            metrics: None,
        }
    }

    /// Whether NRI is enabled by the current configuration.
    pub fn is_enabled(&self) -> bool {
        self.core.enabled.load(Ordering::Acquire)
    }

    /// Whether NRI is enabled and running (started and not stopped).
    pub fn is_running(&self) -> bool {
        self.core.current().is_some()
    }

    /// The current configuration.
    pub fn config(&self) -> Config {
        lock(&self.core.config).clone()
    }

    /// Starts NRI, if enabled: launches the plugins of the plugin
    /// directory and the builtin plugins, synchronizes them with the
    /// registered domains, and listens for external plugins. Also starts
    /// the task delivering exit notifications.
    ///
    /// Calling it while NRI runs does nothing. When NRI is disabled it only
    /// records that the runtime wants NRI to run, so that a
    /// [`reload`](Self::reload) enabling NRI starts it.
    pub async fn start(&self) -> Result<(), Error> {
        let mut control = self.core.control.lock().await;
        control.started = true;
        if !self.is_enabled() || lock(&self.core.adaptation).is_some() {
            return Ok(());
        }
        let cfg = self.config();
        cfg.validate()?;
        let adaptation = self.core.launch(&cfg).await.map_err(|e| {
            control.started = false;
            Error::Start(e)
        })?;
        self.core.install(adaptation);
        self.core.ensure_worker();
        tracing::info!("NRI started");
        Ok(())
    }

    /// Stops NRI: plugins get Shutdown, connections close, launched
    /// plugins end. The recorded lifecycle states are forgotten (plugins
    /// that connect after a new start synchronize from the domains);
    /// queued exit notifications are kept for that next start.
    pub async fn stop(&self) {
        let mut control = self.core.control.lock().await;
        control.started = false;
        if let Some(adaptation) = self.core.take() {
            tracing::info!("stopping NRI");
            adaptation.stop().await;
        }
        self.core.lifecycle.clear();
    }

    /// Replaces the configuration, as moby's daemon reloads NRI:
    ///
    /// 1. **Prepare**: the new configuration is checked
    ///    ([`Config::validate`]) and a new instance built (not started). If
    ///    this fails, nothing changes: the running instance keeps running
    ///    and [`Error::ReloadPrepare`] is returned.
    /// 2. **Swap**: the new configuration becomes current and the old
    ///    instance is stopped (its plugins get Shutdown; external plugins
    ///    reconnect to the new socket as they would after a runtime
    ///    restart). Lifecycle calls made meanwhile are no-ops.
    /// 3. **Start** the new instance, if NRI was started (see
    ///    [`start`](Self::start)) and the new configuration enables it.
    ///    If it fails to start, an instance with the previous configuration
    ///    is started again when there was one; [`Error::ReloadStart`] says
    ///    whether that worked.
    ///
    /// Reloading to a disabled configuration stops NRI and drops queued
    /// exit notifications; reloading a disabled integration to an enabled
    /// configuration starts NRI (if [`start`](Self::start) was called).
    pub async fn reload(&self, config: Config) -> Result<(), Error> {
        let control = self.core.control.lock().await;
        let prepared = if config.enable {
            config.validate().map_err(Error::ReloadPrepare)?;
            Some(self.core.build(&config))
        } else {
            None
        };

        let old_config = self.core.set_config(config);
        let old = self.core.take();
        let was_running = old.is_some();
        if let Some(old) = old {
            tracing::info!("stopping the old NRI instance for a reload");
            old.stop().await;
        }
        let Some(next) = prepared.filter(|_| control.started) else {
            if !self.is_enabled() {
                self.core.lifecycle.clear();
                self.core.exits.clear();
            }
            return Ok(());
        };
        match next.start().await {
            Ok(()) => {
                self.core.install(next);
                self.core.ensure_worker();
                tracing::info!("NRI reloaded");
                Ok(())
            }
            Err(source) => {
                next.stop().await;
                tracing::warn!(error = %source, "NRI failed to start with the new configuration");
                let mut restored = false;
                if was_running {
                    match self.core.launch(&old_config).await {
                        Ok(again) => {
                            self.core.set_config(old_config);
                            self.core.install(again);
                            restored = true;
                        }
                        Err(e) => {
                            tracing::error!(error = %e,
                                "NRI failed to start again with the previous configuration");
                        }
                    }
                }
                Err(Error::ReloadStart { source, restored })
            }
        }
    }

    /// Registers the domain of one runtime namespace. Its pods and
    /// containers are listed for plugins that synchronize from now on, and
    /// updates of its containers are routed to it. Queued exit
    /// notifications are delivered once a domain is registered (and NRI
    /// runs).
    pub fn register_domain(&self, domain: Arc<dyn Domain>) -> Result<(), Error> {
        let name = domain.name().to_string();
        self.core.domains.add(domain)?;
        tracing::info!(domain = %name, "registered NRI domain");
        self.core.exits.wake();
        Ok(())
    }

    /// Unregisters a domain; returns it if it was registered.
    pub fn unregister_domain(&self, name: &str) -> Option<Arc<dyn Domain>> {
        self.core.domains.remove(name)
    }

    /// Names of the registered domains, sorted.
    pub fn domains(&self) -> Vec<String> {
        self.core.domains.names()
    }

    /// The plugins of the running instance, in invocation order (empty
    /// when NRI is not running).
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.core.current().map(|a| a.plugins()).unwrap_or_default()
    }

    /// Blocks the synchronization of newly connecting plugins until the
    /// returned guard is dropped, so that a plugin either is synchronized
    /// before an event or sees its outcome when it synchronizes. Take it
    /// before the runtime's own locks, around the processing of a
    /// lifecycle event. Never wait for it inside a [`Domain`] method.
    pub async fn block_plugin_sync(&self) -> SyncBlock {
        match self.core.current() {
            Some(a) => SyncBlock(Some(a.block_plugin_sync().await)),
            None => SyncBlock(None),
        }
    }

    /// What plugins have been told about the pod `id`.
    pub fn pod_state(&self, id: &str) -> LifecycleState {
        self.core.lifecycle.pods.get(id)
    }

    /// What plugins have been told about the container `id`.
    pub fn container_state(&self, id: &str) -> LifecycleState {
        self.core.lifecycle.containers.get(id)
    }

    /// Number of exit notifications waiting for delivery.
    pub fn pending_exits(&self) -> usize {
        self.core.exits.len()
    }
}

impl fmt::Debug for Nri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nri")
            .field("enabled", &self.is_enabled())
            .field("running", &self.is_running())
            .field("domains", &self.domains())
            .field("pending_exits", &self.pending_exits())
            .finish()
    }
}
