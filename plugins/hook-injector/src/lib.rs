//! An NRI plugin that injects OCI hooks into containers, configured by hook files in
//! the format podman and CRI-O use (`hooks.d/*.json`, see `oci-hooks(5)`): a Rust
//! version of the hook-injector sample plugin of `containerd/nri`.
//!
//! ```
//! use std::collections::BTreeMap;
//! use nri_plugin_hook_injector::manager::HookManager;
//! use nri_plugin_hook_injector::when::Target;
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("busybox.json"), r#"{
//!     "version": "1.0.0",
//!     "hook": {"path": "/bin/sh", "args": ["sh", "-c", "echo injected"]},
//!     "when": {"commands": ["busybox"]},
//!     "stages": ["prestart", "poststop"]
//! }"#).unwrap();
//! let manager = HookManager::new(vec![dir.path().to_path_buf()]);
//!
//! let annotations = BTreeMap::new();
//! let args = vec!["busybox".to_string(), "sleep".to_string(), "1".to_string()];
//! let target = Target { annotations: &annotations, args: &args, has_bind_mounts: false };
//! let hooks = manager.hooks_for(&target).unwrap().expect("the hook matches");
//! assert_eq!(hooks.create_runtime[0].args, ["sh", "-c", "echo injected"]);
//! assert_eq!(hooks.poststop.len(), 1);
//! ```
#![warn(missing_docs)]

pub mod cli;
pub mod hook_file;
pub mod manager;
mod plugin;
pub mod when;

pub use plugin::HookInjector;
