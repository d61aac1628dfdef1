//! Errors of the integration layer.

use std::path::PathBuf;

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `enable` and `disable` were both given and contradict each other.
    #[error("NRI configuration sets both `enable` and `disable` to contradicting values")]
    EnableConflict,
    /// The socket path does not fit a Unix socket address.
    #[error("NRI socket path {} is {len} bytes long, at most 107 are possible", .path.display())]
    SocketPathTooLong {
        /// The socket path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// The socket path names a directory.
    #[error("NRI socket path {} is a directory", .0.display())]
    SocketPathIsDirectory(PathBuf),
    /// The socket's mode cannot be used.
    #[error("NRI socket: {0}")]
    SocketAccess(#[source] nri_adaptation::socket::SocketError),
    /// A plugin or plugin configuration directory exists but cannot be read
    /// as a directory.
    #[error("NRI plugin directory {} cannot be read: {source}", .path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The builtin policy validator's policy file does not load
    /// (`file:line:column: ...`).
    #[error("NRI policy validator: {0}")]
    Policy(#[source] nri_policy::LoadError),
}

/// Errors of [`Nri`](crate::Nri).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A lifecycle call failed: a plugin returned an error, plugins'
    /// results conflict, or a validator rejected a container.
    #[error(transparent)]
    Adaptation(#[from] nri_adaptation::Error),
    /// The configuration cannot be used.
    #[error("invalid NRI configuration: {0}")]
    Config(#[from] ConfigError),
    /// NRI could not be started.
    #[error("failed to start NRI: {0}")]
    Start(#[source] nri_adaptation::Error),
    /// A domain of that name is already registered.
    #[error("NRI domain {0:?} is already registered")]
    DomainExists(String),
    /// No domain is registered yet, so container updates requested by a
    /// plugin cannot be applied. The plugin receives this as the error of
    /// its UpdateContainers request.
    #[error("no NRI domain is registered yet: container updates and evictions cannot be applied")]
    NoDomain,
    /// [`Nri::reload`](crate::Nri::reload): the new configuration could not
    /// be prepared; the running NRI was not touched.
    #[error("failed to prepare the new NRI configuration, keeping the current one: {0}")]
    ReloadPrepare(#[source] ConfigError),
    /// [`Nri::reload`](crate::Nri::reload): the new configuration was
    /// prepared but failed to start after the old instance was stopped.
    #[error(
        "failed to start NRI with the new configuration ({}): {source}",
        if *.restored { "the previous configuration was restored" } else { "NRI is not running" }
    )]
    ReloadStart {
        /// Why the new instance failed.
        #[source]
        source: nri_adaptation::Error,
        /// Whether an instance with the previous configuration was started
        /// again in its place.
        restored: bool,
    },
}
