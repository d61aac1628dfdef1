//! Running the plugin binary against the Go reference runtime (`nri-ref-runtime`)
//! or our runtime adaptation (`nri-adaptation`): the shared support of
//! `nri_interop::plugin_tests`.
#![allow(unused_imports)] // each test file uses a different subset

use std::ffi::{OsStr, OsString};
use std::path::Path;

pub use nri_interop::plugin_tests::{os_args, run_on_go_runtime, TIMEOUT};

/// Our runtime adaptation, with the plugin as an external plugin on a socket in
/// a temporary directory.
pub mod ours {
    pub use nri_interop::plugin_tests::{
        annotated_pod as pod, created_container as container, OurRuntime,
    };
}

/// The plugin's arguments: `-idx 00 -socket <socket>`, then `more`.
pub fn args(socket: &Path, more: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    let mut args = os_args(&[&"-idx", &"00", &"-socket", &socket]);
    args.extend(os_args(more));
    args
}
