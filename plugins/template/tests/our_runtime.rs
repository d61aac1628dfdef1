//! The template plugin as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::ours::{container, pod, run_pod_and_create, run_with_our_runtime};
use nri_stub::api::StopContainerRequest;

const BIN: &str = env!("CARGO_BIN_EXE_nri-template");

#[tokio::test]
async fn logs_events_from_our_runtime_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &["-name", "template", "-idx", "10"],
        "10-template",
    )
    .await;
    let pod = pod("pod0", "web", &[]);
    let ctr = container("server", &pod);
    let reply = run_pod_and_create(&nri, &pod, &ctr).await;
    // Our adaptation replies with the merged adjustment unstripped: nothing in it.
    let adjust = reply.adjust.unwrap_or_default();
    assert!(
        adjust.annotations.is_empty() && adjust.env.is_empty(),
        "{adjust:?}"
    );
    assert!(
        adjust.mounts.is_empty() && adjust.rlimits.is_empty(),
        "{adjust:?}"
    );
    assert!(adjust.hooks.unwrap_or_default().prestart.is_empty());
    nri.stop_container(StopContainerRequest {
        pod: Some(pod),
        container: Some(ctr),
    })
    .await
    .unwrap();
    nri.stop().await;

    let log = plugin.log();
    for line in [
        "connected to nri-rs-test/v0.1.0 as 10-template",
        "started pod default/web",
        "creating container default/web/server",
        "validating adjustment of container default/web/server",
        "stopped container default/web/server",
    ] {
        assert!(log.contains(line), "missing {line:?} in log:\n{log}");
    }
}
