//! Protocol types and helpers of the Node Resource Interface (NRI).
//!
//! NRI lets plugins take part in the lifecycle of pods and containers in a
//! container runtime (containerd, CRI-O). This crate holds the wire contract,
//! the protobuf package `nri.pkg.api.v1alpha1`, as plain Rust types, plus the
//! small rules both sides of the protocol share:
//!
//! * the generated messages and enums, at the crate root ([`Container`],
//!   [`PodSandbox`], [`ConfigureRequest`], [`Event`], ...), encoded with
//!   [`prost`] and (de)serializable with serde in the same JSON form as the
//!   reference Go types;
//! * [`service`]: ttRPC service and method names;
//! * [`EventMask`]: event subscriptions;
//! * [`plugin`]: well-known paths, environment variables, timeouts and the
//!   plugin naming rules;
//! * [`markers`]: the removal-marker convention of adjustments;
//! * builders on [`ContainerAdjustment`] and [`ContainerUpdate`], and
//!   conversions for the `Optional*` wrappers ([`opt`]);
//! * [`version`]: the protocol version and version inference.
//!
//! Maps are [`BTreeMap`](std::collections::BTreeMap)s, so encoding is
//! deterministic. Enum-typed fields are stored as `i32`, as prost does.
//!
//! # Example
//!
//! ```
//! use nri_api::{ContainerAdjustment, CreateContainerResponse, Event, EventMask};
//! use prost::Message;
//!
//! // What a plugin subscribes to.
//! let events = EventMask::parse(&["CreateContainer", "StopContainer"]).unwrap();
//! assert!(events.is_set(Event::StopContainer));
//!
//! // A reply to CreateContainer that adds an environment variable.
//! let mut adjust = ContainerAdjustment::default();
//! adjust.add_env("GREETING", "hello");
//! let reply = CreateContainerResponse { adjust: Some(adjust), ..Default::default() };
//!
//! // On the wire: protobuf. In files and tests: Go-compatible JSON.
//! let bytes = reply.encode_to_vec();
//! assert_eq!(CreateContainerResponse::decode(bytes.as_slice()).unwrap(), reply);
//! let json = serde_json::to_string(&reply).unwrap();
//! assert_eq!(json, r#"{"adjust":{"env":[{"key":"GREETING","value":"hello"}]}}"#);
//! ```

#![warn(missing_docs)]

mod serde_helpers;

/// Code generated from `proto/nri.proto` by `prost-build`, checked in under
/// `src/generated/` (tests/generated.rs keeps it in step with the proto).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated {
    include!("generated/nri.pkg.api.v1alpha1.rs");
}

pub use generated::*;

mod adjustment;
pub mod event;
pub mod gofmt;
pub mod goparse;
pub mod markers;
pub mod optional;
pub mod plugin;
mod resources;
pub mod service;
mod subject;
mod update;
pub mod version;

pub use event::{EventMask, ParseEventError};
pub use subject::Subject;

/// Any error, boxed: what plugin handlers, runtime hooks, builtin plugins and
/// OCI callbacks return. Defined once here and re-exported by `nri-stub`,
/// `nri-adaptation` and `nri-oci`.
///
/// ```
/// let err: nri_api::BoxError = "no such device".into();
/// assert_eq!(err.to_string(), "no such device");
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
pub use optional::opt;
pub use plugin::PluginNameError;
pub use version::{VersionError, NRI_VERSION};

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The (empty) reply to `StateChange`.
pub type StateChangeResponse = Empty;
/// The (empty) request of `Shutdown`.
pub type ShutdownRequest = Empty;
/// The (empty) reply to `Shutdown`.
pub type ShutdownResponse = Empty;
