//! An NRI plugin that runs NRI v0.1 plugins: the one-shot executables listed in
//! `/etc/nri/conf.json` (found in `$PATH`, then `/opt/nri/bin`), invoked as
//! `<type> invoke` with a JSON request on standard input and a JSON result on
//! standard output, at pod and container start (`state: create`) and stop
//! (`state: delete`). A Rust version of the v010-adapter sample plugin of
//! `containerd/nri`; the requests are rebuilt from the NRI event data.
//!
//! ```
//! use nri_plugin_v010_adapter::request::Subject;
//! use nri_plugin_v010_adapter::v01::State;
//! use nri_stub::api::{Container, PodSandbox};
//!
//! let pod = PodSandbox { id: "pod0".into(), ..Default::default() };
//! let ctr = Container { id: "redis".into(), pid: 1234, ..Default::default() };
//! let request = Subject::container(&pod, &ctr).request("0.1", State::Create);
//! assert_eq!(
//!     serde_json::to_string(&request).unwrap(),
//!     r#"{"version":"0.1","state":"create","id":"redis","sandboxID":"pod0","pid":1234,"spec":{"resources":null}}"#
//! );
//! ```
#![warn(missing_docs)]

pub mod cli;
pub mod invoke;
mod plugin;
pub mod request;
pub mod v01;

pub use plugin::V010Adapter;
