//! Multi-plugin scenarios, table driven.
//!
//! Plugin replies and expected results are written in the Go-compatible JSON
//! form of the protocol types. Expected replies are compared after dropping
//! empty objects and lists, like the reference tests compare after
//! `Strip()`.

use nri_adaptation::{CreateResult, StopResult, UpdateResult};
use nri_api::{
    Container, CreateContainerRequest, CreateContainerResponse, StopContainerResponse,
    UpdateContainerRequest, UpdateContainerResponse,
};
use serde_json::{json, Value};

/// Removes nulls and empty objects/lists, recursively.
fn strip(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(map) => {
            let map: serde_json::Map<_, _> = map
                .into_iter()
                .filter_map(|(k, v)| strip(v).map(|v| (k, v)))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        Value::Array(items) => {
            let items: Vec<_> = items
                .into_iter()
                .map(|v| strip(v).unwrap_or(json!({})))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        other => Some(other),
    }
}

fn stripped<T: serde::Serialize>(v: &T) -> Value {
    strip(serde_json::to_value(v).unwrap()).unwrap_or(json!({}))
}

struct CreateCase {
    name: &'static str,
    container: Value,
    plugins: Vec<(&'static str, Value)>,
    /// The stripped merged reply, or the error text.
    expect: Result<Value, &'static str>,
    /// Optional: the stripped request container after all plugins.
    request: Option<Value>,
}

fn run_create(case: CreateCase) {
    let container: Container = serde_json::from_value(case.container).unwrap();
    let mut result = CreateResult::new(CreateContainerRequest {
        container: Some(container),
        ..Default::default()
    });
    let mut outcome = Ok(());
    for (plugin, reply) in case.plugins {
        let reply: CreateContainerResponse = serde_json::from_value(reply).unwrap();
        outcome = result.apply(plugin, reply);
        if outcome.is_err() {
            break;
        }
    }
    match (outcome, case.expect) {
        (Ok(()), Ok(expected)) => {
            if let Some(request) = case.request {
                let got = stripped(result.request().container.as_ref().unwrap());
                assert_eq!(got, request, "{}: request container", case.name);
            }
            let got = stripped(&result.into_response());
            assert_eq!(got, expected, "{}: reply", case.name);
        }
        (Err(err), Err(expected)) => assert_eq!(err.to_string(), expected, "{}", case.name),
        (got, expected) => panic!("{}: got {got:?}, expected {expected:?}", case.name),
    }
}

fn ctr0() -> Value {
    json!({"id": "ctr0", "name": "ctr0", "pod_sandbox_id": "pod0"})
}

#[test]
fn create_container_scenarios() {
    let cases = vec![
        CreateCase {
            name: "annotations: remove then set",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"annotations": {"key": "00-bar"}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"annotations": {"-key": "", "key": "10-foo"}}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"annotations": {"-key": "", "key": "10-foo"}}})),
            request: None,
        },
        CreateCase {
            name: "annotations: conflict",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"annotations": {"key": "00-bar"}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"annotations": {"key": "10-foo"}}}),
                ),
            ],
            expect: Err(r#"plugins "10-foo" and "00-bar" both tried to set Annotations key"#),
            request: None,
        },
        CreateCase {
            name: "mounts: remove and re-add",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"mounts": [
                    {"destination": "/mnt/test", "source": "/dev/00-bar"}]}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"mounts": [
                    {"destination": "-/mnt/test"},
                    {"destination": "/mnt/test", "source": "/dev/10-foo"}]}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"mounts": [
                {"destination": "/mnt/test", "source": "/dev/10-foo"}]}})),
            request: Some(
                json!({"id": "ctr0", "name": "ctr0", "pod_sandbox_id": "pod0",
                "mounts": [{"destination": "/mnt/test", "source": "/dev/10-foo"}]}),
            ),
        },
        CreateCase {
            name: "mounts: single removal reaches the reply",
            container: json!({"id": "ctr0", "mounts": [
                {"destination": "/remove/test/destination", "source": "/x"}]}),
            plugins: vec![(
                "00-test",
                json!({"adjust": {"mounts": [
                {"destination": "-/remove/test/destination"}]}}),
            )],
            expect: Ok(json!({"adjust": {"mounts": [
                {"destination": "-/remove/test/destination"}]}})),
            request: Some(json!({"id": "ctr0"})),
        },
        CreateCase {
            name: "env: removal of an original variable is not forwarded",
            container: json!({"id": "ctr0", "env": ["A=1", "B=2"]}),
            plugins: vec![("00-test", json!({"adjust": {"env": [{"key": "-A"}]}}))],
            expect: Ok(json!({})),
            request: Some(json!({"id": "ctr0", "env": ["B=2"]})),
        },
        CreateCase {
            name: "env: remove and re-add",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"env": [{"key": "VAR", "value": "00-bar"}]}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"env": [
                    {"key": "-VAR"}, {"key": "VAR", "value": "10-foo"}]}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"env": [{"key": "VAR", "value": "10-foo"}]}})),
            request: None,
        },
        CreateCase {
            name: "args: set then update",
            container: json!({"id": "ctr0", "args": ["sleep", "1"]}),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"args": ["echo", "updated", "argument", "list"]}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"args": [
                    "", "echo", "updated", "argument", "list", "twice..."]}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"args": [
                "echo", "updated", "argument", "list", "twice..."]}})),
            request: None,
        },
        CreateCase {
            name: "args: set twice conflicts",
            container: ctr0(),
            plugins: vec![
                ("00-bar", json!({"adjust": {"args": ["a"]}})),
                ("10-foo", json!({"adjust": {"args": ["b"]}})),
            ],
            expect: Err(r#"plugins "10-foo" and "00-bar" both tried to set Args "#),
            request: None,
        },
        CreateCase {
            name: "hooks accumulate",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"hooks": {"prestart": [{"path": "/bin/00-bar"}]}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"hooks": {"prestart": [{"path": "/bin/10-foo"}]}}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"hooks": {"prestart": [
                {"path": "/bin/00-bar"}, {"path": "/bin/10-foo"}]}}})),
            request: None,
        },
        CreateCase {
            name: "devices: remove and re-add",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"linux": {"devices": [
                    {"path": "/dev/test", "type": "c", "major": 313, "minor": 100}]}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"linux": {"devices": [
                    {"path": "-/dev/test"},
                    {"path": "/dev/test", "type": "c", "major": 313, "minor": 110}]}}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"linux": {"devices": [
                {"path": "/dev/test", "type": "c", "major": 313, "minor": 110}]}}})),
            request: None,
        },
        CreateCase {
            name: "resource classes conflict",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"linux": {"resources": {
                    "rdt_class": {"value": "00-bar"}, "blockio_class": {"value": "00-bar"}}}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"linux": {"resources": {
                    "rdt_class": {"value": "10-foo"}, "blockio_class": {"value": "10-foo"}}}}}),
                ),
            ],
            expect: Err(r#"plugins "10-foo" and "00-bar" both tried to set BlockioClass "#),
            request: None,
        },
        CreateCase {
            name: "net devices: remove and re-add",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"linux": {"net_devices": {
                    "hostIf": {"name": "barIf"}}}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"linux": {"net_devices": {
                    "-hostIf": null, "hostIf": {"name": "containerIf"}}}}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"linux": {"net_devices": {
                "hostIf": {"name": "containerIf"}}}}})),
            request: None,
        },
        CreateCase {
            name: "scheduler conflict",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"linux": {"scheduler": {"policy": 2}}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"linux": {"scheduler": {"policy": 3}}}}),
                ),
            ],
            expect: Err(r#"plugins "10-foo" and "00-bar" both tried to set LinuxSched "#),
            request: None,
        },
        CreateCase {
            name: "rdt: remove then set",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"adjust": {"linux": {"rdt": {
                    "clos_id": {"value": "bar"},
                    "schemata": {"value": ["L2:0=ff"]},
                    "enable_monitoring": {"value": true}}}}}),
                ),
                (
                    "10-foo",
                    json!({"adjust": {"linux": {"rdt": {
                    "remove": true,
                    "clos_id": {"value": "foo"},
                    "schemata": {"value": ["L2:0=ff"]},
                    "enable_monitoring": {"value": true}}}}}),
                ),
            ],
            expect: Ok(json!({"adjust": {"linux": {"rdt": {
                "clos_id": {"value": "foo"},
                "schemata": {"value": ["L2:0=ff"]},
                "enable_monitoring": {"value": true}}}}})),
            request: None,
        },
        CreateCase {
            name: "update of the created container",
            container: ctr0(),
            plugins: vec![("00-test", json!({"update": [{"container_id": "ctr0"}]}))],
            expect: Err(r#"plugin "00-test" asked update of "ctr0" during creation"#),
            request: None,
        },
        CreateCase {
            name: "updates of other containers merge",
            container: ctr0(),
            plugins: vec![
                (
                    "00-bar",
                    json!({"update": [{"container_id": "ctr1", "linux": {"resources": {
                    "cpu": {"shares": {"value": 10}}}}}]}),
                ),
                (
                    "10-foo",
                    json!({"update": [{"container_id": "ctr1", "linux": {"resources": {
                    "memory": {"limit": {"value": 20}}}}}]}),
                ),
            ],
            expect: Ok(
                json!({"update": [{"container_id": "ctr1", "linux": {"resources": {
                "cpu": {"shares": {"value": 10}},
                "memory": {"limit": {"value": 20}}}}}]}),
            ),
            request: None,
        },
        CreateCase {
            name: "sysctl and namespaces",
            container: json!({"id": "ctr0", "linux": {"namespaces": [
                {"type": "pid"}, {"type": "network", "path": "/old"}]}}),
            plugins: vec![(
                "00-test",
                json!({"adjust": {"linux": {
                "sysctl": {"-kernel.a": "", "kernel.b": "1"},
                "namespaces": [{"type": "-network"}]}}}),
            )],
            expect: Ok(json!({"adjust": {"linux": {
                "sysctl": {"-kernel.a": "", "kernel.b": "1"},
                "namespaces": [{"type": "-network"}]}}})),
            request: Some(json!({"id": "ctr0", "linux": {
                "namespaces": [{"type": "pid"}],
                "sysctl": {"kernel.b": "1"}}})),
        },
    ];
    for case in cases {
        run_create(case);
    }
}

