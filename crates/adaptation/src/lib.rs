//! The runtime side of NRI, the Node Resource Interface.
//!
//! A container runtime (containerd, CRI-O) uses this crate to let NRI
//! plugins take part in the lifecycle of pods and containers. This release
//! holds the pure core every later layer calls: merging the results of
//! several plugins into one reply, with per-field conflict detection. It does
//! no I/O; connecting to plugins and dispatching events come next.
//!
//! * [`Owners`]: which plugin set which field of which container;
//!   [`ConflictError`] when two plugins want the same field.
//! * [`CreateResult`]: merges the adjustments and container updates plugins
//!   return for CreateContainer, and keeps the request that the next plugin
//!   must see.
//! * [`UpdateResult`] and [`StopResult`]: merge the container updates of
//!   UpdateContainer and StopContainer.
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

pub mod error;
pub mod merge;
pub mod owners;

pub use error::{ConflictError, MergeError};
pub use merge::{CreateOutcome, CreateResult, StopResult, UpdateResult};
pub use owners::{field_kind, FieldKind, Owners};

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
