//! Reconstructing v0.1 requests from NRI pods and containers.

use std::collections::BTreeMap;

use nri_stub::api::{Container, LinuxNamespace, LinuxResources, PodSandbox};
use serde_json::Value;

use crate::v01::{Request, Spec, State};

/// The pod or container a request is about, before the per-plugin fields.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Container or pod id.
    pub id: String,
    /// Process id (0: none).
    pub pid: u32,
    /// Its spec.
    pub spec: Spec,
    /// The pod id.
    pub sandbox_id: String,
    /// The pod labels.
    pub labels: BTreeMap<String, String>,
}

impl Subject {
    /// A pod sandbox: its annotations, namespaces, resources and cgroups path.
    pub fn pod(pod: &PodSandbox) -> Subject {
        let linux = pod.linux.as_ref();
        Subject {
            id: pod.id.clone(),
            pid: pod.pid,
            spec: spec(
                &pod.annotations,
                linux.map(|l| l.namespaces.as_slice()).unwrap_or_default(),
                linux.and_then(|l| l.resources.as_ref()),
                linux.map(|l| l.cgroups_path.as_str()).unwrap_or_default(),
            ),
            sandbox_id: pod.id.clone(),
            labels: pod.labels.clone(),
        }
    }

    /// A container of `pod`.
    pub fn container(pod: &PodSandbox, ctr: &Container) -> Subject {
        let linux = ctr.linux.as_ref();
        Subject {
            id: ctr.id.clone(),
            pid: ctr.pid,
            spec: spec(
                &ctr.annotations,
                linux.map(|l| l.namespaces.as_slice()).unwrap_or_default(),
                linux.and_then(|l| l.resources.as_ref()),
                linux.map(|l| l.cgroups_path.as_str()).unwrap_or_default(),
            ),
            sandbox_id: pod.id.clone(),
            labels: pod.labels.clone(),
        }
    }

    /// The request for `state`, before any plugin's `conf` and results.
    ///
    /// ```
    /// use nri_plugin_v010_adapter::request::Subject;
    /// use nri_plugin_v010_adapter::v01::State;
    /// use nri_stub::api::PodSandbox;
    ///
    /// let pod = PodSandbox { id: "pod0".into(), pid: 42, ..Default::default() };
    /// let req = Subject::pod(&pod).request("0.1", State::Create);
    /// assert_eq!(
    ///     serde_json::to_string(&req).unwrap(),
    ///     r#"{"version":"0.1","state":"create","id":"pod0","sandboxID":"pod0","pid":42,"spec":{"resources":null}}"#
    /// );
    /// ```
    pub fn request(&self, version: &str, state: State) -> Request {
        Request {
            conf: None,
            version: version.to_string(),
            state,
            id: self.id.clone(),
            sandbox_id: self.sandbox_id.clone(),
            pid: i64::from(self.pid),
            spec: self.spec.clone(),
            labels: self.labels.clone(),
            results: Vec::new(),
        }
    }
}

fn spec(
    annotations: &BTreeMap<String, String>,
    namespaces: &[LinuxNamespace],
    resources: Option<&LinuxResources>,
    cgroups_path: &str,
) -> Spec {
    Spec {
        resources: resources.map_or(Value::Null, nri_oci::convert::linux_resources),
        namespaces: namespaces
            .iter()
            .map(|ns| (ns.r#type.clone(), ns.path.clone()))
            .collect(),
        cgroups_path: cgroups_path.to_string(),
        annotations: annotations.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::{opt, LinuxContainer, LinuxCpu};
    use serde_json::json;

    #[test]
    fn container_request_carries_the_linux_data() {
        let pod = PodSandbox {
            id: "pod0".into(),
            labels: BTreeMap::from([("app".into(), "redis".into())]),
            ..Default::default()
        };
        let ctr = Container {
            id: "redis".into(),
            pid: 1234,
            annotations: BTreeMap::from([("qos.class".into(), "ls".into())]),
            linux: Some(LinuxContainer {
                namespaces: vec![
                    LinuxNamespace {
                        r#type: "pid".into(),
                        path: "/proc/44/ns/pid".into(),
                    },
                    LinuxNamespace {
                        r#type: "network".into(),
                        path: String::new(),
                    },
                ],
                resources: Some(LinuxResources {
                    cpu: Some(LinuxCpu {
                        quota: opt(20000),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                cgroups_path: "default/redis".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = Subject::container(&pod, &ctr).request("0.1", State::Delete);
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({
                "version": "0.1", "state": "delete", "id": "redis", "sandboxID": "pod0",
                "pid": 1234,
                "spec": {
                    "resources": {"memory": {}, "cpu": {"quota": 20000}},
                    "namespaces": {"pid": "/proc/44/ns/pid", "network": ""},
                    "cgroupsPath": "default/redis",
                    "annotations": {"qos.class": "ls"}
                },
                "labels": {"app": "redis"}
            })
        );
    }
}
