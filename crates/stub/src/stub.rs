//! [`Stub`]: connects a [`Plugin`] to the runtime and serves it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_api::service::{runtime as runtime_method, RUNTIME_SERVICE};
use nri_api::{Empty, EventMask, RegisterPluginRequest};
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{Client, Server};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use crate::connect::Connector;
use crate::identity::Identity;
use crate::server::plugin_server;
use crate::session::{ConfigureExtras, Session};
use crate::version::PLUGIN_NRI_VERSION;
use crate::{Error, Plugin, RuntimeHandle, StubBuilder};

/// Callback run when the connection to the runtime is lost.
pub(crate) type OnClose = Arc<dyn Fn() + Send + Sync>;

/// After Shutdown, or after a failed Configure, how long a run waits for the runtime
/// to close the connection, so the last reply gets out, before closing it itself.
const LINGER: Duration = Duration::from_secs(1);

/// Everything a session needs, handed to the type-erased server factory.
pub(crate) struct SessionParts {
    pub(crate) identity: Arc<Identity>,
    pub(crate) implemented: EventMask,
    pub(crate) handle: RuntimeHandle,
    pub(crate) extras: ConfigureExtras,
    pub(crate) configured: oneshot::Sender<Result<(), Error>>,
    pub(crate) shutdown: Arc<Notify>,
}

type ServerFactory = Box<dyn Fn(SessionParts) -> Server + Send + Sync>;

