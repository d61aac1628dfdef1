//! A policy validator for the Node Resource Interface (NRI): who may change
//! what.
//!
//! NRI plugins can change anything about a container. This crate decides,
//! at ValidateContainerAdjustment, whether the fields each plugin set (the
//! *owners* the runtime sends with the merged adjustment) are allowed by a
//! declarative policy: rules scoped by plugin (name, glob, index range) and
//! workload (pod namespace, labels, annotations, container name), allowing
//! or denying field by field. It also does everything the default validator
//! does, with the same options and texts. It does no I/O but appending to
//! the audit trail; a runtime (`nri-integration`'s builtin form) or the
//! `nri-policy` plugin wraps it.
//!
//! * [`Policy`]: the policy file, checked as it loads (errors at
//!   `file:line:column`);
//! * [`PolicyValidator`]: the policy in force (reloadable), its decisions,
//!   [`PolicyMetrics`] and the audit trail;
//! * [`Refusal`]: the rejection reason, naming plugin, field, value and rule.
//!
//! The language and its precedence are described in `docs/policy.md` of the
//! repository and in [`Spec`].
//!
//! # Example
//!
//! ```
//! use nri_api::{Container, ContainerAdjustment, Field, FieldOwners, Mount, OwningPlugins,
//!               ValidateContainerAdjustmentRequest};
//! use nri_policy::{Policy, PolicyValidator};
//!
//! let policy = Policy::from_yaml_str(
//!     r#"rules:
//!   - name: no-host-root
//!     deny:
//!       mounts: [{sources: [/], access: rw}]
//! "#,
//!     "/etc/nri/policy.yaml",
//! )
//! .unwrap();
//! let validator = PolicyValidator::new(policy);
//!
//! let mut owners = FieldOwners::default();
//! owners.compound.entry(Field::Mounts as i32).or_default()
//!     .owners.insert("/host".into(), "20-storage".into());
//! let req = ValidateContainerAdjustmentRequest {
//!     container: Some(Container { id: "c0".into(), ..Default::default() }),
//!     adjust: Some(ContainerAdjustment {
//!         mounts: vec![Mount {
//!             destination: "/host".into(), source: "/".into(), r#type: "bind".into(),
//!             options: vec!["rbind".into(), "rw".into()],
//!         }],
//!         ..Default::default()
//!     }),
//!     owners: Some(OwningPlugins { owners: [("c0".to_string(), owners)].into() }),
//!     ..Default::default()
//! };
//! assert_eq!(
//!     validator.validate(&req).unwrap_err().to_string(),
//!     "validation error: plugin \"20-storage\" may not set mounts \"/host\" \
//!      (source \"/\", type \"bind\", rw): denied by rule \"no-host-root\" \
//!      (/etc/nri/policy.yaml:2)",
//! );
//! ```

#![warn(missing_docs)]

mod audit;
mod cpuset;
mod eval;
mod glob;
mod items;
mod lang;
mod metrics;
mod validator;

pub use audit::{record as audit_record, AuditEntry};
pub use cpuset::{CpuSet, CpuSetError};
pub use eval::{Decision, Refusal, Violation};
pub use glob::Glob;
pub use lang::{
    Access, Bounds, DefaultAction, FieldName, IndexRange, LoadError, Mode, MountSpec, PathPrefix,
    PluginScope, Policy, Resources, Rule, SetSpec, Spec, WorkloadScope,
};
pub use metrics::PolicyMetrics;
pub use validator::PolicyValidator;

/// Base name of the builtin policy validator plugin.
pub const POLICY_VALIDATOR_NAME: &str = "policy-validator";

/// Index of the builtin policy validator plugin.
pub const POLICY_VALIDATOR_INDEX: &str = "00";

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
