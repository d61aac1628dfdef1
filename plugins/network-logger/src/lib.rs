//! A plugin that logs where each pod's network lives: its network namespace
//! and the IP addresses the runtime (through CNI) gave it, when the pod
//! starts, stops and is removed, and for every pod at synchronization.
//! [`plugin::NetworkLogger`] is the plugin type, [`cli::Args`] its command
//! line; the `nri-network-logger` program is a thin `main` over them.
//!
//! ```
//! use nri_plugin_network_logger::plugin::{describe, network_namespace};
//! use nri_stub::api::{LinuxNamespace, LinuxPodSandbox, PodSandbox};
//!
//! let pod = PodSandbox {
//!     name: "web".into(),
//!     namespace: "prod".into(),
//!     ips: vec!["10.0.0.7".into()],
//!     linux: Some(LinuxPodSandbox {
//!         namespaces: vec![LinuxNamespace { r#type: "network".into(), path: "/run/netns/cni-1".into() }],
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! assert_eq!(network_namespace(&pod), "/run/netns/cni-1");
//! assert_eq!(describe(&pod), "prod/web: namespace=/run/netns/cni-1 ips=[10.0.0.7]");
//! ```

pub mod cli;
pub mod plugin;
