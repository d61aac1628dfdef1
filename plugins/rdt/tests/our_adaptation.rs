//! The plugin binary on our runtime adaptation (`nri-adaptation`).

mod common;

use std::path::Path;

use common::args;
use common::ours::{container, pod, OurRuntime};
use nri_stub::api::CreateContainerRequest;

const BIN: &str = env!("CARGO_BIN_EXE_nri-rdt");

#[tokio::test(flavor = "current_thread")]
async fn rdt_annotations_on_our_adaptation() {
    let dir = tempfile::tempdir().unwrap();
    let rt = OurRuntime::start(dir.path(), Path::new(BIN), |socket| args(socket, &[]), &[]).await;
    assert_eq!(rt.plugin_names(), ["20-rdt"]);
    let pod = pod(
        "pod0",
        &[
            ("closid.rdt.noderesource.dev/container.db", "gold"),
            (
                "schemata.rdt.noderesource.dev/container.db",
                "L3:0=ff,MB:0=50",
            ),
            ("enablemonitoring.rdt.noderesource.dev/container.db", "1"),
            (
                "enablemonitoring.rdt.noderesource.dev/container.bad",
                "maybe",
            ),
        ],
    );
    let create = |name: &str| CreateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container("pod0", name, &["pause"])),
    };
    let db = rt.nri.create_container(create("db")).await.unwrap();
    let rdt = db.adjust.unwrap().linux.unwrap().rdt.unwrap();
    assert_eq!(rdt.clos_id.unwrap().value, "gold");
    assert_eq!(rdt.schemata.unwrap().value, ["L3:0=ff", "MB:0=50"]);
    assert!(rdt.enable_monitoring.unwrap().value);

    let web = rt.nri.create_container(create("web")).await.unwrap();
    assert!(web
        .adjust
        .is_none_or(|a| a.linux.is_none_or(|l| l.rdt.is_none())));

    let err = rt.nri.create_container(create("bad")).await.unwrap_err();
    assert!(
        err.to_string().contains("invalid boolean value \"maybe\""),
        "{err}"
    );
    rt.stop().await;
}
