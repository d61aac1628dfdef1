//! The logger as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::ours::{container, pod, run_with_our_runtime};
use nri_stub::api::{CreateContainerRequest, RunPodSandboxRequest};

const BIN: &str = env!("CARGO_BIN_EXE_nri-logger");

#[tokio::test]
async fn injects_and_logs_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("logger.log");
    let (nri, _plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &[
            "-name",
            "logger",
            "-idx",
            "10",
            "-events",
            "CreateContainer",
            "-log-file",
            log_file.to_str().unwrap(),
            "-set-annotation",
            "logger.example.com/pid",
            "-add-env",
            "LOGGER",
        ],
        "10-logger",
    )
    .await;
    let pod = pod("pod0", "web", &[]);
    nri.run_pod_sandbox(RunPodSandboxRequest {
        pod: Some(pod.clone()),
    })
    .await
    .unwrap();
    let reply = nri
        .create_container(CreateContainerRequest {
            container: Some(container("server", &pod)),
            pod: Some(pod),
        })
        .await
        .unwrap();
    nri.stop().await;

    let adjust = reply.adjust.unwrap();
    let value = &adjust.annotations["logger.example.com/pid"];
    assert!(value.starts_with("logger-pid-"), "{adjust:?}");
    let env: Vec<_> = adjust
        .env
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(env, [("LOGGER", value.as_str())]);

    let log = std::fs::read_to_string(&log_file).unwrap();
    assert!(log.contains("CreateContainer:    name: server"), "{log}");
    assert!(
        !log.contains("RunPodSandbox: pod:"),
        "not subscribed:\n{log}"
    );
}