/// Connects a plugin to the runtime, registers it and serves its requests.
///
/// Made with [`Stub::builder`]. [`run`](Stub::run) takes `&self`: the stub can run again
/// after a run ended (for example to reconnect after the runtime restarted), and can be
/// shared (`Arc<Stub>`) to reach [`runtime_handle`](Stub::runtime_handle) from
/// elsewhere while it runs.
///
/// # Example
///
/// ```no_run
/// use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
/// use nri_stub::{Context, CreateContainerResult, Plugin, Stub};
///
/// #[derive(Default)]
/// struct Annotator;
///
/// #[nri_stub::plugin]
/// impl Plugin for Annotator {
///     async fn create_container(&self, _: &Context, _: &PodSandbox, _: &Container)
///         -> nri_stub::HandlerResult<CreateContainerResult> {
///         let mut adjust = ContainerAdjustment::default();
///         adjust.annotations.insert("example.com/seen".into(), "true".into());
///         Ok(adjust.into())
///     }
/// }
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), nri_stub::Error> {
///     let stub = Stub::builder(Annotator).name("annotator").index("10").build()?;
///     // Reconnect whenever the runtime goes away; stop on Shutdown or other errors.
///     loop {
///         match stub.run().await {
///             Err(nri_stub::Error::Disconnected) => {
///                 tokio::time::sleep(std::time::Duration::from_secs(1)).await
///             }
///             other => return other,
///         }
///     }
/// }
/// ```
pub struct Stub {
    identity: Arc<Identity>,
    implemented: EventMask,
    make_server: ServerFactory,
    connector: Connector,
    registration_timeout: Duration,
    on_close: Option<OnClose>,
    extras: ConfigureExtras,
    handle: RuntimeHandle,
    running: AtomicBool,
}

impl std::fmt::Debug for Stub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stub")
            .field("name", &self.identity.full_name())
            .field("implemented", &self.implemented)
            .field("connection", &self.connector.describe())
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Stub {
    /// Starts building a stub for `plugin`.
    pub fn builder<P: Plugin>(plugin: P) -> StubBuilder<P> {
        StubBuilder::new(plugin)
    }

    pub(crate) fn new<P: Plugin>(
        plugin: Arc<P>,
        identity: Identity,
        implemented: EventMask,
        connector: Connector,
        registration_timeout: Duration,
        on_close: Option<OnClose>,
        extras: ConfigureExtras,
    ) -> Self {
        let make_server: ServerFactory = Box::new(move |parts: SessionParts| {
            let session = Session::new(Arc::clone(&plugin), parts);
            plugin_server(Arc::new(session))
        });
        Stub {
            identity: Arc::new(identity),
            implemented,
            make_server,
            connector,
            registration_timeout,
            on_close,
            extras,
            handle: RuntimeHandle::default(),
            running: AtomicBool::new(false),
        }
    }

    /// The plugin's full name, `<index>-<name>`.
    pub fn name(&self) -> String {
        self.identity.full_name()
    }

    /// The plugin's base name.
    pub fn plugin_name(&self) -> &str {
        &self.identity.name
    }

    /// The plugin's two-digit index.
    pub fn plugin_index(&self) -> &str {
        &self.identity.index
    }

    /// The events the plugin has handlers for.
    pub fn implemented_events(&self) -> EventMask {
        self.implemented
    }

    /// The NRI version the stub reports to the runtime.
    pub fn plugin_nri_version(&self) -> &'static str {
        PLUGIN_NRI_VERSION
    }

    /// A handle for unsolicited requests to the runtime; it works while a run is
    /// registered (from the plugin's `configure` on) and follows reconnections.
    pub fn runtime_handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Connects, registers, waits to be configured, then serves the runtime's requests.
    ///
    /// Returns
    /// * `Ok(())` after the runtime asked the plugin to shut down;
    /// * [`Error::Disconnected`] when the runtime closed the connection (after calling
    ///   the `on_close` callback): run again to reconnect;
    /// * the error of a failed start: connection ([`Error::Connect`], ...),
    ///   registration ([`Error::Register`]), or configuration ([`Error::Configure`],
    ///   [`Error::UnhandledEvents`], [`Error::EventsNotSupported`]);
    /// * [`Error::AlreadyRunning`] if another run of this stub is in progress.
    ///
    /// Dropping the future stops the run and closes the connection.
    pub fn run(&self) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        // Behind a trait object the run's state machine is compiled once, here,
        // and not again in the plugin's crate that awaits it: 28 KB less text in
        // a static plugin, whose whole text stays resident.
        let run: Pin<Box<dyn Future<Output = Result<(), Error>> + Send + '_>> =
            Box::pin(self.run_session());
        run
    }

    async fn run_session(&self) -> Result<(), Error> {
        let _running = RunningGuard::acquire(&self.running)?;
        let name = self.identity.full_name();
        tracing::info!(plugin = %name, via = %self.connector.describe(), "connecting to the runtime");
        let trunk = self.connector.connect().await?;

        let mux = Mux::new(trunk, MuxOptions::default());
        let _close_mux = CloseMux(mux.clone());
        let plugin_conn = mux
            .open(PLUGIN_SERVICE_CONN)
            .map_err(|_| Error::Disconnected)?;
        let runtime_conn = mux
            .open(RUNTIME_SERVICE_CONN)
            .map_err(|_| Error::Disconnected)?;

        let (configured_tx, mut configured) = oneshot::channel();
        let shutdown = Arc::new(Notify::new());
        let server = Arc::new((self.make_server)(SessionParts {
            identity: Arc::clone(&self.identity),
            implemented: self.implemented,
            handle: self.handle.clone(),
            extras: self.extras,
            configured: configured_tx,
            shutdown: Arc::clone(&shutdown),
        }));
        let mut serving = AbortOnDrop(tokio::spawn(server.serve(plugin_conn)));

        let client = Client::new(runtime_conn);
        let _forget_client = ClearHandle(&self.handle);
        self.handle.set(Some(client.clone()));

        tracing::info!(plugin = %name, nri_version = PLUGIN_NRI_VERSION, "registering plugin");
        let request = RegisterPluginRequest {
            plugin_name: self.identity.name.clone(),
            plugin_idx: self.identity.index.clone(),
            nri_version: PLUGIN_NRI_VERSION.to_string(),
        };
        let registered = client
            .call_msg::<_, Empty>(
                RUNTIME_SERVICE,
                runtime_method::REGISTER_PLUGIN,
                &request,
                Some(self.registration_timeout),
            )
            .await;
        if let Err(err) = registered {
            log_mux_error(&mux, &name);
            // A runtime may send Configure before its registration reply, and
            // drop the plugin as soon as Configure fails (NRI v0.9 does), so
            // the reply never comes. The Configure failure is then the cause.
            return Err(match configured.try_recv() {
                Ok(Err(cause)) if !matches!(cause, Error::Disconnected) => cause,
                _ => Error::Register(err),
            });
        }

        // The runtime configures the plugin next; no deadline, as in the Go stub.
        let outcome = tokio::select! {
            biased;
            outcome = &mut configured => outcome.unwrap_or(Err(Error::Disconnected)),
            _ = mux.closed() => Err(Error::Disconnected),
        };
        match outcome {
            Ok(()) => tracing::info!(plugin = %name, "plugin started"),
            Err(Error::Disconnected) => return Err(self.disconnected(&name, &mux)),
            Err(err) => {
                // Let the error reply reach the runtime, which then drops the plugin.
                let _ = tokio::time::timeout(LINGER, mux.closed()).await;
                return Err(err);
            }
        }

        tokio::select! {
            biased;
            _ = shutdown.notified() => {
                tracing::info!(plugin = %name, "plugin shut down by the runtime");
                let _ = tokio::time::timeout(LINGER, mux.closed()).await;
                Ok(())
            }
            _ = mux.closed() => Err(self.disconnected(&name, &mux)),
            _ = client.closed() => Err(self.disconnected(&name, &mux)),
            _ = &mut serving.0 => Err(self.disconnected(&name, &mux)),
        }
    }

    fn disconnected(&self, name: &str, mux: &Mux) -> Error {
        log_mux_error(mux, name);
        tracing::info!(plugin = %name, "connection to the runtime lost");
        self.handle.set(None);
        if let Some(on_close) = &self.on_close {
            on_close();
        }
        Error::Disconnected
    }
}

/// Logs why the connection's multiplexer gave up, if it did (a malformed or
/// oversized frame from the runtime), in the mux's words, as Go's stub does.
fn log_mux_error(mux: &Mux, name: &str) {
    if let Some(err) = mux.error() {
        tracing::error!(plugin = %name, error = %err, "error receiving message");
    }
}

/// Marks the stub as running; refuses a second concurrent run.
struct RunningGuard<'a>(&'a AtomicBool);

impl<'a> RunningGuard<'a> {
    fn acquire(flag: &'a AtomicBool) -> Result<Self, Error> {
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| Error::AlreadyRunning)?;
        Ok(RunningGuard(flag))
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Closes the mux (and with it the connection) when a run ends in any way.
struct CloseMux(Mux);

impl Drop for CloseMux {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Detaches the runtime handle from a run's client when the run ends.
struct ClearHandle<'a>(&'a RuntimeHandle);

impl Drop for ClearHandle<'_> {
    fn drop(&mut self) {
        self.0.set(None);
    }
}

/// Stops the server task when a run ends.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
