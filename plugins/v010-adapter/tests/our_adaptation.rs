//! The adapter binary on our runtime adaptation (`nri-adaptation`): a container
//! start runs the v0.1 test plugin with the rebuilt request.

mod common;

use std::path::Path;

use common::args;
use common::ours::{container, pod, OurRuntime};
use nri_stub::api::{opt, LinuxContainer, LinuxCpu, LinuxResources, StartContainerRequest};
use serde_json::{json, Value};

const ADAPTER: &str = env!("CARGO_BIN_EXE_nri-v010-adapter");
const CLEARCFS: &str = env!("CARGO_BIN_EXE_nri-v010-test-clearcfs");

#[tokio::test(flavor = "current_thread")]
async fn clearcfs_runs_on_container_start() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(CLEARCFS, bin.join("clearcfs")).unwrap();
    let cgroup_root = dir.path().join("cgroup");
    std::fs::create_dir_all(cgroup_root.join("default/redis")).unwrap();
    let conf = dir.path().join("conf.json");
    let conf_value = json!({"version": "0.1", "plugins": [
        {"type": "clearcfs", "conf": {"cgroupRoot": cgroup_root}}]});
    std::fs::write(&conf, conf_value.to_string()).unwrap();
    let log = dir.path().join("requests.jsonl");

    let rt = OurRuntime::start(
        dir.path(),
        Path::new(ADAPTER),
        |socket| args(socket, &[&"-conf", &conf, &"-bin-dir", &bin]),
        &[("NRI_V010_TEST_LOG", &log)],
    )
    .await;
    assert_eq!(rt.plugin_names(), ["00-v010-adapter"]);

    let mut ctr = container("pod0", "redis", &["redis-server"]);
    ctr.pid = 1234;
    ctr.annotations.insert("qos.class".into(), "ls".into());
    ctr.linux = Some(LinuxContainer {
        cgroups_path: "default/redis".into(),
        resources: Some(LinuxResources {
            cpu: Some(LinuxCpu {
                quota: opt(50000),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    rt.nri
        .start_container(StartContainerRequest {
            pod: Some(pod("pod0", &[])),
            container: Some(ctr),
        })
        .await
        .unwrap();
    let stderr = rt.stop().await;

    let quota = std::fs::read_to_string(cgroup_root.join("default/redis/cpu.cfs_quota_us"));
    assert_eq!(quota.unwrap(), "-1", "{stderr}");
    let request: Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(
        request,
        json!({
            "conf": {"cgroupRoot": cgroup_root},
            "version": "0.1", "state": "create", "id": "redis", "sandboxID": "pod0", "pid": 1234,
            "spec": {"resources": {"memory": {}, "cpu": {"quota": 50000}},
                     "cgroupsPath": "default/redis",
                     "annotations": {"qos.class": "ls"}}
        })
    );
}
