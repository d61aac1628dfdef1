//! What an OCI bundle's spec says about NRI: which pod a container belongs
//! to (from the annotations CRI runtimes and podman write), and the
//! container and pod as plugins see them.

use std::collections::BTreeMap;

use nri_api::{
    Container, ContainerState, LinuxCpu, LinuxMemory, LinuxPids, LinuxResources, Mount,
    OptionalInt64, OptionalUInt64, PodSandbox, PosixRlimit,
};
use serde::Deserialize;
use serde_json::Value;

/// containerd's CRI annotations.
pub mod cri {
    /// `sandbox` or `container`.
    pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
    /// The pod's sandbox id.
    pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";
    /// The pod's name.
    pub const SANDBOX_NAME: &str = "io.kubernetes.cri.sandbox-name";
    /// The pod's namespace.
    pub const SANDBOX_NAMESPACE: &str = "io.kubernetes.cri.sandbox-namespace";
    /// The pod's uid.
    pub const SANDBOX_UID: &str = "io.kubernetes.cri.sandbox-uid";
    /// The container's name.
    pub const CONTAINER_NAME: &str = "io.kubernetes.cri.container-name";
}

/// CRI-O's annotations (also written by podman).
pub mod crio {
    /// `sandbox` or `container`.
    pub const CONTAINER_TYPE: &str = "io.kubernetes.cri-o.ContainerType";
    /// The pod's sandbox (podman: infra container) id.
    pub const SANDBOX_ID: &str = "io.kubernetes.cri-o.SandboxID";
    /// The pod's name.
    pub const SANDBOX_NAME: &str = "io.kubernetes.cri-o.SandboxName";
    /// The container's name.
    pub const CONTAINER_NAME: &str = "io.kubernetes.cri-o.ContainerName";
    /// The pod's namespace (kubelet label copied as annotation).
    pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
    /// The pod's name (kubelet label copied as annotation).
    pub const POD_NAME: &str = "io.kubernetes.pod.name";
    /// The pod's uid (kubelet label copied as annotation).
    pub const POD_UID: &str = "io.kubernetes.pod.uid";
}

/// Where a new container goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The pod (complete for a sandbox or an own pod; for a member, what
    /// the annotations tell, used if the pod is not known yet).
    pub pod: PodSandbox,
    /// The container is the pod's sandbox (CRI sandbox, podman infra
    /// container): it is the pod, not a container plugins see.
    pub sandbox: bool,
    /// The container has no pod: it is its own, as moby does.
    pub own_pod: bool,
    /// The container's name.
    pub name: String,
}

fn annotations(spec: &Value) -> BTreeMap<String, String> {
    spec.get("annotations")
        .and_then(|v| BTreeMap::deserialize(v).ok())
        .unwrap_or_default()
}

/// A list of strings; anything else (a spec the runtime would refuse
/// anyway) reads as empty.
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(|v| Vec::deserialize(v).ok()).unwrap_or_default()
}

