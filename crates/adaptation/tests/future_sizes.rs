//! The futures of `Adaptation`'s public async methods stay small.
//!
//! A lifecycle call's state (its request, the merge state, the nested
//! plugin calls and validation) weighs 10 to 31 KiB, in debug and release
//! builds alike; a runtime that keeps such futures on the stack, or nests
//! them in timeouts and selects, can overflow a 2 MiB thread stack. The
//! lifecycle methods and `start` therefore box their state (one allocation
//! per call) and return a pointer-sized future. The bound is far below the
//! smallest unboxed lifecycle future (every request alone weighs more than
//! 1 KiB), so it fails as soon as one of them stops boxing.

use std::mem::size_of_val;
use std::sync::Arc;

use nri_adaptation::Adaptation;

use crate::support::Runtime;

/// The largest future a public method of `Adaptation` may return, in bytes.
const BOUND: usize = 1024;

#[test]
fn public_futures_are_small() {
    let nri = Adaptation::builder("test-runtime", "v1.0.0", Arc::new(Runtime::default())).build();
    // The futures are created, measured and dropped, never polled.
    let sizes = [
        ("start", size_of_val(&nri.start())),
        ("stop", size_of_val(&nri.stop())),
        ("block_plugin_sync", size_of_val(&nri.block_plugin_sync())),
        (
            "run_pod_sandbox",
            size_of_val(&nri.run_pod_sandbox(Default::default())),
        ),
        (
            "update_pod_sandbox",
            size_of_val(&nri.update_pod_sandbox(Default::default())),
        ),
        (
            "post_update_pod_sandbox",
            size_of_val(&nri.post_update_pod_sandbox(Default::default())),
        ),
        (
            "stop_pod_sandbox",
            size_of_val(&nri.stop_pod_sandbox(Default::default())),
        ),
        (
            "remove_pod_sandbox",
            size_of_val(&nri.remove_pod_sandbox(Default::default())),
        ),
        (
            "create_container",
            size_of_val(&nri.create_container(Default::default())),
        ),
        (
            "post_create_container",
            size_of_val(&nri.post_create_container(Default::default())),
        ),
        (
            "start_container",
            size_of_val(&nri.start_container(Default::default())),
        ),
        (
            "post_start_container",
            size_of_val(&nri.post_start_container(Default::default())),
        ),
        (
            "update_container",
            size_of_val(&nri.update_container(Default::default())),
        ),
        (
            "post_update_container",
            size_of_val(&nri.post_update_container(Default::default())),
        ),
        (
            "stop_container",
            size_of_val(&nri.stop_container(Default::default())),
        ),
        (
            "remove_container",
            size_of_val(&nri.remove_container(Default::default())),
        ),
    ];
    for (name, size) in &sizes {
        println!("{name}: {size} bytes");
    }
    let too_big: Vec<_> = sizes.iter().filter(|(_, size)| *size > BOUND).collect();
    assert!(
        too_big.is_empty(),
        "futures larger than {BOUND} bytes: {too_big:?}"
    );
}
