//! Runs the plugin binary as an external plugin of the Go reference runtime
//! (`nri-ref-runtime` of the interop harness) or of our runtime side
//! (`nri-adaptation`): the shared support of `nri_interop::plugin_tests`.
#![allow(unused_imports)] // each test file uses a different subset

pub use nri_interop::plugin_tests::{
    run_with_go_runtime, spawn_go_runtime, step, PluginProcess, TIMEOUT,
};

/// Our runtime side, listening on a socket in a temporary directory.
pub mod ours {
    pub use nri_interop::plugin_tests::{
        container, pod, run_pod_and_create, run_with_our_runtime, start_adaptation, wait_plugins,
    };
}

/// Asserts that the plugin's `log` has the lines of the pod `web` (its
/// `describe` text) started, stopped and removed, and that it subscribed to
/// these three pod events only.
pub fn assert_pod_events_logged(log: &str, web: &str) {
    for line in [
        format!("started pod {web}"),
        format!("stopped pod {web}"),
        format!("removed pod {web}"),
    ] {
        assert!(log.contains(&line), "missing {line:?} in log:\n{log}");
    }
    assert!(
        log.contains("events=RunPodSandbox,StopPodSandbox,RemovePodSandbox"),
        "{log}"
    );
}
