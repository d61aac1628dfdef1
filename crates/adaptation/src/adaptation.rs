//! [`Adaptation`]: the runtime's handle on NRI: start-up, the plugin list,
//! the locks, and stop.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedRwLockReadGuard, RwLock};
use tokio::task::JoinHandle;

use crate::adaptation_error::Error;
use crate::builder::AdaptationBuilder;
use crate::builtin::BuiltinPlugin;
use crate::plugin::{Backend, Plugin, PluginInfo, PluginKind, Settings};
use crate::runtime::{RuntimeHooks, Synchronizer};

/// The runtime side of NRI.
///
/// Create it with [`Adaptation::builder`], [`start`](Self::start) it, call
/// the lifecycle entry points ([`create_container`](Self::create_container)
/// and the others) as pods and containers change, and
/// [`stop`](Self::stop) it at the end.
///
/// ```
/// use std::sync::Arc;
/// use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
/// use nri_api::{Container, CreateContainerRequest};
///
/// struct Runtime;
///
/// #[nri_adaptation::async_trait]
/// impl RuntimeHooks for Runtime {
///     async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
///         sync.synchronize(&[], &[]).await?;
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tmp = tempfile::tempdir()?;
/// let nri = Adaptation::builder("demo-runtime", "1.0", Arc::new(Runtime))
///     .plugin_path(tmp.path().join("plugins"))
///     .socket_path(tmp.path().join("nri.sock"))
///     .build();
/// nri.start().await?;
///
/// let request = CreateContainerRequest {
///     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
///     ..Default::default()
/// };
/// let reply = nri.create_container(request).await?;
/// assert!(reply.update.is_empty());
/// nri.stop().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Adaptation {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Paths {
    pub plugin_path: PathBuf,
    pub plugin_config_path: PathBuf,
    /// `None` when external connections are disabled.
    pub socket_path: Option<PathBuf>,
    /// The socket's mode and group, and the peers admitted on it.
    pub socket_access: crate::socket::SocketAccess,
    /// Whether and how plugins launched from `plugin_path` are restarted.
    pub restart: Option<crate::restart::RestartPolicy>,
}

#[derive(Default)]
struct State {
    started: bool,
    stopped: bool,
    listener: Option<JoinHandle<()>>,
}

pub(crate) struct Inner {
    pub settings: Arc<Settings>,
    pub paths: Paths,
    builtin: Vec<Arc<dyn BuiltinPlugin>>,
    /// Serializes lifecycle calls, start-up and stop.
    pub lifecycle: tokio::sync::Mutex<()>,
    /// The active plugins, sorted by index. Held only briefly, never across
    /// an await.
    plugins: Mutex<Vec<Arc<Plugin>>>,
    /// Exclusive while a plugin is synchronized and added; shared by
    /// [`PluginSyncBlock`].
    pub sync_lock: Arc<RwLock<()>>,
    /// Event numbering and the queues of synchronizing plugins.
    pub backlogs: crate::backlog::Backlogs,
    state: Mutex<State>,
    /// Restart supervisors of launched plugins.
    restarts: crate::restart::Supervisors,
}

