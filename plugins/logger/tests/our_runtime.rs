//! The logger as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::args;
use common::ours::{container, pod, run_pod_and_create};
use nri_adaptation::Adaptation;
use nri_interop::plugin_tests::{run_with_runtime_named, PluginProcess};
use nri_stub::api::CreateContainerRequest;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_nri-logger");

/// Our runtime, calling itself `runtime_name`, with the logger registered as
/// `10-logger`, subscribed to CreateContainer, setting the variable `LOGGER`, and
/// taking the flags `more`.
async fn start_logger(
    dir: &Path,
    runtime_name: &str,
    more: &[&str],
) -> (Adaptation, PluginProcess) {
    let flags = [&["-events", "CreateContainer", "-add-env", "LOGGER"], more].concat();
    run_with_runtime_named(dir, runtime_name, BIN, &args(&flags), "10-logger").await
}

#[tokio::test]
async fn injects_and_logs_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("logger.log");
    let (nri, _plugin) = start_logger(
        dir.path(),
        "nri-rs-test",
        &[
            "-log-file",
            log_file.to_str().unwrap(),
            "-set-annotation",
            "logger.example.com/pid",
        ],
    )
    .await;
    let pod = pod("pod0", "web", &[]);
    let reply = run_pod_and_create(&nri, &pod, &container("server", &pod)).await;
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
    let (nri, plugin) = start_logger(
        dir.path(),
        "docker",
        &["-add-annotation", "logger.example.com/pid"],
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
