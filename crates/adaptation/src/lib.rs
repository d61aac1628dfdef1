//! The runtime side of NRI, the Node Resource Interface.
//!
//! A container runtime (containerd, CRI-O) uses this crate to let NRI
//! plugins take part in the lifecycle of pods and containers:
//!
//! * [`Adaptation`]: start-up (builtin plugins, plugins launched from the
//!   plugin directory, the socket for external plugins), one entry point
//!   per lifecycle event, [`Adaptation::stop`]. Built with
//!   [`Adaptation::builder`]; the runtime provides [`RuntimeHooks`]
//!   (synchronization and unsolicited container updates).
//! * [`BuiltinPlugin`]: in-process plugins; [`DefaultValidatorPlugin`] is
//!   the default validator of `nri-validator`.
//! * [`Metrics`]: measurements of plugin calls.
//! * The merge engine, the pure core of every reply: [`Owners`] (which
//!   plugin set which field; [`ConflictError`]), [`CreateResult`],
//!   [`UpdateResult`] and [`StopResult`].
//!
//! `docs/adaptation.md` in the repository describes the tasks, locks and
//! their order.
//!
//! The merge rules, the error texts and the removal-marker semantics follow
//! the reference Go implementation (`github.com/containerd/nri`,
//! `pkg/adaptation/result.go`) field by field, with these deliberate
//! differences:
//! * pids limits requested in container updates are honoured (the reference
//!   drops them);
//! * an UpdateContainer reply never holds an empty entry for the updated
//!   container;
//! * evictions requested by plugins are collected and returned instead of
//!   being dropped;
//! * everything iterates in a deterministic order (sorted keys), where the
//!   reference iterates hash maps.
//!
//! # Example
//!
//! ```
//! use nri_adaptation::CreateResult;
//! use nri_api::{Container, ContainerAdjustment, CreateContainerRequest, CreateContainerResponse};
//!
//! let request = CreateContainerRequest {
//!     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
//!     ..Default::default()
//! };
//! let mut result = CreateResult::new(request);
//!
//! // 00-bar sets an annotation.
//! let mut bar = ContainerAdjustment::default();
//! bar.add_annotation("key", "00-bar");
//! result.apply("00-bar", CreateContainerResponse { adjust: Some(bar), ..Default::default() })?;
//!
//! // 10-foo removes it first, so it may set it again.
//! let mut foo = ContainerAdjustment::default();
//! foo.remove_annotation("key").add_annotation("key", "10-foo");
//! result.apply("10-foo", CreateContainerResponse { adjust: Some(foo), ..Default::default() })?;
//!
//! let adjust = result.into_response().adjust.unwrap();
//! assert_eq!(adjust.annotations["-key"], "");
//! assert_eq!(adjust.annotations["key"], "10-foo");
//! # Ok::<(), nri_adaptation::MergeError>(())
//! ```

#![warn(missing_docs)]

mod adaptation;
mod adaptation_error;
mod backlog;
mod builder;
mod builtin;
mod discover;
pub mod error;
mod launch;
mod lifecycle;
mod listener;
pub mod merge;
mod metrics;
pub mod owners;
mod plugin;
mod policy;
mod replace;
mod restart;
mod runtime;
pub mod socket;
mod trace;
mod validate;

pub use adaptation::{Adaptation, PluginSyncBlock};
pub use async_trait::async_trait;
pub use builder::{default_plugin_busy_poll, AdaptationBuilder, DEFAULT_BUSY_POLL};
pub use builtin::{BuiltinPlugin, DefaultValidatorPlugin};
pub use error::{
    BoxError, ConflictError, DiscoverError, Error, MergeError, PluginError, RegistrationError,
};
pub use launch::is_wasm_file;
pub use merge::{CreateOutcome, CreateResult, StopResult, UpdateResult};
pub use metrics::{AskedFor, Metrics, MetricsFanout, NoMetrics, SyncStats};
/// The WebAssembly plugin engine (feature `wasm`), for
/// [`AdaptationBuilder::wasm_options`].
#[cfg(feature = "wasm")]
pub use nri_wasm;
pub use owners::{field_kind, FieldKind, Owners};
pub use plugin::{PluginInfo, PluginKind};
pub use policy::TimeoutPolicy;
pub use restart::RestartPolicy;
pub use runtime::{FailedRequests, RuntimeHooks, Synchronizer};
pub use trace::{with_trace_parent, TraceContext};

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
