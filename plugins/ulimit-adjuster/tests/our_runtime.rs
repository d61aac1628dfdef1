//! The ulimit adjuster as an external plugin of our runtime side (`nri-adaptation`).

mod common;

use common::ours::{container, pod, run_with_our_runtime};
use nri_stub::api::CreateContainerRequest;

const BIN: &str = env!("CARGO_BIN_EXE_nri-ulimit-adjuster");

#[tokio::test]
async fn sets_rlimits_and_refuses_bad_annotations_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (nri, _plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &["-name", "ulimit-adjuster", "-idx", "10"],
        "10-ulimit-adjuster",
    )
    .await;
    let pod = pod(
        "pod0",
        "sleep",
        &[
            (
                "ulimits.noderesource.dev/container.web",
                "- {type: nofile, soft: 1024, hard: 4096}",
            ),
            (
                "ulimits.nri.containerd.io/container.old",
                "- {type: RLIMIT_CORE, hard: 7}",
            ),
            ("ulimits.noderesource.dev/container.bad", "- {type: nosuch}"),
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
