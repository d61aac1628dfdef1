//! The ulimit adjuster as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::ours::{container, pod, run_with_our_runtime};
use nri_stub::api::CreateContainerRequest;

const BIN: &str = env!("CARGO_BIN_EXE_nri-ulimit-adjuster");

/// The plugin's arguments in both tests.
const ARGS: &[&str] = &["-name", "ulimit-adjuster", "-idx", "10"];

/// The annotation of container `web`: a valid rlimit.
const WEB: (&str, &str) = (
    "ulimits.noderesource.dev/container.web",
    "- {type: nofile, soft: 1024, hard: 4096}",
);

/// The annotation of container `bad`: an unknown rlimit type.
const BAD: (&str, &str) = ("ulimits.noderesource.dev/container.bad", "- {type: nosuch}");

#[tokio::test]
async fn sets_rlimits_and_refuses_bad_annotations_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, _plugin) = run_with_our_runtime(dir.path(), BIN, ARGS, "10-ulimit-adjuster").await;
    let pod = pod(
        "pod0",
        "sleep",
        &[
            WEB,
            (
                "ulimits.nri.containerd.io/container.old",
                "- {type: RLIMIT_CORE, hard: 7}",
            ),
            BAD,
        ],
    );
    let create = |name: &str| CreateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container(name, &pod)),
    };
    let limits = |reply: nri_stub::api::CreateContainerResponse| -> Vec<(String, u64, u64)> {
        reply
            .adjust
            .unwrap_or_default()
            .rlimits
            .into_iter()
            .map(|r| (r.r#type, r.hard, r.soft))
            .collect()
    };

    let web = nri.create_container(create("web")).await.unwrap();
    assert_eq!(limits(web), [("RLIMIT_NOFILE".to_string(), 4096, 1024)]);
    let old = nri.create_container(create("old")).await.unwrap();
    assert_eq!(limits(old), [("RLIMIT_CORE".to_string(), 7, 0)]);
    let plain = nri.create_container(create("plain")).await.unwrap();
    assert_eq!(limits(plain), []);
    let err = nri.create_container(create("bad")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"failed to parse type: "nosuch""#),
        "{err}"
    );
    nri.stop().await;
}

/// Under a runtime that applies no rlimits (Docker's own NRI), the plugin says so once
/// at Configure and leaves every container alone, even one with a bad annotation,
/// instead of failing it.
#[tokio::test]
async fn under_docker_says_so_once_and_adjusts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = nri_interop::plugin_tests::run_with_runtime_named(
        dir.path(),
        "docker",
        BIN,
        ARGS,
        "10-ulimit-adjuster",
    )
    .await;
    let pod = pod("pod0", "sleep", &[WEB, BAD]);
    for name in ["web", "bad", "web"] {
        let reply = nri
            .create_container(CreateContainerRequest {
                pod: Some(pod.clone()),
                container: Some(container(name, &pod)),
            })
            .await
            .unwrap();
        let adjust = reply.adjust.unwrap_or_default();
        assert!(adjust.rlimits.is_empty(), "{name}: {adjust:?}");
    }
    nri.stop().await;
    let log = plugin.log();
    let warning =
        "runtime docker 29.2.0 does not apply rlimits: this plugin adjusts no container on it";
    assert_eq!(log.matches(warning).count(), 1, "{log}");
}
