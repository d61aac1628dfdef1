//! [`AdaptationBuilder`]: the options of an [`Adaptation`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nri_api::plugin::{
    DEFAULT_PLUGIN_CONFIG_PATH, DEFAULT_PLUGIN_PATH, DEFAULT_REGISTRATION_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT, DEFAULT_SOCKET_PATH,
};
use nri_validator::DefaultValidatorConfig;

use crate::adaptation::Adaptation;
use crate::builtin::{BuiltinPlugin, DefaultValidatorPlugin};
use crate::metrics::{Metrics, NoMetrics};
use crate::plugin::Settings;
use crate::policy::{Policies, TimeoutPolicy};
use crate::restart::RestartPolicy;
use crate::runtime::RuntimeHooks;

/// Options of an [`Adaptation`]; created by [`Adaptation::builder`].
pub struct AdaptationBuilder {
    pub(crate) runtime_name: String,
    pub(crate) runtime_version: String,
    pub(crate) hooks: Arc<dyn RuntimeHooks>,
    pub(crate) plugin_path: PathBuf,
    pub(crate) plugin_config_path: PathBuf,
    pub(crate) socket_path: PathBuf,
    pub(crate) socket_access: crate::socket::SocketAccess,
    pub(crate) disable_external_connections: bool,
    pub(crate) registration_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) busy_poll: Duration,
    pub(crate) builtin: Vec<Arc<dyn BuiltinPlugin>>,
    pub(crate) default_validator: Option<DefaultValidatorConfig>,
    pub(crate) metrics: Arc<dyn Metrics>,
    pub(crate) policies: Policies,
    pub(crate) restart: Option<RestartPolicy>,
    #[cfg(feature = "wasm")]
    pub(crate) wasm: nri_wasm::WasmOptions,
}

impl AdaptationBuilder {
    pub(crate) fn new(
        runtime_name: impl Into<String>,
        runtime_version: impl Into<String>,
        hooks: Arc<dyn RuntimeHooks>,
    ) -> Self {
        AdaptationBuilder {
            runtime_name: runtime_name.into(),
            runtime_version: runtime_version.into(),
            hooks,
            plugin_path: DEFAULT_PLUGIN_PATH.into(),
            plugin_config_path: DEFAULT_PLUGIN_CONFIG_PATH.into(),
            socket_path: DEFAULT_SOCKET_PATH.into(),
            socket_access: crate::socket::SocketAccess::default(),
            disable_external_connections: false,
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            busy_poll: default_plugin_busy_poll(),
            builtin: Vec::new(),
            default_validator: None,
            metrics: Arc::new(NoMetrics),
            policies: Policies::default(),
            restart: None,
            #[cfg(feature = "wasm")]
            wasm: nri_wasm::WasmOptions::default(),
        }
    }