fn cgroups_path(spec: &Value) -> &str {
    spec.pointer("/linux/cgroupsPath")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The podman pod id in a cgroups path: `/libpod_parent/<pod>/libpod-<ctr>`
/// (cgroupfs) or `machine-libpod_pod_<pod>.slice:libpod:<ctr>` (systemd).
pub fn podman_pod_id(cgroups_path: &str) -> Option<&str> {
    if let Some(rest) = cgroups_path.strip_prefix("/libpod_parent/") {
        let (pod, ctr) = rest.split_once('/')?;
        return (ctr.starts_with("libpod-") && !pod.is_empty()).then_some(pod);
    }
    let start = cgroups_path.find("libpod_pod_")? + "libpod_pod_".len();
    let rest = &cgroups_path[start..];
    let end = rest.find(".slice")?;
    Some(&rest[..end]).filter(|p| !p.is_empty())
}

/// Whether the spec runs podman's pause process (`catatonit -P`).
fn is_podman_infra(spec: &Value) -> bool {
    let args = strings(spec.pointer("/process/args"));
    args.first().is_some_and(|a| a.ends_with("catatonit")) && args.iter().any(|a| a == "-P")
}

/// Decides which pod the container `id` with `spec` belongs to.
///
/// ```
/// use nri_hostd::spec::placement;
/// use serde_json::json;
///
/// let spec = json!({"annotations": {
///     "io.kubernetes.cri.container-type": "container",
///     "io.kubernetes.cri.sandbox-id": "sb1",
///     "io.kubernetes.cri.container-name": "web"}});
/// let p = placement("c1", &spec);
/// assert_eq!(p.pod.id, "sb1");
/// assert_eq!(p.name, "web");
/// assert!(!p.sandbox && !p.own_pod);
///
/// let bare = placement("c2", &json!({"hostname": "box"}));
/// assert!(bare.own_pod);
/// assert_eq!(bare.pod.id, "c2");
/// ```
pub fn placement(id: &str, spec: &Value) -> Placement {
    let ann = annotations(spec);
    let get = |k: &str| ann.get(k).cloned().unwrap_or_default();
    let hostname = spec
        .get("hostname")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = [cri::CONTAINER_NAME, crio::CONTAINER_NAME]
        .iter()
        .map(|k| get(k))
        .find(|n| !n.is_empty())
        .or_else(|| Some(hostname.clone()).filter(|h| !h.is_empty()))
        .unwrap_or_else(|| id.to_string());
    let kind = [cri::CONTAINER_TYPE, crio::CONTAINER_TYPE]
        .iter()
        .map(|k| get(k))
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    let pod_name = [cri::SANDBOX_NAME, crio::SANDBOX_NAME, crio::POD_NAME]
        .iter()
        .map(|k| get(k))
        .find(|n| !n.is_empty());
    let namespace = [cri::SANDBOX_NAMESPACE, crio::POD_NAMESPACE]
        .iter()
        .map(|k| get(k))
        .find(|n| !n.is_empty())
        .unwrap_or_default();
    let uid = [cri::SANDBOX_UID, crio::POD_UID]
        .iter()
        .map(|k| get(k))
        .find(|n| !n.is_empty());
    let podman_pod = podman_pod_id(cgroups_path(spec)).map(String::from);
    let linux = |spec: &Value| {
        Some(nri_api::LinuxPodSandbox {
            cgroups_path: cgroups_path(spec).to_string(),
            ..Default::default()
        })
    };
    let pod = |pid: String, sandbox_name: Option<String>, annotations| PodSandbox {
        id: pid.clone(),
        name: pod_name
            .clone()
            .or(sandbox_name)
            .unwrap_or_else(|| pid.clone()),
        uid: uid.clone().or_else(|| podman_pod.clone()).unwrap_or(pid),
        namespace: namespace.clone(),
        annotations,
        linux: linux(spec),
        ..Default::default()
    };
    let sandbox = kind == "sandbox" || (kind.is_empty() && is_podman_infra(spec));
    if sandbox {
        return Placement {
            pod: pod(id.to_string(), Some(hostname), ann),
            sandbox: true,
            own_pod: false,
            name,
        };
    }
    let sandbox_id = [cri::SANDBOX_ID, crio::SANDBOX_ID]
        .iter()
        .map(|k| get(k))
        .find(|s| !s.is_empty() && s != id);
    match sandbox_id {
        Some(sid) => Placement {
            pod: pod(sid, None, BTreeMap::new()),
            sandbox: false,
            own_pod: false,
            name,
        },
        None => Placement {
            pod: pod(id.to_string(), Some(name.clone()), ann),
            sandbox: false,
            own_pod: true,
            name,
        },
    }
}

/// The container as plugins see it at CreateContainer: id, pod, name and
/// what the spec holds (annotations, args, env, mounts, rlimits, resources,
/// cgroups path).
pub fn container(id: &str, pod_id: &str, name: &str, spec: &Value) -> Container {
    let mut ctr = Container {
        id: id.to_string(),
        pod_sandbox_id: pod_id.to_string(),
        name: name.to_string(),
        state: ContainerState::ContainerCreated as i32,
        ..Container::default()
    };
    refresh(&mut ctr, spec);
    ctr
}

/// Copies what `spec` holds into `ctr`, so later events carry what
/// plugins changed.
pub fn refresh(ctr: &mut Container, spec: &Value) {
    ctr.annotations = annotations(spec);
    ctr.args = strings(spec.pointer("/process/args"));
    ctr.env = strings(spec.pointer("/process/env"));
    ctr.mounts = spec
        .get("mounts")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(mount).collect())
        .unwrap_or_default();
    ctr.rlimits = spec
        .pointer("/process/rlimits")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|r| PosixRlimit {
                    r#type: str_at(r, "type"),
                    hard: r.get("hard").and_then(Value::as_u64).unwrap_or_default(),
                    soft: r.get("soft").and_then(Value::as_u64).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let linux = ctr.linux.get_or_insert_with(Default::default);
    linux.cgroups_path = cgroups_path(spec).to_string();
    linux.resources = spec.pointer("/linux/resources").map(resources);
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn mount(m: &Value) -> Mount {
    Mount {
        destination: str_at(m, "destination"),
        r#type: str_at(m, "type"),
        source: str_at(m, "source"),
        options: strings(m.get("options")),
    }
}

/// The CPU, memory and pids settings of OCI `linux.resources` JSON as NRI
/// resources (what UpdateContainer and the container listing carry).
///
/// ```
/// use serde_json::json;
/// let r = nri_hostd::spec::resources(&json!({"cpu": {"shares": 512, "cpus": "0"},
///                                             "memory": {"limit": 1048576}}));
/// assert_eq!(r.cpu.unwrap().shares.unwrap().value, 512);
/// assert_eq!(r.memory.unwrap().limit.unwrap().value, 1048576);
/// ```
pub fn resources(r: &Value) -> LinuxResources {
    let i64_at = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_i64)
            .map(|value| OptionalInt64 { value })
    };
    let u64_at = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .map(|value| OptionalUInt64 { value })
    };
    let cpu = r.get("cpu").filter(|c| c.is_object()).map(|c| LinuxCpu {
        shares: u64_at(c, "shares"),
        quota: i64_at(c, "quota"),
        period: u64_at(c, "period"),
        realtime_runtime: i64_at(c, "realtimeRuntime"),
        realtime_period: u64_at(c, "realtimePeriod"),
        cpus: str_at(c, "cpus"),
        mems: str_at(c, "mems"),
    });
    let memory = r
        .get("memory")
        .filter(|m| m.is_object())
        .map(|m| LinuxMemory {
            limit: i64_at(m, "limit"),
            reservation: i64_at(m, "reservation"),
            swap: i64_at(m, "swap"),
            kernel: i64_at(m, "kernel"),
            kernel_tcp: i64_at(m, "kernelTCP"),
            swappiness: u64_at(m, "swappiness"),
            ..Default::default()
        });
    let pids = r
        .get("pids")
        .and_then(|p| p.get("limit"))
        .and_then(Value::as_i64)
        .map(|limit| LinuxPids { limit });
    LinuxResources {
        cpu,
        memory,
        pids,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn podman_specs() {
        assert_eq!(podman_pod_id("/libpod_parent/abc/libpod-123"), Some("abc"));
        assert_eq!(podman_pod_id("/libpod_parent/libpod-123"), None);
        assert_eq!(
            podman_pod_id("machine-libpod_pod_abc.slice:libpod:123"),
            Some("abc")
        );
        // A plain `podman run`: its own pod, named after the hostname.
        let plain = json!({"hostname": "web", "linux": {"cgroupsPath": "/libpod_parent/libpod-c1"},
            "annotations": {"io.container.manager": "libpod"}});
        let p = placement("c1", &plain);
        assert!(p.own_pod && !p.sandbox);
        assert_eq!((p.pod.id.as_str(), p.name.as_str()), ("c1", "web"));
        assert_eq!(p.pod.annotations["io.container.manager"], "libpod");
        // A pod's infra container, then an app container naming it.
        let infra = json!({"hostname": "mypod", "process": {"args": ["/catatonit", "-P"]},
            "linux": {"cgroupsPath": "/libpod_parent/pod9/libpod-i1"}});
        let p = placement("i1", &infra);
        assert!(p.sandbox);
        assert_eq!((p.pod.id.as_str(), p.pod.uid.as_str()), ("i1", "pod9"));
        assert_eq!(p.pod.name, "mypod");
        let app = json!({"annotations": {"io.kubernetes.cri-o.ContainerType": "container",
            "io.kubernetes.cri-o.SandboxID": "i1"},
            "linux": {"cgroupsPath": "/libpod_parent/pod9/libpod-a1"}});
        let p = placement("a1", &app);
        assert!(!p.sandbox && !p.own_pod);
        assert_eq!(p.pod.id, "i1");
    }

    #[test]
    fn cri_sandbox() {
        let spec = json!({"annotations": {"io.kubernetes.cri.container-type": "sandbox",
            "io.kubernetes.cri.sandbox-name": "nginx", "io.kubernetes.cri.sandbox-namespace": "default",
            "io.kubernetes.cri.sandbox-uid": "u1"}});
        let p = placement("sb", &spec);
        assert!(p.sandbox);
        assert_eq!(p.pod.name, "nginx");
        assert_eq!(p.pod.namespace, "default");
        assert_eq!(p.pod.uid, "u1");
    }

    #[test]
    fn container_mirrors_spec_and_tolerates_wrong_types() {
        let spec = json!({"process": {"args": ["sh", 3], "env": ["A=1"],
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 5}]},
            "mounts": [{"destination": "/proc", "type": "proc"}, "bogus"],
            "annotations": {"a": "b", "n": 1},
            "linux": {"resources": {"pids": {"limit": 7}, "cpu": "bad"}}});
        let c = container("c", "p", "n", &spec);
        assert!(
            c.args.is_empty(),
            "a list with a number is no list of strings"
        );
        assert_eq!(c.env, ["A=1"]);
        assert_eq!(c.rlimits[0].hard, 10);
        assert_eq!(c.mounts.len(), 2);
        assert!(c.annotations.is_empty());
        let r = c.linux.unwrap().resources.unwrap();
        assert_eq!(r.pids.unwrap().limit, 7);
        assert!(r.cpu.is_none());
        // Nothing at all is fine too.
        let empty = container("c", "p", "n", &json!(null));
        assert!(empty.args.is_empty());
    }
}
