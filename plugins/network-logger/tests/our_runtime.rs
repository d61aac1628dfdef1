//! The network-logger plugin as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::assert_pod_events_logged;
use common::ours::{container, pod, run_pod_and_create, run_with_our_runtime};
use nri_stub::api::{
    LinuxNamespace, LinuxPodSandbox, RemovePodSandboxRequest, StopPodSandboxRequest,
};

const BIN: &str = env!("CARGO_BIN_EXE_nri-network-logger");

#[tokio::test]
async fn logs_namespace_and_ips_of_pods_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &["-name", "network-logger", "-idx", "10"],
        "10-network-logger",
    )
    .await;
    let mut pod = pod("pod0", "web", &[]);
    pod.ips = vec!["192.168.7.3".into()];
    pod.linux = Some(LinuxPodSandbox {
        namespaces: vec![LinuxNamespace {
            r#type: "network".into(),
            path: "/var/run/netns/test-1".into(),
        }],
        ..Default::default()
    });
    let ctr = container("server", &pod);
    let reply = run_pod_and_create(&nri, &pod, &ctr).await;
    let adjust = reply.adjust.unwrap_or_default();
    assert!(
        adjust.annotations.is_empty() && adjust.env.is_empty(),
        "{adjust:?}"
    );
    nri.stop_pod_sandbox(StopPodSandboxRequest {
        pod: Some(pod.clone()),
    })
    .await
    .unwrap();
    nri.remove_pod_sandbox(RemovePodSandboxRequest { pod: Some(pod) })
        .await
        .unwrap();
    nri.stop().await;

    let log = plugin.log();
    let web = "default/web: namespace=/var/run/netns/test-1 ips=[192.168.7.3]";
    assert_pod_events_logged(&log, web);
}
