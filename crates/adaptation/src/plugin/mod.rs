//! One plugin as the adaptation sees it: identity, subscription, state, and
//! the typed calls of every event, whatever the plugin's transport.

mod fallback;
pub(crate) mod remote;
mod rpc;
pub(crate) mod sync;
#[cfg(feature = "wasm")]
pub(crate) mod wasm;

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_api::{ConfigureRequest, ConfigureResponse, Event, EventMask};
use tokio::time::Instant;

use crate::adaptation_error::{Error, PluginError};
use crate::builtin::BuiltinPlugin;
use crate::metrics::Metrics;
use crate::runtime::RuntimeHooks;
use crate::trace::RequestTrace;

pub(crate) use rpc::Rpc;

/// What every plugin of one adaptation shares: the runtime's identity,
/// timeouts, hooks and metrics.
pub(crate) struct Settings {
    pub runtime_name: String,
    pub runtime_version: String,
    pub registration_timeout: Duration,
    pub request_timeout: Duration,
    /// How long a call to a remote plugin polls for the reply before it
    /// waits to be woken (`nri_ttrpc::Client::with_busy_poll`).
    pub busy_poll: Duration,
    pub hooks: Arc<dyn RuntimeHooks>,
    pub metrics: Arc<dyn Metrics>,
    pub policies: crate::policy::Policies,
    /// How WebAssembly plugins are loaded and run.
    #[cfg(feature = "wasm")]
    pub wasm: nri_wasm::WasmOptions,
}

/// How a plugin is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// In-process ([`BuiltinPlugin`]).
    Builtin,
    /// Connected to the runtime's socket on its own.
    External,
    /// Launched by the runtime from the plugin directory.
    Launched,
}

impl PluginKind {
    /// The word used in logs (as the reference names its plugin kinds).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Builtin => "builtin",
            PluginKind::External => "external",
            PluginKind::Launched => "pre-connected",
        }
    }
}

/// Description of an active plugin, as [`Adaptation::plugins`](crate::Adaptation::plugins)
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    /// Base name.
    pub name: String,
    /// Two-digit index.
    pub index: String,
    /// How it is connected.
    pub kind: PluginKind,
    /// The events it is subscribed to.
    pub events: EventMask,
}

pub(crate) enum Backend {
    Remote(remote::Remote),
    Builtin(Arc<dyn BuiltinPlugin>),
    /// A WebAssembly module from the plugin directory.
    #[cfg(feature = "wasm")]
    Wasm(wasm::Wasm),
}

/// An active (or starting) plugin.
pub(crate) struct Plugin {
    pub idx: String,
    pub base: String,
    /// `<idx>-<base>`.
    pub name: String,
    pub kind: PluginKind,
    events: AtomicI32,
    /// Configure answered 0: subscribed to everything, including events an
    /// old plugin may not implement (decision [1]).
    subscribed_all: AtomicBool,
    closed: AtomicBool,
    /// The plugin lacks the dedicated notification RPCs; use StateChange.
    legacy: AtomicBool,
    /// Events for which the StateChange deprecation was reported.
    warned: AtomicI32,
    backend: Backend,
    pub(crate) settings: Arc<Settings>,
    /// The failure policy the plugin announced in its Configure reply.
    failure_policy: std::sync::Mutex<Option<nri_api::FailurePolicy>>,
    /// The request timeout granted on the plugin's own request
    /// (`AdaptationBuilder::max_plugin_requested_timeout`).
    granted_timeout: std::sync::Mutex<Option<Duration>>,
}

impl Plugin {
    pub(crate) fn new(
        idx: &str,
        base: &str,
        kind: PluginKind,
        backend: Backend,
        settings: Arc<Settings>,
    ) -> Plugin {
        Plugin {
            idx: idx.to_string(),
            base: base.to_string(),
            name: nri_api::plugin::qualified_name(idx, base),
            kind,
            events: AtomicI32::new(0),
            subscribed_all: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            legacy: AtomicBool::new(false),
            warned: AtomicI32::new(0),
            backend,
            settings,
            failure_policy: std::sync::Mutex::new(None),
            granted_timeout: std::sync::Mutex::new(None),
        }
    }