#[test]
fn update_container_scenarios() {
    struct Case {
        name: &'static str,
        resources: Value,
        plugins: Vec<(&'static str, Value)>,
        expect: Result<Value, &'static str>,
    }
    let cases = vec![
        Case {
            name: "target merged over request, others first",
            resources: json!({"cpu": {"shares": {"value": 999}}, "memory": {"limit": {"value": 9999}}}),
            plugins: vec![
                (
                    "00-bar",
                    json!({"update": [
                    {"container_id": "ctr0", "linux": {"resources": {"cpu": {"shares": {"value": 123}}}}},
                    {"container_id": "ctr1", "linux": {"resources": {"cpu": {"cpus": "0-1"}}}}]}),
                ),
                (
                    "10-foo",
                    json!({"update": [
                    {"container_id": "ctr0", "linux": {"resources": {"memory": {"limit": {"value": 1}}}}}]}),
                ),
            ],
            expect: Ok(json!({"update": [
                {"container_id": "ctr1", "linux": {"resources": {"cpu": {"cpus": "0-1"}}}},
                {"container_id": "ctr0", "linux": {"resources": {
                    "cpu": {"shares": {"value": 123}}, "memory": {"limit": {"value": 1}}}}}]})),
        },
        Case {
            name: "untouched target has no entry",
            resources: json!({"cpu": {"shares": {"value": 999}}}),
            plugins: vec![("00-bar", json!({}))],
            expect: Ok(json!({})),
        },
        Case {
            name: "same field twice",
            resources: json!({}),
            plugins: vec![
                (
                    "00-bar",
                    json!({"update": [{"container_id": "ctr0", "linux": {"resources": {
                    "unified": {"memory.high": "1"}}}}]}),
                ),
                (
                    "10-foo",
                    json!({"update": [{"container_id": "ctr0", "linux": {"resources": {
                    "unified": {"memory.high": "2"}}}}]}),
                ),
            ],
            expect: Err(
                r#"plugins "10-foo" and "00-bar" both tried to set CgroupsUnified memory.high"#,
            ),
        },
    ];
    for case in cases {
        let mut result = UpdateResult::new(UpdateContainerRequest {
            container: Some(Container {
                id: "ctr0".into(),
                ..Default::default()
            }),
            linux_resources: Some(serde_json::from_value(case.resources).unwrap()),
            ..Default::default()
        });
        let mut outcome = Ok(());
        for (plugin, reply) in case.plugins {
            let reply: UpdateContainerResponse = serde_json::from_value(reply).unwrap();
            outcome = result.apply(plugin, reply);
            if outcome.is_err() {
                break;
            }
        }
        match (outcome, case.expect) {
            (Ok(()), Ok(expected)) => {
                assert_eq!(stripped(&result.into_response()), expected, "{}", case.name)
            }
            (Err(e), Err(expected)) => assert_eq!(e.to_string(), expected, "{}", case.name),
            (got, expected) => panic!("{}: got {got:?}, expected {expected:?}", case.name),
        }
    }
}

#[test]
fn stop_container_scenario() {
    let mut result = StopResult::new();
    let replies = [
        (
            "00-bar",
            json!({"update": [{"container_id": "a", "linux": {"resources": {
            "hugepage_limits": [{"page_size": "2MB", "limit": 4}]}}}]}),
        ),
        (
            "10-foo",
            json!({"update": [{"container_id": "a", "ignore_failure": true,
            "linux": {"resources": {"hugepage_limits": [{"page_size": "2MB", "limit": 8}]}}}]}),
        ),
    ];
    for (plugin, reply) in replies {
        let reply: StopContainerResponse = serde_json::from_value(reply).unwrap();
        result.apply(plugin, reply).unwrap();
    }
    // The second update conflicted but was ignorable: the first stays.
    assert_eq!(
        stripped(&result.into_response()),
        json!({"update": [{"container_id": "a", "linux": {"resources": {
            "hugepage_limits": [{"page_size": "2MB", "limit": 4}]}}}]})
    );
}
