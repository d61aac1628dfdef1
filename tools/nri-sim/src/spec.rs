//! OCI specs: the default base spec, the scenario's changes to it, and the
//! NRI view of a container derived from its spec (what a runtime sends).

use std::collections::BTreeMap;

use nri_api::{
    opt, Container, Hook, Hooks, LinuxContainer, LinuxCpu, LinuxMemory, LinuxNamespace, LinuxPids,
    LinuxResources, Mount, PodSandbox, PosixRlimit,
};
use serde_json::{json, Map, Value};

use crate::scenario::{ContainerSpec, PodSpec};

/// A small Linux spec, as a runtime would generate for a plain container.
pub fn default_spec(container: &str, pod_uid: &str) -> Value {
    json!({
        "ociVersion": "1.2.0",
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh", "-c", "sleep infinity"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "cwd": "/"
        },
        "root": {"path": "rootfs"},
        "hostname": container,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}
        ],
        "linux": {
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "cgroupsPath": format!("kubepods-pod{pod_uid}.slice:cri-containerd:{container}"),
            "namespaces": [
                {"type": "pid"}, {"type": "ipc"}, {"type": "uts"},
                {"type": "mount"}, {"type": "network"}
            ]
        }
    })
}

/// The base spec of a container: its `spec` (inline, or a file relative to
/// `base_dir`) or the default, with the container's `args`, `env`,
/// `annotations` and `resources` applied.
pub fn base_spec(
    c: &ContainerSpec,
    pod_uid: &str,
    base_dir: &std::path::Path,
) -> Result<Value, String> {
    let mut spec = match &c.spec {
        None => default_spec(&c.name, pod_uid),
        Some(Value::String(path)) => {
            let p = base_dir.join(path);
            let text = std::fs::read_to_string(&p).map_err(|e| {
                format!(
                    "container {:?}: cannot read spec {}: {e}",
                    c.name,
                    p.display()
                )
            })?;
            serde_json::from_str(&text)
                .map_err(|e| format!("container {:?}: spec {}: {e}", c.name, p.display()))?
        }
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(format!(
                "container {:?}: `spec` is a path to a config.json or an inline mapping",
                c.name
            ))
        }
    };
    let obj = spec
        .as_object_mut()
        .ok_or_else(|| format!("container {:?}: the spec is not a JSON object", c.name))?;
    if let Some(args) = &c.args {
        object(obj, "process").insert("args".into(), json!(args));
    }
    if !c.env.is_empty() {
        let process = object(obj, "process");
        let mut env: Vec<String> = process
            .get("env")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        for (k, v) in &c.env {
            env.retain(|e| e.split('=').next() != Some(k.as_str()));
            env.push(format!("{k}={v}"));
        }
        process.insert("env".into(), json!(env));
    }
    if !c.annotations.is_empty() {
        let ann = object(obj, "annotations");
        for (k, v) in &c.annotations {
            ann.insert(k.clone(), json!(v));
        }
    }
    if let Some(r) = &c.resources {
        nri_oci::Generator::new(&mut spec)
            .apply_resources(&crate::adjust::resources(r))
            .map_err(|e| format!("container {:?}: resources: {e}", c.name))?;
    }
    Ok(spec)
}

