//! What handlers know about the plugin and the runtime: [`Context`], [`RuntimeInfo`],
//! [`ConfigureInfo`].

#[cfg(feature = "async")]
use std::sync::Arc;
use std::time::Duration;

use nri_api::ConfigureRequest;
#[cfg(feature = "async")]
use nri_api::{ContainerEviction, ContainerUpdate};
#[cfg(feature = "async")]
use nri_ttrpc::TraceContext;

use crate::version::runtime_nri_version;
use crate::RuntimeCapabilities;
#[cfg(feature = "async")]
use crate::{Error, RuntimeHandle};

/// Registration timeout used until the runtime sends its own (NRI's default, 5 s).
pub const DEFAULT_REGISTRATION_TIMEOUT: Duration = nri_api::plugin::DEFAULT_REGISTRATION_TIMEOUT;
/// Request timeout used until the runtime sends its own (NRI's default, 2 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = nri_api::plugin::DEFAULT_REQUEST_TIMEOUT;

/// The runtime the plugin is connected to, as told by its Configure request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeInfo {
    /// Runtime name, e.g. `containerd`.
    pub name: String,
    /// Runtime version, e.g. `v2.1.0`.
    pub version: String,
    /// The runtime's NRI version: reported by the runtime, or inferred from its name and
    /// version for runtimes that do not report it (see `nri_version_inferred`); `None`
    /// when neither is possible.
    pub nri_version: Option<String>,
    /// True when `nri_version` was inferred.
    pub nri_version_inferred: bool,
    /// The runtime's registration timeout. Runtimes that send none (NRI before v0.7)
    /// leave the default, [`DEFAULT_REGISTRATION_TIMEOUT`] (the Go stub would use 0).
    pub registration_timeout: Duration,
    /// The runtime's timeout for each request to the plugin; default
    /// [`DEFAULT_REQUEST_TIMEOUT`] as above.
    pub request_timeout: Duration,
}

impl RuntimeInfo {
    /// What this runtime is known to apply, from its name and version (see
    /// [`RuntimeCapabilities`]): test it at Configure before adjusting.
    ///
    /// ```
    /// # let mut runtime = nri_stub::RuntimeInfo::default();
    /// # runtime.name = "docker".into();
    /// use nri_stub::Adjustment;
    ///
    /// if !runtime.capabilities().applies(Adjustment::Annotations) {
    ///     tracing::warn!("{} does not apply annotations: adding none", runtime.name);
    /// }
    /// ```
    pub fn capabilities(&self) -> RuntimeCapabilities {
        RuntimeCapabilities::for_runtime(&self.name, &self.version)
    }
}

impl Default for RuntimeInfo {
    fn default() -> Self {
        RuntimeInfo {
            name: String::new(),
            version: String::new(),
            nri_version: None,
            nri_version_inferred: false,
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// What [`Plugin::configure`](crate::Plugin::configure) receives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConfigureInfo {
    /// Plugin configuration text from the runtime (for plugins it launches; empty for
    /// plugins that connect on their own).
    pub config: String,
    /// The runtime.
    pub runtime: RuntimeInfo,
}

/// Passed to every handler: who the plugin is, which runtime it talks to, and a handle
/// to send the runtime unsolicited updates. Cheap to clone.
///
/// ```no_run
/// # async fn demo(ctx: &nri_stub::Context) -> Result<(), nri_stub::Error> {
/// use nri_stub::api::ContainerUpdate;
///
/// println!("{} runs on {} {}", ctx.name(), ctx.runtime().name, ctx.runtime().version);
/// let failed = ctx.update_containers(vec![ContainerUpdate::default()], vec![]).await?;
/// assert!(failed.is_empty());
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "async")]
#[derive(Debug, Clone)]
pub struct Context {
    inner: Arc<Inner>,
    /// The trace context of the request being handled.
    trace: Option<TraceContext>,
}

#[cfg(feature = "async")]
#[derive(Debug)]
struct Inner {
    name: String,
    index: String,
    base_name: String,
    runtime: RuntimeInfo,
    handle: RuntimeHandle,
}

#[cfg(feature = "async")]
impl Context {
    pub(crate) fn new(
        index: &str,
        name: &str,
        runtime: RuntimeInfo,
        handle: RuntimeHandle,
    ) -> Self {
        Context {
            inner: Arc::new(Inner {
                name: format!("{index}-{name}"),
                index: index.to_string(),
                base_name: name.to_string(),
                runtime,
                handle,
            }),
            trace: None,
        }
    }

    /// This context for a request that came with `trace`.
    pub(crate) fn with_trace(mut self, trace: Option<TraceContext>) -> Self {
        self.trace = trace;
        self
    }

    /// The trace context the runtime sent with the request being handled
    /// (W3C `traceparent` / `tracestate` in the ttRPC request metadata, as
    /// containerd's `otelttrpc` interceptors and `nri-adaptation` send
    /// them), or `None` when the request carried none or an invalid one.
    ///
    /// Its [`trace_id`](TraceContext::trace_id_hex) is the runtime's trace;
    /// its [`span_id`](TraceContext::span_id_hex) is the runtime's span of
    /// this call, the parent of the plugin's work. The handler runs inside a
    /// `nri.plugin_request` span that records both (`trace_id`,
    /// `parent_span_id`). To call on with the same trace, use
    /// [`TraceContext::child`].
    ///
    /// ```no_run
    /// # fn demo(ctx: &nri_stub::Context) {
    /// if let Some(trace) = ctx.trace_context() {
    ///     tracing::info!(trace_id = %trace.trace_id_hex(), "handling a traced request");
    /// }
    /// # }
    /// ```
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// The plugin's full name, `<index>-<name>`, as the runtime knows it.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The plugin's base name (without the index).
    pub fn plugin_name(&self) -> &str {
        &self.inner.base_name
    }

    /// The plugin's two-digit index.
    pub fn plugin_index(&self) -> &str {
        &self.inner.index
    }

    /// The runtime, as it described itself in Configure.
    pub fn runtime(&self) -> &RuntimeInfo {
        &self.inner.runtime
    }

    /// A handle to send unsolicited requests to the runtime, usable outside handlers too.
    pub fn runtime_handle(&self) -> &RuntimeHandle {
        &self.inner.handle
    }

    /// Asks the runtime to update and evict containers; returns the updates that failed.
    /// Shorthand for [`RuntimeHandle::update_containers`].
    pub async fn update_containers(
        &self,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        self.inner
            .handle
            .update_containers(updates, evictions)
            .await
    }
}

/// What a Configure request says of the runtime: its NRI version (reported,
/// or inferred from its name and version) and its timeouts (the defaults
/// where it sends none).
pub(crate) fn runtime_info(req: ConfigureRequest) -> RuntimeInfo {
    let (nri_version, nri_version_inferred) =
        runtime_nri_version(&req.nri_version, &req.runtime_name, &req.runtime_version);
    RuntimeInfo {
        name: req.runtime_name,
        version: req.runtime_version,
        nri_version,
        nri_version_inferred,
        registration_timeout: timeout_ms(req.registration_timeout, DEFAULT_REGISTRATION_TIMEOUT),
        request_timeout: timeout_ms(req.request_timeout, DEFAULT_REQUEST_TIMEOUT),
    }
}

fn timeout_ms(ms: i64, default: Duration) -> Duration {
    // Runtimes before NRI v0.7 send no timeouts; keep the defaults rather than zero.
    match u64::try_from(ms) {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => default,
    }
}
