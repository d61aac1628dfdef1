//! Errors of the stub, and the error type of plugin handlers.

use nri_api::EventMask;

/// The error a plugin handler returns: any error type, boxed
/// ([`nri_api::BoxError`]).
///
/// Handlers can use `?` on most errors, or build one from text with
/// `Err("reason".into())`.
pub use nri_api::BoxError;

/// Result of a plugin handler: its error is any error, boxed ([`BoxError`]).
///
/// ```
/// fn check(name: &str) -> nri_stub::HandlerResult<()> {
///     if name.is_empty() {
///         return Err("a container needs a name".into());
///     }
///     Ok(())
/// }
/// assert!(check("").is_err());
/// ```
pub type HandlerResult<T> = std::result::Result<T, BoxError>;

/// Result of a stub operation, with the stub's [`Error`] by default.
///
/// ```no_run
/// # #[derive(Default)] struct MyPlugin;
/// # #[nri_stub::plugin] impl nri_stub::Plugin for MyPlugin {
/// #   async fn run_pod_sandbox(&self, _: &nri_stub::Context, _: &nri_stub::api::PodSandbox) -> nri_stub::HandlerResult<()> { Ok(()) }
/// # }
/// async fn serve() -> nri_stub::Result<()> {
///     let stub = nri_stub::Stub::builder(MyPlugin).name("mine").index("10").build()?;
///     stub.run().await
/// }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the stub could not be built, could not run, or stopped running.
///
/// Its text (`Display`) says what failed and what to check. Its `Debug` form is
/// that text followed by the chain of causes, so that a `main` returning
/// `Result<(), nri_stub::Error>` prints something readable too.
///
/// ```
/// use std::path::PathBuf;
///
/// let err = nri_stub::Error::Connect {
///     socket: PathBuf::from("/var/run/nri/nri.sock"),
///     source: std::io::Error::from(std::io::ErrorKind::NotFound),
/// };
/// let text = err.to_string();
/// assert!(text.starts_with("cannot connect to the NRI socket /var/run/nri/nri.sock: "));
/// assert!(text.contains("is the runtime running, with NRI enabled"));
/// assert_eq!(format!("{err:?}"), text);
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin handles no NRI event ([`Plugin::implemented_events`](crate::Plugin::implemented_events)
    /// is empty). Usually `#[nri_stub::plugin]` is missing on the `impl Plugin` block.
    #[error(
        "plugin {plugin} does not implement any NRI request handlers: \
         is `#[nri_stub::plugin]` missing on its `impl Plugin` block?"
    )]
    NoHandlers {
        /// Type name of the plugin.
        plugin: &'static str,
    },

    /// The plugin's name or index is invalid, or could not be derived from the program name.
    #[error(
        "{0} (set the name and the two-digit index with StubBuilder::name and ::index, \
         or name the program NN-name, e.g. 10-my-plugin)"
    )]
    Identity(#[source] nri_api::plugin::PluginNameError),

    /// `NRI_PLUGIN_SOCKET` does not hold a file descriptor number.
    #[error(
        "invalid socket in environment (NRI_PLUGIN_SOCKET={value:?}): {reason} \
         (it must be the number of a socket descriptor a runtime handed over; unset it to \
         connect by socket path)"
    )]
    InvalidSocketEnv {
        /// The value of the variable.
        value: String,
        /// Why it was refused.
        reason: String,
    },

    /// The file descriptor named by `NRI_PLUGIN_SOCKET` is not a usable stream socket.
    #[error(
        "invalid socket ({fd}) in environment: {source} (NRI_PLUGIN_SOCKET is set by a runtime \
         that launched the plugin; unset it to connect by socket path)"
    )]
    InvalidSocketFd {
        /// The descriptor number.
        fd: i32,
        /// Why it was refused.
        #[source]
        source: std::io::Error,
    },

    /// Connecting to the runtime's socket failed.
    #[error("cannot connect to the NRI socket {}: {source}{}", socket.display(), connect_hint(source))]
    Connect {
        /// The socket the stub dialled.
        socket: std::path::PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },

    /// The stub was given a connection (with `connection()` or by the runtime through
    /// `NRI_PLUGIN_SOCKET`) and it was used by an earlier run; such a stub cannot
    /// connect again.
    #[error("the connection of this stub was used by an earlier run and cannot be reused")]
    ConnectionUsed,

    /// [`Stub::run`](crate::Stub::run) was called while another run of the same stub
    /// is in progress.
    #[error("stub already started")]
    AlreadyRunning,

    /// The runtime refused or did not answer the registration.
    #[error(
        "failed to register with NRI/Runtime: {0} (the runtime refused the plugin's name or \
         index, or did not answer within the registration timeout)"
    )]
    Register(#[source] nri_ttrpc::Error),

    /// The plugin's `configure` handler failed; the runtime was told so.
    #[error("plugin configuration failed: {0}")]
    Configure(#[source] BoxError),

    /// The plugin subscribed to events it has no handler for.
    #[error("internal error: unhandled events {} (0x{})", pretty(*.events), hex(*.events))]
    UnhandledEvents {
        /// The events without a handler.
        events: EventMask,
    },

    /// The runtime's NRI version is too old to deliver events the plugin subscribed to.
    #[error(
        "runtime {runtime} speaks NRI {nri_version}, which cannot deliver the events {} (0x{}) \
         (they need NRI v0.10.0 or newer); leave them out of the mask returned by configure()",
        pretty(*.events), hex(*.events)
    )]
    EventsNotSupported {
        /// The events the runtime cannot deliver.
        events: EventMask,
        /// Runtime name and version, e.g. `containerd v1.7.20`.
        runtime: String,
        /// The runtime's NRI version, e.g. `v0.6.1 (inferred)`.
        nri_version: String,
    },

    /// The runtime closed the connection, or the connection failed. The stub can be
    /// run again to reconnect (unless its connection was handed to it, see
    /// [`Error::ConnectionUsed`]).
    #[error("connection to the runtime was lost (it stopped, restarted or dropped the plugin)")]
    Disconnected,

    /// There is no connection to the runtime (the stub is not running or not yet
    /// registered).
    #[error("not connected to the runtime: the stub is not running, or not registered yet")]
    NotConnected,

    /// A handler of the plugin panicked before the plugin was configured (in
    /// `configure` or before it); the runtime was told the message and location.
    #[error("{0}")]
    HandlerPanicked(#[source] crate::HandlerPanic),

    /// An unsolicited UpdateContainers call failed.
    #[error("failed to update containers: {0}")]
    UpdateContainers(#[source] nri_ttrpc::Error),

    /// The runtime sent what no NRI runtime sends (a frame or message over the
    /// size limits, an undecodable reply); the [`blocking`](crate::blocking)
    /// stub then closes the connection.
    #[error("protocol error from the runtime: {0}")]
    Protocol(String),
}

/// Shows the error's text, then its causes, one a line; `{:#?}` gives the
/// structure instead.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            return self.fmt_structure(f);
        }
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        // Causes whose text is already part of ours are not repeated.
        let mut shown = self.to_string();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !shown.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
                shown.push_str(&text);
            }
            source = cause.source();
        }
        Ok(())
    }
}

