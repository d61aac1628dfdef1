//! Errors of the adaptation: what its entry points, plugin start-up and
//! plugin calls fail with. Texts follow the reference implementation.

use std::io;
use std::path::PathBuf;

use nri_api::gofmt::quote;
use nri_api::PluginNameError;

use crate::error::MergeError;

/// A boxed error, as returned by runtime hooks and builtin plugins.
pub use nri_api::BoxError;

/// Why one call to one plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The ttRPC call failed: the plugin answered with an error status, or
    /// the connection broke, or the request timed out.
    #[error(transparent)]
    Rpc(#[from] nri_ttrpc::Error),
    /// A builtin plugin's handler returned an error.
    #[error("{0}")]
    Builtin(BoxError),
    /// A builtin plugin's handler did not finish within the request timeout.
    #[error("context deadline exceeded")]
    Timeout,
}

impl PluginError {
    /// Whether the error means the plugin is unusable (connection closed,
    /// protocol error, our own deadline passing): such plugins are dropped
    /// and the call goes on without them. Other errors (an error status the
    /// plugin's handler returned, `DeadlineExceeded` included, as in the
    /// reference v0.12.5) fail the call and keep the plugin.
    pub fn is_fatal(&self) -> bool {
        match self {
            PluginError::Rpc(nri_ttrpc::Error::Status(_)) => false,
            PluginError::Rpc(nri_ttrpc::Error::Oversized { .. }) => false,
            PluginError::Rpc(_) => true,
            PluginError::Builtin(_) => false,
            PluginError::Timeout => true,
        }
    }

    /// Whether the plugin answered `Unimplemented` (an older plugin that does
    /// not know the method).
    pub fn is_unimplemented(&self) -> bool {
        matches!(self, PluginError::Rpc(e) if e.code() == nri_ttrpc::Code::Unimplemented)
    }
}

/// A plugin's registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// The plugin name breaks the naming rules.
    #[error("plugin registered with an invalid name: {0}")]
    InvalidName(#[source] PluginNameError),
    /// The plugin index is not two digits.
    #[error("plugin {} registered with an invalid index: {source}", quote(.name))]
    InvalidIndex {
        /// The name the plugin registered with.
        name: String,
        /// What is wrong with the index.
        #[source]
        source: PluginNameError,
    },
}

/// Why the plugin directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// Listing the directory failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A configuration file exists but could not be read.
    #[error("failed to read configuration for plugin {}: {source}", quote(.name))]
    Config {
        /// Full name `<idx>-<base>` of the plugin.
        name: String,
        /// The read error.
        #[source]
        source: io::Error,
    },
}

