//! Plugins without an async runtime: the stub's protocol served on the
//! calling thread with blocking socket calls.
//!
//! A [`blocking::Plugin`](Plugin) has the same handlers as the async
//! [`Plugin`](crate::Plugin), as plain methods taking `&mut self`, and a
//! [`blocking::Stub`](Stub) runs it: connect, register, configure,
//! synchronize, then one request after the other until the runtime shuts the
//! plugin down or goes away. It speaks the same protocol to the same
//! runtimes, with the same rules for the plugin's name, index and
//! connection, and the same subscription checks.
//!
//! What it leaves out, to stay small: tokio, logging, trace contexts, a
//! plugin-side request timeout, a failure policy, and requests of the plugin's
//! own (`UpdateContainers` outside a handler's reply). A plugin with one
//! handler built on it is less than half the size of the same plugin on the
//! async stub, and an idle one has about a fifth less resident memory (half
//! the private memory: one thread, a small heap). The events a plugin handles
//! are a constant ([`Plugin::EVENTS`]), so the code for the requests of the
//! others is not compiled into it. Use the async stub for anything
//! that needs what this one leaves out.
//!
//! ```no_run
//! use nri_stub::api::{Container, ContainerAdjustment, Event, EventMask, PodSandbox};
//! use nri_stub::blocking::{Plugin, Stub};
//! use nri_stub::{CreateContainerResult, HandlerResult};
//!
//! struct Annotator;
//!
//! impl Plugin for Annotator {
//!     const EVENTS: EventMask = EventMask::from_events(&[Event::CreateContainer]);
//!
//!     fn create_container(&mut self, _: &PodSandbox, _: &Container)
//!         -> HandlerResult<CreateContainerResult> {
//!         let mut adjust = ContainerAdjustment::default();
//!         adjust.add_annotation("example.com/seen", "true");
//!         Ok(adjust.into())
//!     }
//! }
//!
//! fn main() -> Result<(), nri_stub::Error> {
//!     Stub::builder(Annotator).name("annotator").index("10").build()?.run()
//! }
//! ```