impl Error {
    fn fmt_structure(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoHandlers { plugin } => f
                .debug_struct("NoHandlers")
                .field("plugin", plugin)
                .finish(),
            Error::Identity(e) => f.debug_tuple("Identity").field(e).finish(),
            Error::InvalidSocketEnv { value, reason } => f
                .debug_struct("InvalidSocketEnv")
                .field("value", value)
                .field("reason", reason)
                .finish(),
            Error::InvalidSocketFd { fd, source } => f
                .debug_struct("InvalidSocketFd")
                .field("fd", fd)
                .field("source", source)
                .finish(),
            Error::Connect { socket, source } => f
                .debug_struct("Connect")
                .field("socket", socket)
                .field("source", source)
                .finish(),
            Error::ConnectionUsed => f.write_str("ConnectionUsed"),
            Error::AlreadyRunning => f.write_str("AlreadyRunning"),
            Error::Register(e) => f.debug_tuple("Register").field(e).finish(),
            Error::Configure(e) => f.debug_tuple("Configure").field(e).finish(),
            Error::UnhandledEvents { events } => f
                .debug_struct("UnhandledEvents")
                .field("events", events)
                .finish(),
            Error::EventsNotSupported {
                events,
                runtime,
                nri_version,
            } => f
                .debug_struct("EventsNotSupported")
                .field("events", events)
                .field("runtime", runtime)
                .field("nri_version", nri_version)
                .finish(),
            Error::Disconnected => f.write_str("Disconnected"),
            Error::NotConnected => f.write_str("NotConnected"),
            Error::HandlerPanicked(p) => f.debug_tuple("HandlerPanicked").field(p).finish(),
            Error::UpdateContainers(e) => f.debug_tuple("UpdateContainers").field(e).finish(),
            Error::Protocol(text) => f.debug_tuple("Protocol").field(text).finish(),
        }
    }
}

/// What to check when dialling the runtime's socket failed.
fn connect_hint(err: &std::io::Error) -> &'static str {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::NotFound => {
            "; is the runtime running, with NRI enabled (containerd: \
             [plugins.\"io.containerd.nri.v1.nri\"] disable = false), and is this the socket \
             it listens on?"
        }
        ErrorKind::ConnectionRefused => {
            "; nothing listens on it: is the runtime running, with NRI enabled?"
        }
        ErrorKind::PermissionDenied => {
            "; the plugin may not use the socket: run it as a user that may (usually root)"
        }
        _ => "; check that the runtime is running with NRI enabled and listens on this socket",
    }
}

fn pretty(events: EventMask) -> String {
    crate::events::pretty(events)
}

fn hex(events: EventMask) -> String {
    crate::events::hex(events)
}

/// Turns a handler error into the status the runtime receives. A handler that fails with
/// a [`Status`](nri_ttrpc::Status) answers with that status, its code kept, as Go's ttRPC
/// answers with a status error's own code; any other error becomes code `Unknown` and the
/// error's text, as Go's ttRPC does for plain errors.
pub(crate) fn handler_status(err: BoxError) -> nri_ttrpc::Status {
    match err.downcast::<nri_ttrpc::Status>() {
        Ok(status) => *status,
        Err(err) => nri_ttrpc::Status::unknown(err.to_string()),
    }
}

#[cfg(test)]
mod handler_status_tests {
    use super::handler_status;
    use nri_ttrpc::{Code, Status};

    #[test]
    fn a_status_keeps_its_code_and_other_errors_are_unknown() {
        let st = handler_status(Box::new(Status::new(Code::DeadlineExceeded, "too slow")));
        assert_eq!(st, Status::new(Code::DeadlineExceeded, "too slow"));
        let st = handler_status("plain".into());
        assert_eq!(st, Status::unknown("plain"));
    }
}