/// Errors of the adaptation's entry points and of plugin start-up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin's handler failed a lifecycle call; the text is the plugin's
    /// error unchanged, as the reference returns it.
    #[error("{source}")]
    Plugin {
        /// Full name of the plugin.
        plugin: String,
        /// What the plugin answered.
        #[source]
        source: PluginError,
    },
    /// The plugins' results conflict.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A validator rejected the merged adjustment of a new container.
    #[error("validator {} rejected container adjustment, reason: {reason}", quote(.plugin))]
    ValidationRejected {
        /// Full name of the (first, in plugin order) rejecting validator.
        plugin: String,
        /// Its reason, `unknown rejection reason` if it gave none.
        reason: String,
    },
    /// A validator could not be called.
    #[error("validator plugin {plugin} failed: {source}")]
    ValidatorFailed {
        /// Full name of the validator.
        plugin: String,
        /// The call's error.
        #[source]
        source: PluginError,
    },
    /// The plugin's connection closed before it registered.
    #[error("failed to register plugin, connection closed")]
    RegistrationClosed,
    /// The plugin did not register within the registration timeout.
    #[error("plugin registration timed out")]
    RegistrationTimeout,
    /// The plugin's registration was refused.
    #[error("failed to register plugin: {0}")]
    Registration(#[source] RegistrationError),
    /// The Configure call failed.
    #[error("failed to configure plugin: {0}")]
    Configure(#[source] PluginError),
    /// The plugin subscribed to events that do not exist (the extra bits).
    #[error("invalid plugin events: 0x{0:x}")]
    InvalidEvents(i32),
    /// The plugin answered a partial Synchronize as if it were the last one.
    #[error("plugin does not handle split sync requests")]
    SplitSyncUnsupported,
    /// The synchronization could not be split into small enough messages.
    #[error("failed to synchronize plugin with split messages")]
    SplitSyncFailed,
    /// The Synchronize call failed.
    #[error("{0}")]
    Synchronize(#[source] PluginError),
    /// The runtime's synchronization hook failed at start-up.
    #[error("failed to synchronize pre-installed NRI Plugins: {0}")]
    StartupSync(#[source] BoxError),
    /// The plugin directory could not be read.
    #[error("failed to discover plugins in {}: {source}", .dir.display())]
    Discover {
        /// The plugin directory.
        dir: PathBuf,
        /// What went wrong.
        #[source]
        source: DiscoverError,
    },
    /// The plugin file is a WebAssembly module, which this build cannot run.
    #[error("can't load WASM plugin {0}: no WASM support")]
    WasmUnsupported(String),
    /// The WebAssembly plugin could not be loaded.
    #[error("load WASM plugin {path}: {source}")]
    WasmLoad {
        /// The module file.
        path: String,
        /// What went wrong (an `nri_wasm::WasmError` with the `wasm`
        /// feature).
        #[source]
        source: BoxError,
    },
    /// The socket pair for a launched plugin could not be created.
    #[error("failed to create plugin connection for plugin {}: {source}", quote(.plugin))]
    SocketPair {
        /// Full name of the plugin.
        plugin: String,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// The runtime's end of a launched plugin's socket could not be set up.
    #[error("failed to set up local connection for plugin {}: {source}", quote(.plugin))]
    LocalConnection {
        /// Full name of the plugin.
        plugin: String,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// The plugin process could not be started.
    #[error("failed to launch plugin {}: {source}", quote(.plugin))]
    Launch {
        /// Full name of the plugin.
        plugin: String,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// A builtin plugin has an empty index or name.
    #[error("builtin plugin without index or name ({}, {})", quote(.index), quote(.name))]
    BuiltinIdentity {
        /// Its index.
        index: String,
        /// Its base name.
        name: String,
    },
    /// A builtin plugin could not be set up.
    #[error("failed to initialize builtin NRI plugin {}: {source}", quote(.name))]
    BuiltinInit {
        /// Its base name.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A builtin plugin failed Configure.
    #[error("failed to start builtin NRI plugin {}: {source}", quote(.name))]
    BuiltinStart {
        /// Its base name.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// The socket for external plugins could not be created.
    #[error("failed to create socket {}: {source}", quote(&.path.display().to_string()))]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// [`Adaptation::start`](crate::Adaptation::start) was called twice, or
    /// after [`Adaptation::stop`](crate::Adaptation::stop).
    #[error("NRI adaptation already started")]
    AlreadyStarted,
    /// A plugin did not handle a request and its policy
    /// ([`TimeoutPolicy::FailCall`](crate::TimeoutPolicy::FailCall), or the
    /// `fail_request` failure policy it announced) fails the call.
    #[error("plugin {plugin} failed to handle {event} request: {source}")]
    PluginFailed {
        /// Full name of the plugin.
        plugin: String,
        /// The request (ttRPC method name).
        event: String,
        /// What went wrong.
        #[source]
        source: PluginError,
    },
    /// A required plugin (see
    /// [`AdaptationBuilder::required_plugins`](crate::AdaptationBuilder::required_plugins))
    /// is not connected, so no container is created.
    #[error("required NRI plugin {} is not connected", quote(.0))]
    RequiredPluginMissing(String),
    /// The pod's required-plugins annotation is not a list of plugin names.
    #[error("invalid required plugins annotation {}: {reason}", quote(.value))]
    InvalidRequiredPlugins {
        /// The annotation's value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_follow_the_reference() {
        assert_eq!(
            Error::InvalidEvents(0x4000).to_string(),
            "invalid plugin events: 0x4000"
        );
        assert_eq!(
            Error::ValidationRejected {
                plugin: "10-v".into(),
                reason: "no".into()
            }
            .to_string(),
            r#"validator "10-v" rejected container adjustment, reason: no"#
        );
        assert_eq!(
            Error::ValidatorFailed {
                plugin: "10-v".into(),
                source: PluginError::Rpc(nri_ttrpc::Error::Closed)
            }
            .to_string(),
            "validator plugin 10-v failed: ttrpc: closed"
        );
        let name = nri_api::plugin::check_plugin_name("a,b").unwrap_err();
        assert_eq!(
            Error::Registration(RegistrationError::InvalidName(name)).to_string(),
            r#"failed to register plugin: plugin registered with an invalid name: invalid plugin name "a,b": contains invalid character ','"#
        );
        assert_eq!(
            Error::BuiltinIdentity {
                index: "".into(),
                name: "x".into()
            }
            .to_string(),
            r#"builtin plugin without index or name ("", "x")"#
        );
        assert_eq!(
            Error::Socket {
                path: "/x/y".into(),
                source: io::Error::other("boom")
            }
            .to_string(),
            r#"failed to create socket "/x/y": boom"#
        );
    }

    #[test]
    fn fatal_split() {
        use nri_ttrpc::{Code, Error as E, Status};
        assert!(PluginError::Rpc(E::Closed).is_fatal());
        assert!(PluginError::Rpc(E::Timeout).is_fatal());
        assert!(PluginError::Rpc(E::Protocol("x".into())).is_fatal());
        assert!(PluginError::Timeout.is_fatal());
        assert!(!PluginError::Rpc(E::Status(Status::new(Code::Unknown, "x"))).is_fatal());
        assert!(!PluginError::Builtin("x".into()).is_fatal());
        assert!(PluginError::Rpc(E::Status(Status::unimplemented("m"))).is_unimplemented());
    }
}
