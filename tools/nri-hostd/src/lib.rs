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

pub mod config;
pub mod daemon;
pub mod protocol;
pub mod runtime;
pub mod server;
pub mod spec;
pub mod state;

pub use config::HostdConfig;
pub use daemon::Hostd;