mod serve;
mod wire;

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nri_api::service::{runtime as runtime_method, RUNTIME_SERVICE};
use nri_api::{
    Container, ContainerUpdate, EventMask, LinuxResources, PodSandbox, RegisterPluginRequest,
    ValidateContainerAdjustmentRequest,
};
use nri_mux::{PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::frame::{MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};
use nri_ttrpc::proto::{Request, Response};
use prost::Message as _;

use crate::connect::stream_from_env;
use crate::identity::{Identity, IdentitySources};
use crate::version::PLUGIN_NRI_VERSION;
use crate::{
    ConfigureInfo, CreateContainerResult, Error, HandlerResult, DEFAULT_REGISTRATION_TIMEOUT,
};

use serve::{Control, Session};
use wire::{timed_out, Wire, WireError};

/// An NRI plugin served by the blocking [`Stub`]: the handlers of the async
/// [`Plugin`](crate::Plugin), as plain methods.
///
/// [`EVENTS`](Plugin::EVENTS) names the events the plugin handles; every
/// handler has a default that does nothing and succeeds. A handler error
/// fails the request: the runtime receives code `Unknown` and the error's
/// text (for [`validate_container_adjustment`](Plugin::validate_container_adjustment),
/// the adjustment is rejected with the text as reason). A handler that
/// panics answers with code `Internal`, the panic's message and location.
///
/// # Example
///
/// ```
/// use nri_stub::api::{Container, ContainerUpdate, Event, EventMask, PodSandbox};
/// use nri_stub::blocking::Plugin;
/// use nri_stub::HandlerResult;
///
/// #[derive(Default)]
/// struct Counter {
///     started: usize,
/// }
///
/// impl Plugin for Counter {
///     const EVENTS: EventMask = EventMask::from_events(&[Event::StartContainer]);
///
///     fn start_container(&mut self, _: &PodSandbox, _: &Container) -> HandlerResult<()> {
///         self.started += 1;
///         Ok(())
///     }
/// }
///
/// let mut counter = Counter::default();
/// counter.start_container(&PodSandbox::default(), &Container::default()).unwrap();
/// assert_eq!(counter.started, 1);
/// assert!(Counter::EVENTS.is_set(Event::StartContainer));
/// ```
pub trait Plugin {
    /// The events this plugin handles. The stub refuses to start a plugin
    /// whose mask is empty; `configure`, `synchronize` and `shutdown` are
    /// requests every plugin receives and are not part of it.
    ///
    /// A constant, so that the code for the requests of the other events
    /// (their decoders, and the encoders of their replies) is left out of
    /// the plugin: the runtime never sends them to it.
    const EVENTS: EventMask;

    /// The runtime configures the plugin; this is the first request after
    /// registration. Returns the events to subscribe to: an empty mask means
    /// all of [`EVENTS`](Plugin::EVENTS). As with the async stub, events
    /// outside [`EVENTS`](Plugin::EVENTS), or that the runtime's NRI version
    /// cannot deliver, fail the configuration.
    fn configure(&mut self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        let _ = info;
        Ok(EventMask::default())
    }

    /// The runtime's existing pods and containers, once after `configure`
    /// (collected first when the runtime sends them in parts). Returns
    /// updates to apply to existing containers.
    fn synchronize(
        &mut self,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (pods, containers);
        Ok(Vec::new())
    }

    /// The runtime asks the plugin to shut down; [`Stub::run`] then returns
    /// `Ok(())`.
    fn shutdown(&mut self) {}

    /// A pod sandbox is being started.
    fn run_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = pod;
        Ok(())
    }

    /// The resources of a pod sandbox are being updated.
    fn update_pod_sandbox(
        &mut self,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        let _ = (pod, overhead, resources);
        Ok(())
    }

    /// The resources of a pod sandbox were updated.
    fn post_update_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = pod;
        Ok(())
    }

    /// A pod sandbox is being stopped.
    fn stop_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = pod;
        Ok(())
    }

    /// A pod sandbox was removed.
    fn remove_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = pod;
        Ok(())
    }

    /// A container is being created: return the changes to make to it, and
    /// updates or evictions of other containers.
    fn create_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        let _ = (pod, ctr);
        Ok(CreateContainerResult::default())
    }

    /// A container was created.
    fn post_create_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        let _ = (pod, ctr);
        Ok(())
    }

    /// A container is being started.
    fn start_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        let _ = (pod, ctr);
        Ok(())
    }

    /// A container was started.
    fn post_start_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        let _ = (pod, ctr);
        Ok(())
    }

    /// A container's resources are being updated to `resources`: return
    /// updates of this or other containers.
    fn update_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (pod, ctr, resources);
        Ok(Vec::new())
    }

    /// A container's resources were updated.
    fn post_update_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        let _ = (pod, ctr);
        Ok(())
    }

    /// A container is being stopped: return updates of other containers.
    fn stop_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (pod, ctr);
        Ok(Vec::new())
    }

    /// A container was removed.
    fn remove_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        let _ = (pod, ctr);
        Ok(())
    }

    /// The runtime asks whether the merged adjustment of a new container may
    /// stand; an error rejects it with the error's text as reason.
    fn validate_container_adjustment(
        &mut self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        let _ = req;
        Ok(())
    }
}

/// After Shutdown, or after a failed Configure, how long a run waits for the
/// runtime to close the connection, so the last reply gets out, before
/// closing it itself.
const LINGER: Duration = Duration::from_secs(1);

/// The stream id of the registration call, the plugin's only call.
const REGISTER_STREAM: u32 = 1;

/// Options of a [`Stub`]; made with [`Stub::builder`].
#[derive(Debug)]
pub struct StubBuilder<P> {
    plugin: P,
    name: Option<String>,
    index: Option<String>,
    socket_path: Option<PathBuf>,
    connection: Option<UnixStream>,
    registration_timeout: Duration,
}

impl<P: Plugin> StubBuilder<P> {
    /// The plugin's base name (the runtime's `NRI_PLUGIN_NAME` wins; default:
    /// from the program name, `NN-name`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The plugin's two-digit index (the runtime's `NRI_PLUGIN_IDX` wins).
    pub fn index(mut self, index: impl Into<String>) -> Self {
        self.index = Some(index.into());
        self
    }

