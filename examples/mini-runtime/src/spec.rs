//! The OCI runtime spec (`config.json`) of a new container, and the NRI
//! view of a container derived from it.

use std::collections::BTreeMap;

use nri_api::{Container, ContainerState, Mount};
use serde_json::{json, Value};

use crate::script::CreateSpec;

/// A default Linux spec, much like `runc spec` writes, with the script's
/// args, env and annotations.
pub fn default_spec(c: &CreateSpec) -> Value {
    let mut env =
        vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()];
    env.extend(c.env.iter().cloned());
    let mut spec = json!({
        "ociVersion": "1.2.0",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": c.args,
            "env": env,
            "cwd": "/",
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": true},
        "hostname": c.name,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]}
        ],
        "linux": {
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "cgroupsPath": format!("/mini-runtime/{}/{}", c.pod, c.id),
            "namespaces": [
                {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                {"type": "uts"}, {"type": "mount"}
            ]
        }
    });
    if !c.annotations.is_empty() {
        spec["annotations"] = json!(c.annotations);
    }
    spec
}

/// A new container as NRI plugins see it: id, pod, name, labels, state
/// created, and what `spec` holds (see [`refresh_from_spec`]).
pub fn new_container(c: &CreateSpec, spec: &Value) -> Container {
    let mut ctr = Container {
        id: c.id.clone(),
        pod_sandbox_id: c.pod.clone(),
        name: c.name.clone(),
        state: ContainerState::ContainerCreated as i32,
        labels: c.labels.clone(),
        ..Container::default()
    };
    refresh_from_spec(&mut ctr, spec);
    ctr
}

/// Copies the args, env, annotations and mounts of `spec` into `ctr`, so
/// that later events carry what plugins changed.
pub fn refresh_from_spec(ctr: &mut Container, spec: &Value) {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    ctr.annotations = spec["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
    ctr.mounts = spec["mounts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| Mount {
                    destination: m["destination"].as_str().unwrap_or_default().into(),
                    r#type: m["type"].as_str().unwrap_or_default().into(),
                    source: m["source"].as_str().unwrap_or_default().into(),
                    options: strings(&m["options"]),
                })
                .collect()
        })
        .unwrap_or_default();
    ctr.args = strings(&spec["process"]["args"]);
    ctr.env = strings(&spec["process"]["env"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create() -> CreateSpec {
        CreateSpec {
            pod: "p0".into(),
            id: "c0".into(),
            name: "web".into(),
            args: vec!["nginx".into()],
            env: vec!["A=B".into()],
            annotations: [("k".to_string(), "v".to_string())].into(),
            labels: [("app".to_string(), "web".to_string())].into(),
        }
    }

    #[test]
    fn spec_carries_the_script_values() {
        let spec = default_spec(&create());
        assert_eq!(spec["process"]["args"], json!(["nginx"]));
        assert_eq!(spec["process"]["env"][1], "A=B");
        assert_eq!(spec["annotations"], json!({"k": "v"}));
        assert_eq!(spec["hostname"], "web");
        assert_eq!(spec["linux"]["cgroupsPath"], "/mini-runtime/p0/c0");
        let bare = default_spec(&CreateSpec::default());
        assert!(bare.get("annotations").is_none());
    }

    #[test]
    fn container_mirrors_the_spec() {
        let c = create();
        let mut spec = default_spec(&c);
        spec["mounts"][0]["options"] = json!(["ro", 7]);
        let mut ctr = new_container(&c, &spec);
        assert_eq!(ctr.id, "c0");
        assert_eq!(ctr.pod_sandbox_id, "p0");
        assert_eq!(ctr.state, ContainerState::ContainerCreated as i32);
        assert_eq!(ctr.labels["app"], "web");
        assert_eq!(ctr.annotations["k"], "v");
        assert_eq!(ctr.args, ["nginx"]);
        assert_eq!(ctr.env.len(), 2);
        assert_eq!(ctr.mounts.len(), 3);
        assert_eq!(ctr.mounts[0].options, ["ro"]);
        assert_eq!(ctr.mounts[1].destination, "/dev");

        spec["process"]["env"] = json!(["X=1"]);
        spec.as_object_mut().unwrap().remove("annotations");
        refresh_from_spec(&mut ctr, &spec);
        assert_eq!(ctr.env, ["X=1"]);
        assert!(ctr.annotations.is_empty());
        assert_eq!(ctr.name, "web");
    }
}
