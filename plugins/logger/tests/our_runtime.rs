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

/// Under Docker's own NRI (runtime name `docker`), which applies environment variables
/// but fails a container on an annotation, the logger says once at Configure that it
/// leaves its annotation out, and still sets its variable.
#[tokio::test]
async fn under_docker_sets_the_env_and_leaves_the_annotation_out() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = nri_interop::plugin_tests::run_with_runtime_named(
        dir.path(),
        "docker",
        BIN,
        &[
            "-name",
            "logger",
            "-idx",
            "10",
            "-events",
            "CreateContainer",
            "-add-annotation",
            "logger.example.com/pid",
            "-add-env",
            "LOGGER",
        ],
        "10-logger",
    )
    .await;
    let pod = pod("pod0", "web", &[]);
    for name in ["a", "b"] {
        let reply = nri
            .create_container(CreateContainerRequest {
                container: Some(container(name, &pod)),
                pod: Some(pod.clone()),
            })
            .await
            .unwrap();
        let adjust = reply.adjust.unwrap();
        assert!(adjust.annotations.is_empty(), "{adjust:?}");
        let env: Vec<_> = adjust.env.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(env, ["LOGGER"]);
        assert!(adjust.env[0].value.starts_with("logger-pid-"), "{adjust:?}");
    }
    nri.stop().await;
    let log = plugin.log();
    let warning =
        "logger: runtime docker 29.2.0 does not apply annotations: this plugin leaves them out";
    assert_eq!(log.matches(warning).count(), 1, "{log}");
}
