//! The adapter binary, connected as an external plugin to the Go reference runtime,
//! runs the v0.1 test plugin (`nri-v010-test-clearcfs`, a clearcfs look-alike) at
//! pod and container start and stop, with requests rebuilt from the NRI events.

mod common;

use std::path::Path;

use common::{args, run_on_go_runtime};
use serde_json::{json, Value};

const ADAPTER: &str = env!("CARGO_BIN_EXE_nri-v010-adapter");
const CLEARCFS: &str = env!("CARGO_BIN_EXE_nri-v010-test-clearcfs");

fn scenario() -> Value {
    json!({
        "pods": [
            {"id": "pod0", "name": "redis-pod", "uid": "u0", "namespace": "default",
             "labels": {"app": "redis"}, "annotations": {"team": "db"}, "pid": 44,
             "linux": {"cgroups_path": "kubepods/pod0",
                       "namespaces": [{"type": "network", "path": "/proc/44/ns/net"}]}},
            {"id": "pod1", "name": "failing", "uid": "u1", "namespace": "default",
             "annotations": {"v010-test/error": "pod refused"}}
        ],
        "containers": [
            {"id": "redis", "pod_sandbox_id": "pod0", "name": "redis", "state": 1, "pid": 1234,
             "args": ["redis-server"], "annotations": {"qos.class": "ls"},
             "linux": {"cgroups_path": "default/redis",
                       "namespaces": [{"type": "pid", "path": "/proc/1234/ns/pid"}],
                       "resources": {"cpu": {"quota": {"value": 20000}, "period": {"value": 100000}}}}},
            {"id": "doomed", "pod_sandbox_id": "pod0", "name": "doomed", "state": 3,
             "annotations": {"v010-test/error": "cannot delete"}}
        ],
        "steps": [
            {"op": "wait_plugins", "count": 1, "timeout_ms": 30000},
            {"op": "RunPodSandbox", "pod": "pod0"},
            {"op": "StartContainer", "container": "redis"},
            {"op": "StopContainer", "container": "redis"},
            {"op": "StopContainer", "container": "doomed"},
            {"op": "StopPodSandbox", "pod": "pod0"},
            {"op": "RunPodSandbox", "pod": "pod1"},
            {"op": "stop"}
        ]
    })
}

#[test]
fn v01_plugins_run_on_pod_and_container_events() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for name in ["clearcfs", "recorder"] {
        std::os::unix::fs::symlink(CLEARCFS, bin.join(name)).unwrap();
    }
    let cgroup_root = dir.path().join("cgroup");
    let ctr_cgroup = cgroup_root.join("default/redis");
    std::fs::create_dir_all(&ctr_cgroup).unwrap();
    std::fs::write(ctr_cgroup.join("cpu.cfs_quota_us"), "20000").unwrap();
    let conf = dir.path().join("conf.json");
    let conf_value = json!({"version": "0.1", "plugins": [
        {"type": "clearcfs", "conf": {"cgroupRoot": cgroup_root}},
        {"type": "recorder", "conf": {"cgroupRoot": cgroup_root, "role": "second"}}
    ]});
    std::fs::write(&conf, serde_json::to_vec(&conf_value).unwrap()).unwrap();
    let log = dir.path().join("requests.jsonl");

    let (out, stderr) = run_on_go_runtime(
        dir.path(),
        &scenario(),
        Path::new(ADAPTER),
        |socket| {
            args(
                socket,
                &[
                    &"-no-reconnect",
                    &"-conf",
                    &conf,
                    &"-bin-dir",
                    &bin,
                    &"-invoke-timeout",
                    &"20s",
                ],
            )
        },
        &[("NRI_V010_TEST_LOG", &log)],
    );
    assert_eq!(out.json["plugins"], json!(["00-v010-adapter"]), "{stderr}");

    // clearcfs did its job on the latency-sensitive container.
    assert_eq!(
        std::fs::read_to_string(ctr_cgroup.join("cpu.cfs_quota_us")).unwrap(),
        "-1"
    );

    // The failures: a pod start fails, a container stop does not.
    let errors: Vec<(&str, &str)> = out
        .steps()
        .iter()
        .map(|s| {
            (
                s["op"].as_str().unwrap(),
                s["error"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            ("wait_plugins", ""),
            ("RunPodSandbox", ""),
            ("StartContainer", ""),
            ("StopContainer", ""),
            ("StopContainer", ""),
            ("StopPodSandbox", ""),
            (
                "RunPodSandbox",
                "rpc error: code = Unknown desc = plugin: clearcfs: pod refused"
            ),
            ("stop", ""),
        ]
    );
    assert!(
        stderr.contains("cannot delete"),
        "the stop failure is logged: {stderr}"
    );

    let requests: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(String, String, usize)> = requests
        .iter()
        .map(|r| {
            let results = r["results"].as_array().map_or(0, Vec::len);
            (
                r["id"].as_str().unwrap().into(),
                r["state"].as_str().unwrap().into(),
                results,
            )
        })
        .collect();
    let s = |id: &str, state: &str, n| (id.to_string(), state.to_string(), n);
    assert_eq!(
        summary,
        [
            s("pod0", "create", 0),
            s("pod0", "create", 1),
            s("redis", "create", 0),
            s("redis", "create", 1),
            s("redis", "delete", 0),
            s("redis", "delete", 1),
            s("doomed", "delete", 0),
            s("pod0", "delete", 0),
            s("pod0", "delete", 1),
            s("pod1", "create", 0),
        ]
    );

    assert_eq!(
        requests[0],
        json!({
            "conf": {"cgroupRoot": cgroup_root},
            "version": "0.1", "state": "create", "id": "pod0", "sandboxID": "pod0", "pid": 44,
            "spec": {"resources": null,
                     "namespaces": {"network": "/proc/44/ns/net"},
                     "cgroupsPath": "kubepods/pod0",
                     "annotations": {"team": "db"}},
            "labels": {"app": "redis"}
        })
    );
    let clearcfs_result = json!({"plugin": "clearcfs", "version": "0.1", "error": "",
                                 "metadata": {"cfs_quota_us": "-1"}});
    assert_eq!(
        requests[3],
        json!({
            "conf": {"cgroupRoot": cgroup_root, "role": "second"},
            "version": "0.1", "state": "create", "id": "redis", "sandboxID": "pod0", "pid": 1234,
            "spec": {"resources": {"memory": {}, "cpu": {"quota": 20000, "period": 100000}},
                     "namespaces": {"pid": "/proc/1234/ns/pid"},
                     "cgroupsPath": "default/redis",
                     "annotations": {"qos.class": "ls"}},
            "labels": {"app": "redis"},
            "results": [clearcfs_result]
        })
    );
}
