//! `nri-hostd`: NRI for any OCI runtime.
//!
//! The daemon embeds [`nri_integration`]: it launches the pre-installed
//! plugins of the plugin directory (with their `conf.d` configuration),
//! accepts external plugins on the NRI socket, and answers the `nri-runc`
//! wrapper on its control socket ([`protocol`]). For each runtime command
//! the wrapper reports, it sends plugins the matching lifecycle events and
//! returns what they changed (the adjusted `config.json`, the resources of
//! an `update`). Plugin-initiated updates and evictions are applied with
//! the real runtime's `update` and `kill`.
//!
//! The pods and containers it knows are kept in a state file replaced
//! atomically, in the background, after every change ([`state`]); at start
//! the file is reconciled
//! with the real runtime's `list`, so plugins synchronize with what really
//! runs ([`daemon::reconcile`]).
//!
//! Without the default feature `daemon`, the crate is the control protocol
//! and the state file alone ([`protocol`], [`state`]), with neither
//! nri-integration nor the adaptation: what the `nri-runc` wrapper builds.
//!
//! ```no_run
//! use std::sync::Arc;
//! use nri_hostd::{Hostd, HostdConfig};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = HostdConfig::load("/etc/nri/nri-hostd.toml".as_ref())?;
//! let socket = config.hostd.control_socket.clone();
//! let hostd = Arc::new(Hostd::start(config).await?);
//! nri_hostd::server::serve(hostd, &socket).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "daemon")]
pub mod config;
#[cfg(feature = "daemon")]
pub mod daemon;
pub mod protocol;
#[cfg(feature = "daemon")]
pub mod runtime;
#[cfg(feature = "daemon")]
pub mod server;
#[cfg(feature = "daemon")]
pub mod spec;
pub mod state;

#[cfg(feature = "daemon")]
pub use config::HostdConfig;
#[cfg(feature = "daemon")]
pub use daemon::Hostd;
