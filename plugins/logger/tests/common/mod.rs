//! Runs the plugin binary as an external plugin of the Go reference runtime
//! (`nri-ref-runtime` of the interop harness) or of our runtime side
//! (`nri-adaptation`): the shared support of `nri_interop::plugin_tests`.
#![allow(unused_imports)] // each test file uses a different subset

pub use nri_interop::plugin_tests::{
    pre_install, run_with_go_runtime, spawn_go_runtime, step, PluginProcess, TIMEOUT,
};

/// Our runtime side, listening on a socket in a temporary directory.
pub mod ours {
    pub use nri_interop::plugin_tests::{
        container, pod, run_pod_and_create, run_with_our_runtime, start_adaptation, wait_plugins,
    };
}

/// The plugin's arguments: `-name logger -idx 10`, then `more`.
pub fn args<'a>(more: &[&'a str]) -> Vec<&'a str> {
    [&["-name", "logger", "-idx", "10"], more].concat()
}