    /// Directory of plugins to launch (default `/opt/nri/plugins`).
    pub fn plugin_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin_path = path.into();
        self
    }

    /// Directory of their configuration files (default `/etc/nri/conf.d`).
    pub fn plugin_config_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin_config_path = path.into();
        self
    }

    /// Socket for external plugins (default `/var/run/nri/nri.sock`).
    pub fn socket_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket_path = path.into();
        self
    }

    /// Who may reach the socket for external plugins: its mode (default
    /// 0600, set explicitly whatever the process umask) and group, and the
    /// uids and gids admitted (default: every peer the mode lets connect).
    /// A peer not admitted is logged and disconnected before it can
    /// register. The socket's directory must not be writable by anyone
    /// else; a missing one is created with mode 0700 (0750 with a group).
    /// See [`socket::bind`](crate::socket::bind) and
    /// `docs/adaptation.md`. The reference leaves the mode to the umask
    /// and admits everyone.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use nri_adaptation::socket::SocketAccess;
    /// # use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
    /// # struct Runtime;
    /// # #[nri_adaptation::async_trait]
    /// # impl RuntimeHooks for Runtime {
    /// #     async fn synchronize(&self, s: &mut dyn Synchronizer) -> Result<(), BoxError> {
    /// #         s.synchronize(&[], &[]).await?; Ok(())
    /// #     }
    /// # }
    /// // Members of group 2000 may connect; only root and uid 1000 may register.
    /// let nri = Adaptation::builder("demo-runtime", "1.0", Arc::new(Runtime))
    ///     .socket_access(SocketAccess::default().mode(0o660).group(2000).allow_uids([0, 1000]))
    ///     .build();
    /// # drop(nri);
    /// ```
    pub fn socket_access(mut self, access: crate::socket::SocketAccess) -> Self {
        self.socket_access = access;
        self
    }

    /// Do not listen for external plugins at all.
    pub fn disable_external_connections(mut self) -> Self {
        self.disable_external_connections = true;
        self
    }

    /// How long a connected plugin may take to register (default 5 s).
    pub fn registration_timeout(mut self, timeout: Duration) -> Self {
        self.registration_timeout = timeout;
        self
    }

    /// Deadline of each request to a plugin (default 2 s); one deadline
    /// covers all messages of a split Synchronize.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a call to a plugin over its socket polls for the reply
    /// before the calling thread sleeps until the reply wakes it (see
    /// [`nri_ttrpc::Client::with_busy_poll`]); zero turns polling off.
    ///
    /// A plugin that replies within the window is answered without a
    /// wake-up of the runtime's thread, which took a tenth to a third off a
    /// CreateContainer through eight fast plugins in our runs; with plugins
    /// that take about the window or longer the effect varied from run to
    /// run (docs/PERFORMANCE.md, docs/PERFORMANCE-profile.md).
    /// The price is CPU time: up to the window per call, spent while the
    /// plugin works; calls to a plugin poll only while most of its recent
    /// replies came within the window. The default is [`DEFAULT_BUSY_POLL`] when the process
    /// may use two or more CPUs, and zero when it has one, where the poller
    /// would compete with the plugin for the only core. Not in the
    /// reference; Go's scheduler polls for a while on its own before it
    /// puts a thread to sleep.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
    /// # struct Runtime;
    /// # #[nri_adaptation::async_trait]
    /// # impl RuntimeHooks for Runtime {
    /// #     async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
    /// #         sync.synchronize(&[], &[]).await?;
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// // Never poll: every call to a plugin sleeps until its reply wakes it.
    /// let nri = Adaptation::builder("demo-runtime", "1.0", Arc::new(Runtime))
    ///     .plugin_busy_poll(Duration::ZERO)
    ///     .build();
    /// # drop(nri);
    /// ```
    pub fn plugin_busy_poll(mut self, window: Duration) -> Self {
        self.busy_poll = window;
        self
    }

    /// Request timeout of one plugin, named `<idx>-<name>` or by its base
    /// name (the full name wins when both are set); other plugins keep
    /// [`request_timeout`](Self::request_timeout). The plugin is told its
    /// own timeout in Configure. Not in the reference, which has one
    /// timeout for all plugins.
    pub fn plugin_request_timeout(mut self, plugin: impl Into<String>, timeout: Duration) -> Self {
        self.policies.timeouts.insert(plugin.into(), timeout);
        self
    }

    /// What a request timeout does to a plugin (default
    /// [`TimeoutPolicy::DropPlugin`], the reference's behaviour).
    pub fn timeout_policy(mut self, policy: TimeoutPolicy) -> Self {
        self.policies.timeout_policy = policy;
        self
    }

    /// The [`TimeoutPolicy`] of one plugin, named `<idx>-<name>` or by its
    /// base name; overrides [`timeout_policy`](Self::timeout_policy).
    pub fn plugin_timeout_policy(
        mut self,
        plugin: impl Into<String>,
        policy: TimeoutPolicy,
    ) -> Self {
        self.policies.timeout_policies.insert(plugin.into(), policy);
        self
    }

    /// Plugins (named `<idx>-<name>` or by base name) without which no
    /// container is created: while one is not connected,
    /// [`Adaptation::create_container`] fails with
    /// [`Error::RequiredPluginMissing`](crate::Error::RequiredPluginMissing).
    /// The pod annotation `required-plugins.noderesource.dev` (also
    /// `…/pod` and `…/container.<name>`) adds plugins per pod or container.
    /// Calling it (even with an empty list) turns the check on; by default
    /// there is none and the annotation is left to validators, as in the
    /// reference.
    pub fn required_plugins<S: Into<String>>(
        mut self,
        plugins: impl IntoIterator<Item = S>,
    ) -> Self {
        self.policies
            .required
            .extend(plugins.into_iter().map(Into::into));
        self.policies.check_required = true;
        self
    }

    /// Lets a new external connection with the name and index of a
    /// connected external plugin replace it (rolling upgrades): the new one
    /// is synchronized, then swapped in while no lifecycle call runs, then
    /// the old one gets Shutdown and is closed. Every event reaches exactly
    /// one of them. Default off: both stay connected, as in the reference.
    pub fn replace_same_identity(mut self, replace: bool) -> Self {
        self.policies.replace_same_identity = replace;
        self
    }

    /// Restarts plugins launched from the plugin directory when they die
    /// (their process exits or their connection is lost while NRI runs),
    /// with exponential backoff, up to a limit: see [`RestartPolicy`]. A
    /// restarted plugin registers, is configured and synchronized as at
    /// start-up; a plugin that failed to start at start-up is retried the
    /// same way. Restarts never hold up lifecycle calls; a required plugin
    /// (see [`required_plugins`](Self::required_plugins)) that is being
    /// restarted is missing until it is back. [`Adaptation::stop`] ends all
    /// restarts. Default: no restart, as in the reference.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// # use nri_adaptation::{Adaptation, BoxError, RestartPolicy, RuntimeHooks, Synchronizer};
    /// # struct Runtime;
    /// # #[nri_adaptation::async_trait]
    /// # impl RuntimeHooks for Runtime {
    /// #     async fn synchronize(&self, s: &mut dyn Synchronizer) -> Result<(), BoxError> {
    /// #         s.synchronize(&[], &[]).await?; Ok(())
    /// #     }
    /// # }
    /// let nri = Adaptation::builder("demo-runtime", "1.0", Arc::new(Runtime))
    ///     .restart_plugins(RestartPolicy {
    ///         max_restarts: 3,
    ///         initial_backoff: Duration::from_millis(500),
    ///         ..RestartPolicy::default()
    ///     })
    ///     .build();
    /// ```
    ///
    /// [`Adaptation::stop`]: crate::Adaptation::stop
    pub fn restart_plugins(mut self, policy: RestartPolicy) -> Self {
        self.restart = Some(policy);
        self
    }

    /// How WebAssembly plugins of the plugin directory are loaded and run:
    /// the cache of compiled modules, the memory limit of one instance, the
    /// time allowed for a module's initialization. Default:
    /// [`WasmOptions::default`](nri_wasm::WasmOptions::default). Only with
    /// the `wasm` feature (on by default).
    #[cfg(feature = "wasm")]
    pub fn wasm_options(mut self, options: nri_wasm::WasmOptions) -> Self {
        self.wasm = options;
        self
    }

    /// Delivers to a connecting plugin (or a pre-installed plugin being
    /// restarted, see [`restart_plugins`](Self::restart_plugins)) the events
    /// of pods and containers that happen while it is being synchronized: they are queued from the
    /// moment its synchronization starts and replayed, in order and once,
    /// when it is done, before it sees any newer event. Events whose effect
    /// the synchronization already showed are dropped; CreateContainer and
    /// UpdateContainer are not replayed (the container exists already; the
    /// plugin gets PostCreateContainer and PostUpdateContainer if it
    /// subscribed to them). `docs/adaptation.md` describes the design.
    /// Default off: a plugin sees only the events that start after it was
    /// added, as in the reference, where a runtime that blocks plugin
    /// synchronization ([`Adaptation::block_plugin_sync`]) around its
    /// events loses none.
    ///
    /// [`Adaptation::block_plugin_sync`]: crate::Adaptation::block_plugin_sync
    pub fn deliver_events_during_sync(mut self, deliver: bool) -> Self {
        self.policies.deliver_events_during_sync = deliver;
        self
    }

    /// Stops delivering a teardown event (StopContainer, RemoveContainer,
    /// StopPodSandbox, RemovePodSandbox) at the first plugin that fails it,
    /// as the reference does. Default off: every subscribed plugin gets the
    /// event even when one before it failed, and the first failure is
    /// returned after all were called (the NRI pod lifecycle contract), so
    /// that a resource manager after a failing plugin still releases what
    /// the container held.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
    /// # struct Runtime;
    /// # #[nri_adaptation::async_trait]
    /// # impl RuntimeHooks for Runtime {
    /// #     async fn synchronize(&self, s: &mut dyn Synchronizer) -> Result<(), BoxError> {
    /// #         s.synchronize(&[], &[]).await?; Ok(())
    /// #     }
    /// # }
    /// let nri = Adaptation::builder("demo-runtime", "1.0", Arc::new(Runtime))
    ///     .teardown_stops_at_first_error(true)
    ///     .build();
    /// # drop(nri);
    /// ```
    pub fn teardown_stops_at_first_error(mut self, stop: bool) -> Self {
        self.policies.teardown_stops_at_first_error = stop;
        self
    }

    /// Lets plugins ask for their own request timeout in their Configure
    /// reply (the nri-rs extension field `requested_timeout_ms`), up to
    /// `max`: a plugin's request, clamped to `max`, replaces the timeout it
    /// would otherwise have ([`request_timeout`](Self::request_timeout) or
    /// [`plugin_request_timeout`](Self::plugin_request_timeout)) for every
    /// later request. Default: unset, requests are ignored, as in the
    /// reference (which has no such field).
    pub fn max_plugin_requested_timeout(mut self, max: Duration) -> Self {
        self.policies.max_requested_timeout = Some(max);
        self
    }

    /// Adds builtin plugins, started in the order given.
    pub fn builtin_plugins(
        mut self,
        plugins: impl IntoIterator<Item = Arc<dyn BuiltinPlugin>>,
    ) -> Self {
        self.builtin.extend(plugins);
        self
    }

    /// Receives measurements of plugin calls (default: none recorded).
    pub fn metrics(mut self, metrics: Arc<dyn Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs the default validator as the builtin plugin `00-default-validator`
    /// (started before every other builtin), if `config.enable` is set.
    pub fn default_validator(mut self, config: DefaultValidatorConfig) -> Self {
        self.default_validator = Some(config);
        self
    }

    /// Creates the adaptation. Nothing runs before [`Adaptation::start`].
    pub fn build(self) -> Adaptation {
        let mut builtin = self.builtin;
        if let Some(cfg) = self.default_validator.filter(|c| c.enable) {
            builtin.insert(0, Arc::new(DefaultValidatorPlugin::new(cfg)));
        }
        let settings = Settings {
            runtime_name: self.runtime_name,
            runtime_version: self.runtime_version,
            registration_timeout: self.registration_timeout,
            request_timeout: self.request_timeout,
            busy_poll: self.busy_poll,
            hooks: self.hooks,
            metrics: self.metrics,
            policies: self.policies,
            #[cfg(feature = "wasm")]
            wasm: self.wasm,
        };
        Adaptation::from_parts(
            settings,
            crate::adaptation::Paths {
                plugin_path: self.plugin_path,
                plugin_config_path: self.plugin_config_path,
                socket_path: (!self.disable_external_connections).then_some(self.socket_path),
                socket_access: self.socket_access,
                restart: self.restart,
            },
            builtin,
        )
    }
}

/// How long a call to a plugin polls for its reply by default, on a machine
/// with a core to spare ([`AdaptationBuilder::plugin_busy_poll`]).
///
/// A quarter of a millisecond: long enough for a Go plugin, whose replies
/// took 90 to 200 µs on the 2-core machine of docs/PERFORMANCE.md (a Rust
/// plugin's 40 to 80 µs). With 100 µs many of a Go plugin's replies came
/// just after the window, and the runtime slept for them.
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(250);

/// The window [`AdaptationBuilder::plugin_busy_poll`] has by default:
/// [`DEFAULT_BUSY_POLL`] if this process may run on two or more CPUs, zero
/// otherwise (or if that cannot be told).
///
/// ```
/// let window = nri_adaptation::default_plugin_busy_poll();
/// assert!(window.is_zero() || window == nri_adaptation::DEFAULT_BUSY_POLL);
/// ```
pub fn default_plugin_busy_poll() -> Duration {
    match std::thread::available_parallelism() {
        Ok(n) if n.get() >= 2 => DEFAULT_BUSY_POLL,
        _ => Duration::ZERO,
    }
}
