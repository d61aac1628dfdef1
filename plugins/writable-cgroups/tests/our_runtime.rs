//! The writable-cgroups plugin as an external plugin of our runtime side
//! (`nri-adaptation`).

mod common;

use common::args;
use common::ours::{container, pod, run_with_our_runtime};
use nri_stub::api::{CreateContainerRequest, Mount};

const BIN: &str = env!("CARGO_BIN_EXE_nri-writable-cgroups");

fn cgroup_mount(options: &[&str]) -> Mount {
    Mount {
        destination: "/sys/fs/cgroup".into(),
        r#type: "cgroup".into(),
        source: "cgroup".into(),
        options: options.iter().map(|o| o.to_string()).collect(),
    }
}

#[tokio::test]
async fn makes_the_cgroup_mount_writable_with_our_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let mountinfo = dir.path().join("mountinfo");
    std::fs::write(
        &mountinfo,
        "36 35 98:0 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
    )
    .unwrap();
    let (nri, _plugin) = run_with_our_runtime(
        dir.path(),
        BIN,
        &args(&["-host-mount-file", mountinfo.to_str().unwrap()]),
        "10-writable-cgroups",
    )
    .await;
    let pod = pod(
        "pod0",
        "p",
        &[("writable-cgroups.noderesource.dev/container.on", "true")],
    );
    let create = |name: &str| {
        let mut ctr = container(name, &pod);
        ctr.mounts = vec![cgroup_mount(&["ro", "nosuid"])];
        CreateContainerRequest {
            pod: Some(pod.clone()),
            container: Some(ctr),
        }
    };

    let on = nri.create_container(create("on")).await.unwrap();
    let mounts = on.adjust.unwrap().mounts;
    assert!(
        mounts.contains(&cgroup_mount(&["nosuid", "rw"])),
        "{mounts:?}"
    );
    let off = nri.create_container(create("off")).await.unwrap();
    assert!(off.adjust.unwrap_or_default().mounts.is_empty());
    nri.stop().await;
}