fn object<'a>(obj: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = obj.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// The NRI pod of a scenario pod.
pub fn pod(p: &PodSpec) -> PodSandbox {
    PodSandbox {
        id: p.id.clone().unwrap_or_else(|| p.name.clone()),
        name: p.name.clone(),
        uid: p.uid.clone().unwrap_or_else(|| format!("uid-{}", p.name)),
        namespace: p.namespace.clone().unwrap_or_else(|| "default".into()),
        labels: p.labels.clone(),
        annotations: p.annotations.clone(),
        runtime_handler: p.runtime_handler.clone(),
        ..Default::default()
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn hooks(v: Option<&Value>) -> Option<Hooks> {
    let v = v?;
    let stage = |name: &str| -> Vec<Hook> {
        v.get(name)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|h| Hook {
                        path: h.get("path").and_then(Value::as_str).unwrap_or("").into(),
                        args: strings(h.get("args")),
                        env: strings(h.get("env")),
                        timeout: h.get("timeout").and_then(Value::as_i64).and_then(opt),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(Hooks {
        prestart: stage("prestart"),
        create_runtime: stage("createRuntime"),
        create_container: stage("createContainer"),
        start_container: stage("startContainer"),
        poststart: stage("poststart"),
        poststop: stage("poststop"),
    })
}

fn resources(v: Option<&Value>) -> Option<LinuxResources> {
    let v = v?;
    let mem = v.get("memory").map(|m| LinuxMemory {
        limit: m.get("limit").and_then(Value::as_i64).and_then(opt),
        reservation: m.get("reservation").and_then(Value::as_i64).and_then(opt),
        swap: m.get("swap").and_then(Value::as_i64).and_then(opt),
        ..Default::default()
    });
    let cpu = v.get("cpu").map(|c| LinuxCpu {
        shares: c.get("shares").and_then(Value::as_u64).and_then(opt),
        quota: c.get("quota").and_then(Value::as_i64).and_then(opt),
        period: c.get("period").and_then(Value::as_u64).and_then(opt),
        cpus: c.get("cpus").and_then(Value::as_str).unwrap_or("").into(),
        mems: c.get("mems").and_then(Value::as_str).unwrap_or("").into(),
        ..Default::default()
    });
    let pids = v.get("pids").map(|p| LinuxPids {
        limit: p.get("limit").and_then(Value::as_i64).unwrap_or(0),
    });
    Some(LinuxResources {
        memory: mem,
        cpu,
        pids,
        unified: str_map(v.get("unified")),
        ..Default::default()
    })
}

/// The NRI container a runtime derives from `spec`.
pub fn container(
    id: &str,
    name: &str,
    pod_id: &str,
    labels: &BTreeMap<String, String>,
    spec: &Value,
) -> Container {
    let process = spec.get("process");
    let linux = spec.get("linux");
    let mounts = spec
        .get("mounts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|m| Mount {
                    destination: m
                        .get("destination")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                    r#type: m.get("type").and_then(Value::as_str).unwrap_or("").into(),
                    source: m.get("source").and_then(Value::as_str).unwrap_or("").into(),
                    options: strings(m.get("options")),
                })
                .collect()
        })
        .unwrap_or_default();
    let rlimits = process
        .and_then(|p| p.get("rlimits"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|r| PosixRlimit {
                    r#type: r.get("type").and_then(Value::as_str).unwrap_or("").into(),
                    hard: r.get("hard").and_then(Value::as_u64).unwrap_or(0),
                    soft: r.get("soft").and_then(Value::as_u64).unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    let namespaces = linux
        .and_then(|l| l.get("namespaces"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|n| LinuxNamespace {
                    r#type: n.get("type").and_then(Value::as_str).unwrap_or("").into(),
                    path: n.get("path").and_then(Value::as_str).unwrap_or("").into(),
                })
                .collect()
        })
        .unwrap_or_default();
    Container {
        id: id.into(),
        pod_sandbox_id: pod_id.into(),
        name: name.into(),
        labels: labels.clone(),
        annotations: str_map(spec.get("annotations")),
        args: strings(process.and_then(|p| p.get("args"))),
        env: strings(process.and_then(|p| p.get("env"))),
        mounts,
        hooks: hooks(spec.get("hooks")),
        rlimits,
        linux: Some(LinuxContainer {
            namespaces,
            resources: resources(linux.and_then(|l| l.get("resources"))),
            oom_score_adj: process
                .and_then(|p| p.get("oomScoreAdj"))
                .and_then(Value::as_i64)
                .and_then(opt),
            cgroups_path: linux
                .and_then(|l| l.get("cgroupsPath"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            sysctl: str_map(linux.and_then(|l| l.get("sysctl"))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ResourcesSpec;

    #[test]
    fn base_spec_applies_the_container_fields() {
        let c = ContainerSpec {
            name: "app".into(),
            args: Some(vec!["nginx".into()]),
            env: [("PATH".to_string(), "/bin".to_string())].into(),
            annotations: [("a".to_string(), "b".to_string())].into(),
            resources: Some(ResourcesSpec {
                memory: Some(1 << 30),
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = base_spec(&c, "u1", std::path::Path::new(".")).unwrap();
        assert_eq!(spec["process"]["args"], json!(["nginx"]));
        assert_eq!(spec["process"]["env"], json!(["PATH=/bin"]));
        assert_eq!(spec["annotations"]["a"], "b");
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 1 << 30);

        let ctr = container("id1", "app", "pod", &BTreeMap::new(), &spec);
        assert_eq!(ctr.args, ["nginx"]);
        assert_eq!(ctr.annotations["a"], "b");
        let res = ctr.linux.unwrap().resources.unwrap();
        assert_eq!(res.memory.unwrap().limit.unwrap().value, 1 << 30);
        assert_eq!(ctr.mounts.len(), 2);
    }

    #[test]
    fn bad_spec_values_are_errors() {
        let c = ContainerSpec {
            name: "x".into(),
            spec: Some(json!(5)),
            ..Default::default()
        };
        assert!(base_spec(&c, "u", std::path::Path::new(".")).is_err());
        let c = ContainerSpec {
            name: "x".into(),
            spec: Some(json!("/nonexistent/config.json")),
            ..Default::default()
        };
        assert!(base_spec(&c, "u", std::path::Path::new("."))
            .unwrap_err()
            .contains("cannot read spec"));
    }
}
