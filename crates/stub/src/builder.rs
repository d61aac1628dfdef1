//! [`StubBuilder`]: options of a [`Stub`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nri_api::FailurePolicy;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::connect::{BoxTrunk, Connector};
use crate::identity::IdentitySources;
use crate::session::ConfigureExtras;
use crate::stub::{OnClose, Stub};
use crate::{Error, Plugin, DEFAULT_REGISTRATION_TIMEOUT};

/// Options of a [`Stub`]; made by [`Stub::builder`].
///
/// ```no_run
/// # use nri_stub::{Plugin, Stub};
/// # #[derive(Default)] struct MyPlugin;
/// # #[nri_stub::plugin] impl Plugin for MyPlugin {
/// #   async fn run_pod_sandbox(&self, _: &nri_stub::Context, _: &nri_stub::api::PodSandbox) -> nri_stub::HandlerResult<()> { Ok(()) }
/// # }
/// # fn main() -> Result<(), nri_stub::Error> {
/// let stub = Stub::builder(MyPlugin::default())
///     .name("annotator")
///     .index("10")
///     .socket_path("/run/nri/nri.sock")
///     .registration_timeout(std::time::Duration::from_secs(10))
///     .on_close(|| eprintln!("runtime went away"))
///     .build()?;
/// assert_eq!(stub.name(), "10-annotator");
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct StubBuilder<P> {
    plugin: P,
    name: Option<String>,
    index: Option<String>,
    socket_path: Option<PathBuf>,
    connection: Option<BoxTrunk>,
    registration_timeout: Duration,
    on_close: Option<OnClose>,
    failure_policy: Option<FailurePolicy>,
    request_timeout: Option<Duration>,
}

impl<P: Plugin> StubBuilder<P> {
    pub(crate) fn new(plugin: P) -> Self {
        StubBuilder {
            plugin,
            name: None,
            index: None,
            socket_path: None,
            connection: None,
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
            on_close: None,
            failure_policy: None,
            request_timeout: None,
        }
    }

    /// The plugin's base name, unless a runtime that launched the plugin names it
    /// (`NRI_PLUGIN_NAME`), which wins. Default: taken from the program name
    /// (`NN-name`, or the whole program name when only the index is known).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The plugin's two-digit index, which orders plugins, unless a runtime that
    /// launched the plugin numbers it (`NRI_PLUGIN_IDX`), which wins (Go's
    /// `WithPluginIdx` fails instead). Default: the `NN` of a program named `NN-name`.
    pub fn index(mut self, index: impl Into<String>) -> Self {
        self.index = Some(index.into());
        self
    }

    /// The runtime's socket to connect to. Default `/var/run/nri/nri.sock`.
    pub fn socket_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket_path = Some(path.into());
        self
    }

    /// Uses this established connection to the runtime instead of connecting. The stub
    /// can then run once.
    pub fn connection<S>(mut self, stream: S) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        self.connection = Some(Box::new(stream));
        self
    }

    /// How long to wait for the runtime to accept the registration. Default 5 s.
    pub fn registration_timeout(mut self, timeout: Duration) -> Self {
        self.registration_timeout = timeout;
        self
    }

    /// Called each time a run ends because the connection to the runtime was lost
    /// (just before [`Stub::run`] returns [`Error::Disconnected`]).
    pub fn on_close(mut self, on_close: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_close = Some(Arc::new(on_close));
        self
    }

    /// Asks the runtime to apply this policy when the plugin times out or fails at
    /// transport level (sent in the Configure reply; runtimes without failure policies
    /// ignore it). Default: none, the runtime's historic behaviour.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = Some(policy);
        self
    }

    /// Asks the runtime for this request timeout instead of the one it offers
    /// (sent in the Configure reply). This is an nri-rs extension: an nri-rs
    /// runtime that allows it grants it up to a maximum it sets; other runtimes,
    /// including the Go reference, ignore it. Default: nothing asked.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Checks the options and makes the stub; nothing is connected yet.
    ///
    /// Fails with [`Error::NoHandlers`] when the plugin implements no event handler,
    /// and with [`Error::Identity`] when the name or index is invalid or cannot be
    /// worked out.
    pub fn build(self) -> Result<Stub, Error> {
        let implemented = self.plugin.implemented_events();
        if implemented.is_empty() {
            return Err(Error::NoHandlers {
                plugin: std::any::type_name::<P>(),
            });
        }
        let identity = IdentitySources::from_process(self.name, self.index).resolve()?;
        let given = self.connection.is_some();
        let connector = Connector::new(
            self.connection,
            if given { None } else { Connector::env_socket() },
            self.socket_path
                .unwrap_or_else(|| PathBuf::from(nri_api::plugin::DEFAULT_SOCKET_PATH)),
        );
        let stub = Stub::new(
            Arc::new(self.plugin),
            identity,
            implemented,
            connector,
            self.registration_timeout,
            self.on_close,
            ConfigureExtras {
                failure_policy: self.failure_policy,
                requested_timeout: self.request_timeout,
            },
        );
        tracing::info!(
            plugin = %stub.name(),
            events = %implemented.pretty_string(),
            "created plugin"
        );
        Ok(stub)
    }
}
