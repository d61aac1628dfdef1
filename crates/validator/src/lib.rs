//! The default validator of the Node Resource Interface (NRI), as pure logic.
//!
//! NRI runtimes can refuse container adjustments that plugins propose: after
//! all plugins ran, *validators* see the merged adjustment together with who
//! owns each changed field, and may reject it (which fails the container's
//! creation). This crate holds the *default* validator, the one that
//! runtimes ship built in (as plugin `00-default-validator`), with the rules,
//! configuration and error texts of the reference implementation. It does no
//! I/O; a runtime or a standalone plugin wraps it.
//!
//! * [`DefaultValidatorConfig`]: which rules are on (YAML, JSON or TOML names);
//! * [`DefaultValidator::validate`]: the verdict, a [`ValidationError`] on refusal;
//! * [`owners`]: queries over field ownership, for any validator;
//! * [`annotations`]: pod/container-scoped annotations and the
//!   required-plugins list format;
//! * [`plugin_map`]: the plugins that took part, by name and qualified name.
//!
//! Annotation booleans are read by [`nri_api::goparse::parse_bool`], as Go's
//! `strconv.ParseBool` reads them.
//!
//! # Example
//!
//! ```
//! use nri_api::{Container, PluginInstance, PodSandbox, ValidateContainerAdjustmentRequest};
//! use nri_validator::{DefaultValidator, DefaultValidatorConfig};
//!
//! let cfg = DefaultValidatorConfig::from_yaml_str(
//!     "enable: true\nrequiredPlugins: [resources]\n",
//! )
//! .unwrap();
//! let validator = DefaultValidator::new(cfg);
//!
//! let mut req = ValidateContainerAdjustmentRequest {
//!     pod: Some(PodSandbox::default()),
//!     container: Some(Container { id: "c0".into(), name: "web".into(), ..Default::default() }),
//!     plugins: vec![PluginInstance { name: "default-validator".into(), index: "00".into() }],
//!     ..Default::default()
//! };
//! assert_eq!(
//!     validator.validate(&req).unwrap_err().to_string(),
//!     r#"validation error: required plugin "resources" not present"#,
//! );
//!
//! req.plugins.push(PluginInstance { name: "resources".into(), index: "10".into() });
//! assert!(validator.validate(&req).is_ok());
//! ```
//!
//! # Differences from the reference
//!
//! * Where the reference walks a map in random order (namespace owners,
//!   sysctl keys), the messages list entries sorted by key.
//! * A request without a container or without ownership data is validated
//!   as if they were empty; the reference would panic.
//! * The text after `invalid required-plugins.noderesource.dev annotation
//!   "<value>": ` is our YAML parser's, not the reference's.

#![warn(missing_docs)]

pub mod annotations;
mod config;
mod error;
pub mod owners;
mod plugins;
mod validator;

pub use config::{ConfigError, DefaultValidatorConfig};
pub use error::{SeccompProfileKind, ValidationError};
pub use plugins::plugin_map;
pub use validator::DefaultValidator;

/// Base name of the built-in default validator plugin.
pub const DEFAULT_VALIDATOR_NAME: &str = "default-validator";

/// Index of the built-in default validator plugin; it runs first.
pub const DEFAULT_VALIDATOR_INDEX: &str = "00";

pub use annotations::{EXAMPLE_TOLERATE_MISSING_PLUGINS_ANNOTATION, REQUIRED_PLUGINS_ANNOTATION};

/// The examples of the README, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
