//! Set-up shared by the end-to-end suites of nri-rs: real container runtimes,
//! driven the way users drive them, with our plugins attached.
//!
//! Every suite under `e2e/tests/` builds on the same pieces:
//!
//! * [`host`]: whether this machine can run the suites (root, overlayfs), the
//!   Debian packages they install, the cache of slow-to-build tools, and
//!   [`host::Daemon`], a process stopped by pid when dropped, pass or fail;
//! * [`workspace`]: the workspace's own binaries (sample plugins, tools), built
//!   with the cargo that runs the tests;
//! * [`image`]: a static busybox packed as an OCI image, built locally (no
//!   registry is reachable from the test machines);
//! * [`deploy`]: the sample plugins' images and Kubernetes manifests under
//!   `deploy/`, and the tools that build and check them;
//! * [`containerd`]: a private containerd (its own root, state, sockets, NRI
//!   socket and plugin directories) and a `crictl` client for it;
//! * [`docker`]: a private Docker Engine (dockerd, its own containerd,
//!   runc 1.3, a docker CLI), with Docker's own NRI or `nri-runc`;
//! * [`podman`]: podman with private storage and configuration, running its
//!   containers through `nri-runc`, and an `nri-hostd` for it.
//!
//! When the machine cannot run a suite, [`host::Requirements::check`] prints one
//! `SKIPPED` line, unless `NRI_E2E_REQUIRED=1` (set by CI), where it fails.

pub mod containerd;
pub mod cri;
pub mod crio;
pub mod deploy;
pub mod docker;
pub mod gobuild;
pub mod host;
pub mod image;
pub mod plugins;
pub mod podman;
pub mod workspace;

/// Errors of the set-up helpers.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A command ran but failed.
    #[error("{command} failed ({status}):\n{output}")]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// What it printed.
        output: String,
    },
    /// Something did not happen in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: std::time::Duration,
    },
    /// The machine cannot run the suite.
    #[error("{0}")]
    Unsupported(String),
}

impl E2eError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        E2eError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result of the set-up helpers.
pub type Result<T> = std::result::Result<T, E2eError>;