    /// The runtime's socket (default `/var/run/nri/nri.sock`), dialled unless
    /// a connection was given or handed over in `NRI_PLUGIN_SOCKET`.
    pub fn socket_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket_path = Some(path.into());
        self
    }

    /// A connection to the runtime made by the caller, used by the first run.
    pub fn connection(mut self, stream: UnixStream) -> Self {
        self.connection = Some(stream);
        self
    }

    /// How long registration may take until the runtime's reply (default 5 s).
    pub fn registration_timeout(mut self, timeout: Duration) -> Self {
        self.registration_timeout = timeout;
        self
    }

    /// Checks the options and makes the stub; nothing is connected yet.
    ///
    /// Fails with [`Error::NoHandlers`] when [`Plugin::EVENTS`] is empty,
    /// and with [`Error::Identity`] when the name or index is invalid or
    /// cannot be worked out.
    pub fn build(self) -> Result<Stub<P>, Error> {
        if P::EVENTS.is_empty() {
            return Err(Error::NoHandlers {
                plugin: std::any::type_name::<P>(),
            });
        }
        let identity = IdentitySources::from_process(self.name, self.index).resolve()?;
        let env_socket = match self.connection {
            Some(_) => None,
            None => std::env::var(nri_api::plugin::PLUGIN_SOCKET_ENV)
                .ok()
                .filter(|value| !value.is_empty()),
        };
        Ok(Stub {
            plugin: self.plugin,
            identity,
            given: self.connection.map(Some),
            env_socket: env_socket.map(Some),
            socket_path: self
                .socket_path
                .unwrap_or_else(|| PathBuf::from(nri_api::plugin::DEFAULT_SOCKET_PATH)),
            registration_timeout: self.registration_timeout,
        })
    }
}

/// Connects a blocking [`Plugin`] to the runtime, registers it and serves its
/// requests on the calling thread.
///
/// # Example
///
/// ```no_run
/// use nri_stub::api::{Container, Event, EventMask, PodSandbox};
/// use nri_stub::blocking::{Plugin, Stub};
///
/// struct Logger;
///
/// impl Plugin for Logger {
///     const EVENTS: EventMask = EventMask::from_events(&[Event::StartContainer]);
///
///     fn start_container(&mut self, pod: &PodSandbox, ctr: &Container)
///         -> nri_stub::HandlerResult<()> {
///         println!("container {} of pod {} started", ctr.name, pod.name);
///         Ok(())
///     }
/// }
///
/// fn main() -> Result<(), nri_stub::Error> {
///     let mut stub = Stub::builder(Logger).name("logger").index("10").build()?;
///     // Reconnect whenever the runtime goes away; stop on Shutdown or other errors.
///     loop {
///         match stub.run() {
///             Err(nri_stub::Error::Disconnected) => {
///                 std::thread::sleep(std::time::Duration::from_secs(1))
///             }
///             other => return other,
///         }
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Stub<P> {
    plugin: P,
    identity: Identity,
    /// `Some(Some(_))`: a given connection not used yet; `Some(None)`: used.
    given: Option<Option<UnixStream>>,
    /// `NRI_PLUGIN_SOCKET` at build time, until a run takes it.
    env_socket: Option<Option<String>>,
    socket_path: PathBuf,
    registration_timeout: Duration,
}

impl<P: Plugin> Stub<P> {
    /// Starts building a stub for `plugin`.
    pub fn builder(plugin: P) -> StubBuilder<P> {
        StubBuilder {
            plugin,
            name: None,
            index: None,
            socket_path: None,
            connection: None,
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
        }
    }

    /// The plugin's full name, `<index>-<name>`.
    pub fn name(&self) -> String {
        self.identity.full_name()
    }

    /// The plugin.
    pub fn plugin(&self) -> &P {
        &self.plugin
    }

    /// The plugin, to change it between runs.
    pub fn plugin_mut(&mut self) -> &mut P {
        &mut self.plugin
    }