/// While held, no plugin is synchronized or added: a plugin is either fully
/// synchronized before the runtime's event, or sees its result in its
/// synchronization. Returned by [`Adaptation::block_plugin_sync`].
pub struct PluginSyncBlock(#[allow(dead_code)] OwnedRwLockReadGuard<()>);

impl PluginSyncBlock {
    /// Releases the block (same as dropping it).
    pub fn unblock(self) {}
}

impl Adaptation {
    /// Starts configuring an adaptation for the runtime `runtime_name`
    /// `runtime_version`, with the runtime's `hooks`.
    pub fn builder(
        runtime_name: impl Into<String>,
        runtime_version: impl Into<String>,
        hooks: Arc<dyn RuntimeHooks>,
    ) -> AdaptationBuilder {
        AdaptationBuilder::new(runtime_name, runtime_version, hooks)
    }

    pub(crate) fn from_parts(
        settings: Settings,
        paths: Paths,
        builtin: Vec<Arc<dyn BuiltinPlugin>>,
    ) -> Adaptation {
        Adaptation {
            inner: Arc::new(Inner {
                settings: Arc::new(settings),
                paths,
                builtin,
                lifecycle: tokio::sync::Mutex::new(()),
                plugins: Mutex::new(Vec::new()),
                sync_lock: Arc::new(RwLock::new(())),
                backlogs: crate::backlog::Backlogs::default(),
                state: Mutex::new(State::default()),
                restarts: crate::restart::Supervisors::new(),
            }),
        }
    }

    /// Starts NRI: configures the builtin plugins, launches the plugins of
    /// the plugin directory, synchronizes them all through one
    /// [`RuntimeHooks::synchronize`] call, then listens for external
    /// plugins (unless disabled).
    ///
    /// A builtin plugin that fails, a failing synchronization hook or a
    /// socket that cannot be created fail the start; a launched plugin that
    /// fails is skipped with a warning.
    ///
    /// Like the lifecycle calls, the returned future is boxed: it is the
    /// size of a pointer.
    pub fn start(&self) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.start_up())
    }

    async fn start_up(&self) -> Result<(), Error> {
        {
            let mut state = self.inner.state();
            if state.started || state.stopped {
                return Err(Error::AlreadyStarted);
            }
            state.started = true;
        }
        let discovered = crate::discover::discover(
            &self.inner.paths.plugin_path,
            &self.inner.paths.plugin_config_path,
        )?;

        let mut started: Vec<Arc<Plugin>> = Vec::new();
        for b in &self.inner.builtin {
            match self.start_builtin(b.clone()).await {
                Ok(p) => started.push(p),
                Err(e) => {
                    for p in &started {
                        p.stop().await;
                    }
                    return Err(e);
                }
            }
        }
        // With a restart policy, every launched plugin gets a supervisor.
        let restart = self.inner.paths.restart;
        let mut supervised = Vec::new();
        for d in discovered {
            let name = d.name();
            tracing::info!(plugin = %name, "starting pre-installed NRI plugin");
            let keep = restart.map(|_| d.clone());
            match crate::launch::start(&self.inner.settings, d).await {
                Ok(l) => {
                    started.push(l.plugin.clone());
                    supervised.extend(keep.map(|d| (d, Some(l))));
                }
                Err(e) => {
                    tracing::warn!(plugin = %name, error = %e, "failed to start pre-installed NRI plugin");
                    supervised.extend(keep.map(|d| (d, None)));
                }
            }
        }

        let sync_guard = self.inner.sync_lock.clone().write_owned().await;
        let mut sync = StartupSync { plugins: started };
        if let Err(e) = self.inner.settings.hooks.synchronize(&mut sync).await {
            for p in &sync.plugins {
                p.stop().await;
            }
            return Err(Error::StartupSync(e));
        }
        for p in sync.plugins {
            if p.is_closed() {
                p.stop().await;
            } else {
                #[cfg(feature = "wasm")]
                crate::plugin::wasm::resync_after_replacement(&self.inner, &p);
                self.inner.add_plugin(p);
            }
        }
        drop(sync_guard);
        if let Some(policy) = restart {
            for (d, launched) in supervised {
                // A plugin dropped during start-up is restarted too.
                let up = launched.filter(|l| !l.plugin.is_closed());
                self.inner.restarts.spawn(&self.inner, policy, d, up);
            }
        }

        if let Some(path) = self.inner.paths.socket_path.clone() {
            let handle = crate::listener::listen(
                Arc::downgrade(&self.inner),
                &path,
                &self.inner.paths.socket_access,
            )?;
            let mut state = self.inner.state();
            if state.stopped {
                handle.abort();
            } else {
                state.listener = Some(handle);
            }
        }
        Ok(())
    }

    async fn start_builtin(&self, b: Arc<dyn BuiltinPlugin>) -> Result<Arc<Plugin>, Error> {
        let (idx, base) = (b.index().to_string(), b.name().to_string());
        if idx.is_empty() || base.is_empty() {
            return Err(Error::BuiltinInit {
                name: base.clone(),
                source: Box::new(Error::BuiltinIdentity {
                    index: idx,
                    name: base,
                }),
            });
        }
        tracing::info!(plugin = %nri_api::plugin::qualified_name(&idx, &base), "starting builtin NRI plugin");
        let p = Arc::new(Plugin::new(
            &idx,
            &base,
            PluginKind::Builtin,
            Backend::Builtin(b),
            self.inner.settings.clone(),
        ));
        p.configure(String::new())
            .await
            .map_err(|e| Error::BuiltinStart {
                name: base,
                source: Box::new(e),
            })?;
        Ok(p)
    }

    /// Stops NRI: stops accepting plugins, sends Shutdown to every plugin
    /// (each bounded by the request timeout, all at once), closes every
    /// connection and kills and reaps launched plugins (decision 18).
    /// Waits for a running lifecycle call to finish first.
    pub async fn stop(&self) {
        let listener = {
            let mut state = self.inner.state();
            state.stopped = true;
            state.listener.take()
        };
        if let Some(listener) = listener {
            listener.abort();
            let _ = listener.await;
            if let Some(path) = &self.inner.paths.socket_path {
                let _ = std::fs::remove_file(path);
            }
        }
        // No restart after this; a plugin being restarted is killed.
        self.inner.restarts.stop().await;
        let _lifecycle = self.inner.lifecycle.lock().await;
        let plugins = std::mem::take(&mut *self.inner.plugins());
        let tasks: Vec<_> = plugins
            .into_iter()
            .map(|p| {
                tokio::spawn(async move {
                    p.shutdown().await;
                    p.stop().await;
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        self.inner.settings.metrics.update_plugin_count(0);
    }

    /// Blocks the synchronization of newly connecting plugins until the
    /// returned guard is dropped. Take it before the runtime's own locks.
    pub async fn block_plugin_sync(&self) -> PluginSyncBlock {
        PluginSyncBlock(self.inner.sync_lock.clone().read_owned().await)
    }

    /// The active plugins, in invocation (index) order.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.inner
            .plugins()
            .iter()
            .filter(|p| !p.is_closed())
            .map(|p| p.info())
            .collect()
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn plugins(&self) -> MutexGuard<'_, Vec<Arc<Plugin>>> {
        self.plugins.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.state().stopped
    }

    /// The current plugin list, for one lifecycle call.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Plugin>> {
        self.plugins().clone()
    }

    /// Adds a synchronized plugin, keeping the list sorted by index (stable:
    /// equal indices keep their arrival order).
    pub(crate) fn add_plugin(&self, plugin: Arc<Plugin>) {
        let count = {
            let mut list = self.plugins();
            list.push(plugin);
            list.sort_by(|a, b| a.idx.cmp(&b.idx));
            list.len()
        };
        self.settings.metrics.update_plugin_count(count);
    }

    /// Removes and returns the first plugin matching `pred`.
    pub(crate) fn take_plugin(&self, pred: impl Fn(&Plugin) -> bool) -> Option<Arc<Plugin>> {
        let mut list = self.plugins();
        let pos = list.iter().position(|p| pred(p))?;
        Some(list.remove(pos))
    }

    /// Drops closed plugins from the list and stops them in the background.
    pub(crate) fn remove_closed(&self) {
        let (removed, count) = {
            let mut list = self.plugins();
            let (closed, open): (Vec<_>, Vec<_>) = list.drain(..).partition(|p| p.is_closed());
            *list = open;
            (closed, list.len())
        };
        if removed.is_empty() {
            return;
        }
        for p in removed {
            tracing::info!(plugin = %p.name, "removing closed plugin");
            self.settings.metrics.record_plugin_drop(&p.name);
            tokio::spawn(async move { p.stop().await });
        }
        self.settings.metrics.update_plugin_count(count);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(listener) = self.state().listener.take() {
            listener.abort();
        }
    }
}

/// The synchronizer of start-up: every started plugin, failures dropped.
struct StartupSync {
    plugins: Vec<Arc<Plugin>>,
}

#[async_trait::async_trait]
impl Synchronizer for StartupSync {
    async fn synchronize(
        &mut self,
        pods: &[nri_api::PodSandbox],
        containers: &[nri_api::Container],
    ) -> Result<Vec<nri_api::ContainerUpdate>, Error> {
        let mut updates = Vec::new();
        let mut synced = Vec::with_capacity(self.plugins.len());
        for p in std::mem::take(&mut self.plugins) {
            match p.synchronize(pods, containers).await {
                Ok(u) => {
                    tracing::info!(plugin = %p.name, "pre-installed NRI plugin synchronized");
                    updates.extend(u);
                    synced.push(p);
                }
                Err(e) => {
                    tracing::warn!(plugin = %p.name, error = %e,
                        "failed to synchronize pre-installed NRI plugin");
                    p.stop().await;
                }
            }
        }
        self.plugins = synced;
        Ok(updates)
    }
}