    pub(crate) fn info(&self) -> PluginInfo {
        PluginInfo {
            name: self.base.clone(),
            index: self.idx.clone(),
            kind: self.kind,
            events: self.events(),
        }
    }

    pub(crate) fn events(&self) -> EventMask {
        EventMask(self.events.load(Ordering::Relaxed))
    }

    pub(crate) fn subscribed(&self, event: Event) -> bool {
        self.events().is_set(event)
    }

    fn unsubscribe(&self, event: Event) {
        self.events
            .fetch_and(!EventMask::bit(event), Ordering::Relaxed);
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        let granted = *self
            .granted_timeout
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(granted) = granted {
            return granted;
        }
        self.settings.policies.request_timeout(
            &self.name,
            &self.base,
            self.settings.request_timeout,
        )
    }

    /// What a fatal error of one call does to this plugin and the call.
    pub(crate) fn on_fatal(&self, err: &PluginError) -> crate::policy::Outcome {
        self.decide_fatal(err, crate::policy::Policies::on_fatal)
    }

    /// What a fatal error of a validation call does to this validator and
    /// the creation.
    pub(crate) fn on_validator_fatal(&self, err: &PluginError) -> crate::policy::Outcome {
        self.decide_fatal(err, crate::policy::Policies::on_validator_fatal)
    }

    /// `decide` given this plugin's timeout policy and the failure policy it
    /// announced.
    fn decide_fatal(
        &self,
        err: &PluginError,
        decide: fn(
            crate::policy::TimeoutPolicy,
            Option<&nri_api::FailurePolicy>,
            &PluginError,
        ) -> crate::policy::Outcome,
    ) -> crate::policy::Outcome {
        let policy = self
            .settings
            .policies
            .timeout_policy(&self.name, &self.base);
        let announced = self
            .failure_policy
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        decide(policy, announced.as_ref(), err)
    }

    /// Whether the plugin is a WebAssembly module.
    #[cfg(feature = "wasm")]
    pub(crate) fn is_wasm(&self) -> bool {
        matches!(self.backend, Backend::Wasm(_))
    }

    /// For a WebAssembly plugin, waits until the re-synchronization of its
    /// replaced instances (if any) has been taken up; see
    /// [`wasm::Wasm::replacement_taken_up`].
    #[cfg(feature = "wasm")]
    pub(crate) async fn replacement_taken_up(&self) {
        if let Backend::Wasm(w) = &self.backend {
            w.replacement_taken_up().await;
        }
    }

