//! Applies NRI container adjustments and updates to OCI runtime specs.
//!
//! When NRI plugins have answered a `CreateContainer` request, the runtime
//! holds one merged [`ContainerAdjustment`](nri_api::ContainerAdjustment)
//! and possibly [`ContainerUpdate`](nri_api::ContainerUpdate)s. This crate
//! writes them into the container's OCI spec (`config.json`) the way the
//! reference Go generator (`github.com/containerd/nri`,
//! `pkg/runtime-tools/generate`) does, field by field.
//!
//! The spec is a [`serde_json::Value`], not a typed struct: everything the
//! adjustment does not touch — unknown and vendor fields, `windows`/`vm`
//! sections, spec values newer than any typed model (scheduler flags,
//! `enableCMT`, `pids: {}`) — comes out as it went in.
//!
//! ```
//! use nri_api::{ContainerAdjustment, LinuxDevice, Mount};
//! use nri_oci::Generator;
//! use serde_json::json;
//!
//! let mut spec = json!({
//!     "ociVersion": "1.2.0",
//!     "process": {"args": ["app"], "cwd": "/", "env": ["A=1", "B=2"]},
//!     "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
//!     "linux": {"resources": {"pids": {}}, "intelRdt": {"enableCMT": true}}
//! });
//!
//! let mut adjust = ContainerAdjustment::default();
//! adjust
//!     .remove_env("A")
//!     .add_mount(Mount {
//!         destination: "/data".into(),
//!         source: "/srv/data".into(),
//!         r#type: "bind".into(),
//!         options: vec!["rbind".into(), "ro".into()],
//!     })
//!     .add_device(LinuxDevice {
//!         path: "/dev/fuse".into(),
//!         r#type: "c".into(),
//!         major: 10,
//!         minor: 229,
//!         ..Default::default()
//!     });
//!
//! Generator::new(&mut spec).adjust(&adjust)?;
//!
//! assert_eq!(spec["process"]["env"], json!(["B=2"]));
//! assert_eq!(spec["mounts"][0]["destination"], "/data");
//! assert_eq!(spec["mounts"][1]["destination"], "/proc");
//! assert_eq!(
//!     spec["linux"]["resources"]["devices"],
//!     json!([{"allow": true, "type": "c", "major": 10, "minor": 229, "access": "rw"}])
//! );
//! assert_eq!(spec["linux"]["intelRdt"], json!({"enableCMT": true}));
//! # Ok::<(), nri_oci::AdjustError>(())
//! ```
//!
//! # Rules
//!
//! The README lists every adjustable field and how it is applied. Where
//! this crate differs from the reference on purpose:
//!
//! * Annotations, sysctl and network devices: removals (`-key`) are
//!   applied before additions, in key order, so an adjustment holding
//!   both `-k` and `k` deterministically ends with `k` set (the reference
//!   iterates a Go map).
//! * Mount propagation is decided per mount from its own options (the
//!   reference carries `rshared`/`rslave` over to later mounts of the same
//!   adjustment that have no propagation option).
//! * Mounts are sorted with a stable sort (the reference sort is not
//!   stable for more than 12 mounts with identical destinations).
//! * Objects that must be created (`process`, `linux`, ...) hold only the
//!   members set; the reference's struct encoding would also write
//!   `process.user` and `process.cwd` zero values. Seccomp, rlimits and
//!   `rslave` mounts on a spec without `linux`/`process` create them
//!   instead of panicking.
//! * Spec members of the wrong JSON type that must be edited give
//!   [`AdjustError::InvalidSpec`] (the reference could not even decode
//!   such a spec).
//!
//! Replicated on purpose: the seccomp `default_errno` is not applied; of
//! the memory settings only a non-zero limit is applied, to both `limit`
//! and `swap`; a pids limit of `-1` does not lift an existing limit.

#![warn(missing_docs)]

pub mod convert;
mod error;
mod generator;
mod json;
mod linux;
mod maps;
mod mounts;
mod process;
pub mod propagation;
mod resources;

pub use error::{AdjustError, BoxError, PropagationError};
pub use generator::{
    AnnotationFilter, CdiInjector, ClassResolver, Generator, PropagationLookup, ResourceChecker,
};
pub use linux::NAMESPACE_TYPES;

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
