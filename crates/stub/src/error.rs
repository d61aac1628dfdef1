//! Errors of the stub, and the error type of plugin handlers.

use nri_api::EventMask;

/// The error a plugin handler returns: any error type, boxed.
///
/// Handlers can use `?` on most errors, or build one from text with
/// `Err("reason".into())`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of a plugin handler ([`BoxError`] by default), or of a stub operation when
/// the error type is given (`Result<T, nri_stub::Error>`).
pub type Result<T, E = BoxError> = std::result::Result<T, E>;

/// Why the stub could not be built, could not run, or stopped running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin handles no NRI event ([`Plugin::implemented_events`](crate::Plugin::implemented_events)
    /// is empty). Usually `#[nri_stub::plugin]` is missing on the `impl Plugin` block.
    #[error("internal error: plugin {plugin} does not implement any NRI request handlers")]
    NoHandlers {
        /// Type name of the plugin.
        plugin: &'static str,
    },

    /// The plugin's name or index is invalid, or could not be derived from the program name.
    #[error("{0}")]
    Identity(#[source] nri_api::plugin::PluginNameError),

    /// `NRI_PLUGIN_SOCKET` does not hold a file descriptor number.
    #[error("invalid socket in environment (NRI_PLUGIN_SOCKET={value:?}): {reason}")]
    InvalidSocketEnv {
        /// The value of the variable.
        value: String,
        /// Why it was refused.
        reason: String,
    },

    /// The file descriptor named by `NRI_PLUGIN_SOCKET` is not a usable stream socket.
    #[error("invalid socket ({fd}) in environment: {source}")]
    InvalidSocketFd {
        /// The descriptor number.
        fd: i32,
        /// Why it was refused.
        #[source]
        source: std::io::Error,
    },

    /// Connecting to the runtime's socket failed.
    #[error("failed to connect to NRI service: {0}")]
    Connect(#[source] std::io::Error),

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
    #[error("failed to register with NRI/Runtime: {0}")]
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
    #[error("connection to the runtime was lost")]
    Disconnected,

    /// There is no connection to the runtime (the stub is not running or not yet
    /// registered).
    #[error("stub: no service/connection")]
    NotConnected,

    /// A handler of the plugin panicked before the plugin was configured (in
    /// `configure` or before it); the runtime was told the message and location.
    #[error("{0}")]
    HandlerPanicked(#[source] crate::HandlerPanic),

    /// An unsolicited UpdateContainers call failed.
    #[error("failed to update containers: {0}")]
    UpdateContainers(#[source] nri_ttrpc::Error),
}

fn pretty(events: EventMask) -> String {
    crate::events::pretty(events)
}

fn hex(events: EventMask) -> String {
    crate::events::hex(events)
}