    /// Connects, registers, waits to be configured, then serves the runtime's
    /// requests until it shuts the plugin down or goes away.
    ///
    /// Returns
    /// * `Ok(())` after the runtime asked the plugin to shut down;
    /// * [`Error::Disconnected`] when the runtime closed the connection: run
    ///   again to reconnect;
    /// * [`Error::Protocol`] when the runtime sent what no NRI runtime sends;
    /// * the error of a failed start: connection ([`Error::Connect`], ...),
    ///   registration ([`Error::Register`]), or configuration
    ///   ([`Error::Configure`], [`Error::UnhandledEvents`],
    ///   [`Error::EventsNotSupported`], [`Error::HandlerPanicked`]).
    pub fn run(&mut self) -> Result<(), Error> {
        let stream = self.connect()?;
        let mut wire = Wire::new(stream).map_err(|_| Error::Disconnected)?;
        let mut session = Session::new(&mut self.plugin, &self.identity);

        let request = RegisterPluginRequest {
            plugin_name: self.identity.name.clone(),
            plugin_idx: self.identity.index.clone(),
            nri_version: PLUGIN_NRI_VERSION.to_string(),
        };
        let envelope = Request {
            service: RUNTIME_SERVICE.to_string(),
            method: runtime_method::REGISTER_PLUGIN.to_string(),
            payload: request.encode_to_vec(),
            timeout_nano: i64::try_from(self.registration_timeout.as_nanos()).unwrap_or(i64::MAX),
            metadata: Vec::new(),
        };
        wire.send(
            RUNTIME_SERVICE_CONN,
            REGISTER_STREAM,
            MESSAGE_TYPE_REQUEST,
            &envelope.encode_to_vec(),
        )
        .map_err(|_| Error::Disconnected)?;

        // Registration has a deadline; what follows it has none, as in the Go stub.
        let mut registering = Some(Instant::now() + self.registration_timeout);
        loop {
            if let Some(deadline) = registering {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Register(nri_ttrpc::Error::Timeout));
                }
                wire.set_read_timeout(Some(left))
                    .map_err(|_| Error::Disconnected)?;
            }
            let message = match wire.next() {
                Ok(Some(message)) => message,
                Ok(None) => return Err(Error::Disconnected),
                Err(WireError::Io(err)) if registering.is_some() && timed_out(&err) => {
                    return Err(Error::Register(nri_ttrpc::Error::Timeout))
                }
                Err(WireError::Io(_)) => return Err(Error::Disconnected),
                Err(WireError::Protocol(text)) => return Err(Error::Protocol(text)),
            };
            match (message.conn, message.header.kind) {
                (PLUGIN_SERVICE_CONN, MESSAGE_TYPE_REQUEST) => {
                    let (reply, control) = session.serve(&message.body);
                    wire.send(
                        PLUGIN_SERVICE_CONN,
                        message.header.stream_id,
                        MESSAGE_TYPE_RESPONSE,
                        &reply,
                    )
                    .map_err(|_| Error::Disconnected)?;
                    match control {
                        Control::Continue => {}
                        Control::Shutdown => {
                            linger(&mut wire);
                            return Ok(());
                        }
                        Control::Failed(err) => {
                            // Let the error reply reach the runtime, which then
                            // drops the plugin.
                            linger(&mut wire);
                            return Err(err);
                        }
                    }
                }
                (RUNTIME_SERVICE_CONN, MESSAGE_TYPE_RESPONSE)
                    if message.header.stream_id == REGISTER_STREAM && registering.is_some() =>
                {
                    let response = Response::decode(message.body.as_slice()).map_err(|err| {
                        Error::Protocol(format!("undecodable registration reply: {err}"))
                    })?;
                    if let Some(status) = response.status.filter(|status| status.code != 0) {
                        return Err(Error::Register(nri_ttrpc::Error::Status(status.into())));
                    }
                    registering = None;
                    wire.set_read_timeout(None)
                        .map_err(|_| Error::Disconnected)?;
                }
                // Nothing else is addressed to a plugin: no other call of its
                // own is in flight, and a runtime never streams.
                _ => {}
            }
        }
    }

    /// The connection of one run: the given one, else the one handed over
    /// in `NRI_PLUGIN_SOCKET`, else a dial of the socket path. A given or
    /// handed-over connection serves one run.
    fn connect(&mut self) -> Result<UnixStream, Error> {
        if let Some(slot) = self.given.as_mut() {
            return slot.take().ok_or(Error::ConnectionUsed);
        }
        match self.env_socket.as_mut().map(Option::take) {
            Some(Some(value)) => stream_from_env(&value),
            Some(None) => Err(Error::ConnectionUsed),
            None => UnixStream::connect(&self.socket_path).map_err(|source| Error::Connect {
                socket: self.socket_path.clone(),
                source,
            }),
        }
    }
}

/// Reads and drops what the runtime still sends until it closes the
/// connection, for at most [`LINGER`].
fn linger(wire: &mut Wire) {
    let until = Instant::now() + LINGER;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || wire.set_read_timeout(Some(left)).is_err() {
            return;
        }
        if !matches!(wire.next(), Ok(Some(_))) {
            return;
        }
    }
}
