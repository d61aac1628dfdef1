//! The runtime integration layer of NRI, the Node Resource Interface.
//!
//! A container runtime embeds [`Nri`] to let NRI plugins take part in the
//! lifecycle of its pods and containers. It plays the role of containerd's
//! `internal/nri` package (with the CRI glue) and of moby's `daemon/nri`,
//! on top of [`nri_adaptation`]:
//!
//! * [`Config`]: enable or disable NRI and set its paths, timeouts and the
//!   default validator from the runtime's configuration file (serde;
//!   containerd's and moby's option names are accepted).
//! * [`Nri::start`], [`Nri::stop`] and [`Nri::reload`] (prepare the new
//!   instance, then swap; a configuration that cannot be prepared leaves
//!   the running one alone).
//! * [`Domain`]: one per runtime namespace; lists pods and containers for
//!   synchronization, and applies the updates and evictions plugins ask
//!   for (failed updates are reported back to the plugin).
//! * Lifecycle entry points with per-pod and per-container
//!   [`LifecycleState`], so that stops and removals reach plugins exactly
//!   once, a removal implies a missed stop, and
//!   [`Nri::undo_create_container`] cleans up after a failed creation.
//! * [`Nri::notify_container_exit`]: exit notifications delivered in the
//!   background, never blocking the caller.
//!
//! * Metrics of every plugin call through [`NriBuilder::metrics`]; with
//!   the default `prometheus` feature, [`metrics::NriMetrics`] exports
//!   them in the Prometheus/OpenMetrics format under the names containerd
//!   uses, and a runtime can read the same figures in code.
//! * Traces: [`with_trace_parent`] runs lifecycle calls in the runtime's
//!   own trace (the W3C `traceparent` of the CRI request), which plugins
//!   receive; with the `otel` feature, [`otel`] exports the spans to an
//!   OpenTelemetry collector with those ids.
//!
//! When NRI is disabled, every entry point is a cheap no-op.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use nri_integration::{BoxError, Config, Domain, Nri};
//! use nri_api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};
//!
//! /// A runtime namespace without pods or containers.
//! struct Empty;
//!
//! #[nri_integration::async_trait]
//! impl Domain for Empty {
//!     fn name(&self) -> &str { "default" }
//!     async fn list_pod_sandboxes(&self) -> Vec<PodSandbox> { Vec::new() }
//!     async fn list_containers(&self) -> Vec<Container> { Vec::new() }
//!     async fn get_pod_sandbox(&self, _id: &str) -> Option<PodSandbox> { None }
//!     async fn get_container(&self, _id: &str) -> Option<Container> { None }
//!     async fn update_container(&self, u: &ContainerUpdate) -> Result<(), BoxError> {
//!         Err(format!("no container {}", u.container_id).into())
//!     }
//!     async fn evict_container(&self, e: &ContainerEviction) -> Result<(), BoxError> {
//!         Err(format!("no container {}", e.container_id).into())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), nri_integration::Error> {
//! // Disabled: everything is a no-op.
//! let off = Nri::new(Config::disabled());
//! off.start().await?;
//! let pod = PodSandbox { id: "pod0".into(), ..Default::default() };
//! let ctr = Container { id: "ctr0".into(), ..Default::default() };
//! assert!(off.create_container(&pod, &ctr).await?.adjust.is_none());
//!
//! // Enabled, with the paths in a temporary directory.
//! let tmp = tempfile::tempdir().unwrap();
//! let nri = Nri::builder(Config {
//!     socket_path: tmp.path().join("nri.sock"),
//!     plugin_path: tmp.path().join("plugins"),
//!     plugin_config_path: tmp.path().join("conf.d"),
//!     ..Config::default()
//! })
//! .runtime("my-runtime", "1.0.0")
//! .build();
//! nri.register_domain(Arc::new(Empty))?;
//! nri.start().await?;
//! assert!(nri.is_running());
//! nri.reload(Config { enable: false, ..nri.config() }).await?;
//! assert!(!nri.is_running());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod config;
mod domain;
pub mod duration;
mod error;
mod exits;
mod hooks;
mod lifecycle;
mod nri;
mod outcome;
mod policy;
pub mod socket;
mod state;
mod trace;

pub use config::Config;
pub use domain::Domain;
pub use error::{ConfigError, Error};
pub use nri::{Nri, NriBuilder, SyncBlock};
/// The attribute for implementing [`Domain`] and the adaptation's hooks, as
/// `nri-adaptation` re-exports it.
pub use nri_adaptation::async_trait;
pub use nri_adaptation::{BoxError, Metrics, MetricsFanout, PluginInfo};
#[cfg(feature = "prometheus")]
pub use nri_metrics as metrics;
#[cfg(feature = "otel")]
pub use nri_otel as otel;
pub use outcome::{Adjustment, FailedUpdates, ResourceUpdate};
pub use policy::{PolicyValidatorConfig, POLICY_AUDIT_CONTAINERS};
pub use state::LifecycleState;
pub use trace::{with_trace_parent, TraceContext};

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