    /// Whether the plugin is closed or its connection is gone.
    pub(crate) fn is_closed(&self) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return true;
        }
        match &self.backend {
            Backend::Remote(r) => r.is_closed(),
            Backend::Builtin(_) => false,
            #[cfg(feature = "wasm")]
            Backend::Wasm(_) => false,
        }
    }

    /// Marks the plugin closed and closes its connection. A launched
    /// process is left running until [`stop`](Self::stop).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        match &self.backend {
            Backend::Remote(r) => r.close(),
            Backend::Builtin(_) => {}
            #[cfg(feature = "wasm")]
            Backend::Wasm(w) => w.close(),
        }
    }

    /// Closes the plugin and kills and reaps its process, if launched.
    pub(crate) async fn stop(&self) {
        self.close();
        if let Backend::Remote(r) = &self.backend {
            r.kill().await;
        }
    }

    /// Sends Shutdown (bounded by the request timeout); errors are only
    /// logged.
    pub(crate) async fn shutdown(&self) {
        if self.is_closed() {
            return;
        }
        let timeout = self.request_timeout();
        let call = async {
            match &self.backend {
                Backend::Builtin(b) => tokio::time::timeout(timeout, b.shutdown())
                    .await
                    .map_err(|_| PluginError::Timeout),
                Backend::Remote(r) => r
                    .shutdown(timeout)
                    .await
                    .map(drop)
                    .map_err(PluginError::from),
                #[cfg(feature = "wasm")]
                Backend::Wasm(w) => w
                    .call::<_, nri_api::Empty>(
                        nri_wasm::WasmEvent::Shutdown,
                        &nri_api::Empty::default(),
                        timeout,
                    )
                    .await
                    .map(drop),
            }
        };
        let result = crate::trace::plugin_call(
            &self.name,
            nri_api::service::plugin::SHUTDOWN,
            &crate::trace::NoSubject,
            None,
            || call,
            crate::trace::outcome,
        )
        .await;
        match (&self.backend, result) {
            (_, Ok(())) => {}
            (Backend::Builtin(_), Err(_)) => {
                tracing::warn!(plugin = %self.name, "builtin plugin did not shut down in time");
            }
            (_, Err(e)) => {
                tracing::debug!(plugin = %self.name, error = %e, "Shutdown request failed");
            }
        }
    }

    /// Configures the plugin and stores its subscription. On failure the
    /// plugin is closed (the caller stops it).
    pub(crate) async fn configure(&self, config: String) -> Result<(), Error> {
        let s = &self.settings;
        let req = ConfigureRequest {
            config,
            runtime_name: s.runtime_name.clone(),
            runtime_version: s.runtime_version.clone(),
            registration_timeout: millis(s.registration_timeout),
            request_timeout: millis(self.request_timeout()),
            nri_version: nri_api::NRI_VERSION.to_string(),
        };
        let call = async {
            match &self.backend {
                Backend::Builtin(b) => {
                    match tokio::time::timeout(self.request_timeout(), b.configure(&req)).await {
                        Ok(Ok(mut reply)) => {
                            if reply.events == 0 {
                                reply.events = b.events().raw();
                            }
                            Ok(reply)
                        }
                        Ok(Err(e)) => Err(PluginError::Builtin(e)),
                        Err(_) => Err(PluginError::Timeout),
                    }
                }
                Backend::Remote(r) => r
                    .call::<_, ConfigureResponse>(
                        nri_api::service::plugin::CONFIGURE,
                        &req,
                        self.request_timeout(),
                    )
                    .await
                    .map_err(PluginError::from),
                #[cfg(feature = "wasm")]
                Backend::Wasm(w) => {
                    w.call(nri_wasm::WasmEvent::Configure, &req, self.request_timeout())
                        .await
                }
            }
        };
        let reply = crate::trace::plugin_call(
            &self.name,
            nri_api::service::plugin::CONFIGURE,
            &crate::trace::NoSubject,
            None,
            || call,
            crate::trace::outcome,
        )
        .await;
        if let Ok(reply) = &reply {
            *self
                .failure_policy
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = reply.failure_policy;
            let granted = s.policies.granted_timeout(reply.requested_timeout_ms);
            if reply.requested_timeout_ms != 0 {
                tracing::info!(plugin = %self.name, requested_ms = reply.requested_timeout_ms,
                    granted = ?granted, "plugin asked for its own request timeout");
            }
            *self
                .granted_timeout
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = granted;
        }
        let result = reply.map_err(Error::Configure).and_then(|reply| {
            let mask = EventMask(reply.events);
            if mask.is_empty() {
                self.subscribed_all.store(true, Ordering::Relaxed);
                return Ok(EventMask::VALID_EVENTS);
            }
            match mask.invalid_bits() {
                0 => Ok(mask),
                extra => Err(Error::InvalidEvents(extra)),
            }
        });
        match result {
            Ok(mask) => {
                self.events.store(mask.raw(), Ordering::Relaxed);
                tracing::info!(plugin = %self.name, events = %mask.pretty_string(), "plugin configured");
                Ok(())
            }
            Err(e) => {
                self.close();
                Err(e)
            }
        }
    }

    /// Calls the plugin for one event, as part of the runtime request
    /// `trace` (the call runs in a `nri.plugin_call` span and sends its own
    /// child context; `None`: a request of its own, see
    /// `crate::trace::plugin_call`). `Ok(None)`: the plugin is not subscribed (or was just
    /// unsubscribed, decision [1]).
    pub(crate) async fn call_event<R: Rpc>(
        &self,
        req: &R,
        trace: Option<&RequestTrace>,
    ) -> Result<Option<Box<R::Response>>, PluginError> {
        if !self.subscribed(R::EVENT) {
            return Ok(None);
        }
        crate::trace::plugin_call(
            &self.name,
            R::METHOD,
            req,
            trace,
            || self.call_subscribed(req),
            |result| match result {
                Ok(Some(_)) => "ok",
                Ok(None) => "unimplemented",
                Err(e) => crate::trace::error_outcome(e),
            },
        )
        .await
    }

    /// The reply is boxed where it is made (decoded straight into its box):
    /// a reply such as CreateContainer's is over a kilobyte, and each layer
    /// of futures between here and the caller would move it again.
    async fn call_subscribed<R: Rpc>(
        &self,
        req: &R,
    ) -> Result<Option<Box<R::Response>>, PluginError> {
        let event = R::EVENT;
        let timeout = self.request_timeout();
        let result = match &self.backend {
            Backend::Builtin(b) => {
                self.measured(R::METHOD, || async {
                    match tokio::time::timeout(timeout, R::builtin(b.as_ref(), req)).await {
                        Ok(Ok(reply)) => Ok(Box::new(reply)),
                        Ok(Err(e)) => Err(PluginError::Builtin(e)),
                        Err(_) => Err(PluginError::Timeout),
                    }
                })
                .await
            }
            Backend::Remote(r) => {
                if R::LEGACY && self.legacy.load(Ordering::Relaxed) {
                    return Box::pin(self.state_change(r, req))
                        .await
                        .map(|reply| Some(Box::new(reply)));
                }
                self.measured(R::METHOD, || async {
                    r.call::<_, Box<R::Response>>(R::METHOD, req, timeout)
                        .await
                        .map_err(PluginError::from)
                })
                .await
            }
            #[cfg(feature = "wasm")]
            Backend::Wasm(w) => {
                // Boxed: the module call's state is large, and would
                // otherwise be part of every plugin call's, remote ones too.
                self.measured(R::METHOD, || {
                    Box::pin(w.call(wasm::handler(event), req, timeout))
                })
                .await
            }
        };
        match result {
            Ok(reply) => Ok(Some(reply)),
            Err(e) if e.is_unimplemented() => match &self.backend {
                Backend::Remote(r) if R::LEGACY => {
                    self.legacy.store(true, Ordering::Relaxed);
                    tracing::info!(plugin = %self.name, event = R::METHOD,
                        "plugin lacks the dedicated RPC, falling back to StateChange");
                    Box::pin(self.state_change(r, req))
                        .await
                        .map(|reply| Some(Box::new(reply)))
                }
                _ if self.may_skip_unimplemented(event) => {
                    self.unsubscribe(event);
                    tracing::warn!(plugin = %self.name, event = R::METHOD,
                        "plugin subscribed to all events but does not implement this one; \
                         unsubscribing it from the event");
                    Ok(None)
                }
                _ => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Decision [1]: a plugin that subscribed to everything (mask 0) but
    /// answers `Unimplemented` to UpdatePodSandbox or validation is an old
    /// plugin, not a failing one.
    fn may_skip_unimplemented(&self, event: Event) -> bool {
        self.subscribed_all.load(Ordering::Relaxed)
            && matches!(
                event,
                Event::UpdatePodSandbox | Event::ValidateContainerAdjustment
            )
    }

    /// Runs one call, recording invocation and latency.
    async fn measured<T, F: std::future::Future<Output = Result<T, PluginError>>>(
        &self,
        operation: &str,
        make: impl FnOnce() -> F,
    ) -> Result<T, PluginError> {
        let start = Instant::now();
        let result = make().await;
        let metrics = &self.settings.metrics;
        metrics.record_plugin_latency(&self.name, operation, start.elapsed());
        let err = result.as_ref().err();
        metrics.record_plugin_invocation(
            &self.name,
            operation,
            err.map(|e| e as &(dyn std::error::Error + 'static)),
        );
        result
    }

    pub(crate) fn record_adjustments(
        &self,
        operation: &str,
        adjust: Option<&nri_api::ContainerAdjustment>,
        updates: &[nri_api::ContainerUpdate],
        evictions: usize,
    ) {
        let metrics = &self.settings.metrics;
        let asked = crate::AskedFor {
            adjust,
            updates: updates.len(),
            evictions,
        };
        metrics.record_plugin_adjustments(&self.name, operation, asked);
        if !updates.is_empty() {
            metrics.record_plugin_updates(&self.name, operation, updates);
        }
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("events", &self.events())
            .field("closed", &self.is_closed())
            .finish()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
