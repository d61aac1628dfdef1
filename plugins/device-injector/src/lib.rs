//! An NRI plugin that injects device nodes, CDI devices, mounts and network devices
//! into containers, and sets their I/O priority, scheduling attributes, sysctls and
//! memory policy, all from pod annotations. A Rust version of the device-injector
//! sample plugin of `containerd/nri`, with the same annotation keys and formats.
//!
//! ```
//! use std::collections::BTreeMap;
//! use nri_plugin_device_injector::{adjust_for, InjectError};
//!
//! let mut pod = BTreeMap::new();
//! pod.insert(
//!     "mounts.noderesource.dev/container.c2".to_string(),
//!     "- {source: /home, destination: /host-home, type: bind, options: [bind, ro]}".to_string(),
//! );
//! let adjust = adjust_for(&pod, "c2", "pod/c2")?;
//! assert_eq!(adjust.mounts[0].destination, "/host-home");
//! # Ok::<(), InjectError>(())
//! ```
#![warn(missing_docs)]

pub mod adjust;
pub mod annotations;
pub mod cli;
pub mod goyaml;
mod plugin;

use std::collections::BTreeMap;

use nri_stub::api::ContainerAdjustment;

pub use plugin::DeviceInjector;

/// Why a container's annotations could not be applied; the container is then not
/// created (as with the Go plugin).
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// An annotation value is not valid YAML of the expected form.
    #[error(
        "invalid {what} annotation {}: {reason}",
        nri_stub::api::gofmt::quote(value)
    )]
    Annotation {
        /// What the annotation holds (`"device"`, `"mount"`, ...).
        what: &'static str,
        /// The annotation value.
        value: String,
        /// The decoding error.
        reason: String,
    },
    /// The memory policy mode is unknown.
    #[error("invalid memory policy: invalid memory policy mode {}", nri_stub::api::gofmt::quote(.0))]
    MemoryPolicyMode(String),
    /// A memory policy flag is unknown.
    #[error("invalid memory policy: invalid memory policy flag {}", nri_stub::api::gofmt::quote(.0))]
    MemoryPolicyFlag(String),
}

/// The adjustment that the pod annotations ask for container `ctr` (`log_name` names
/// it in logs, usually `pod/container`).
pub fn adjust_for(
    pod_annotations: &BTreeMap<String, String>,
    ctr: &str,
    log_name: &str,
) -> Result<ContainerAdjustment, InjectError> {
    let annotated = annotations::Annotated::parse(pod_annotations, ctr)?;
    tracing::debug!("{log_name}: annotated {annotated:?}");
    adjust::build_adjustment(&annotated, log_name)
}
