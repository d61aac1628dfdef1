//! The network device injector as an external plugin of our runtime side
//! (`nri-adaptation`): the pod-start errors (no network namespaces needed).

mod common;

use common::ours::{pod, run_with_our_runtime};
use nri_stub::api::{RunPodSandboxRequest, StopPodSandboxRequest};

const BIN: &str = env!("CARGO_BIN_EXE_nri-network-device-injector");

#[tokio::test]
async fn refuses_host_network_pods_and_bad_annotations_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, _plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &["-name", "netdev", "-idx", "10"],
        "10-netdev",
    )
    .await;
    let run = |pod| RunPodSandboxRequest { pod: Some(pod) };

    let hostnet = pod(
        "p0",
        "hostnet",
        &[("netdevice.noderesource.dev", "- name: eth9")],
    );
    let err = nri.run_pod_sandbox(run(hostnet.clone())).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("trying to inject network device on host network Pod"),
        "{err}"
    );
    let bad = pod(
        "p1",
        "bad",
        &[("netdevices.nri.containerd.io/pod", "- {address: 10.0.0.1}")],
    );
    let err = nri.run_pod_sandbox(run(bad)).await.unwrap_err();
    assert!(err.to_string().contains("name is required"), "{err}");
    let plain = pod("p2", "plain", &[]);
    nri.run_pod_sandbox(run(plain)).await.unwrap();
    // Stopping a host-network pod has nothing to give back.
    nri.stop_pod_sandbox(StopPodSandboxRequest { pod: Some(hostnet) })
        .await
        .unwrap();
    nri.stop().await;
}
