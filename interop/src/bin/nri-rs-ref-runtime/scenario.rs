//! The scenario file (the same JSON `nri-ref-runtime` reads; see
//! `interop/README.md`).

use std::collections::BTreeSet;
use std::path::Path;

use nri_api::{Container, LinuxResources, PodSandbox};
use serde::Deserialize;

/// One runtime scenario: the initial state and the steps to replay.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    pub runtime: Runtime,
    pub registration_timeout_ms: i64,
    pub request_timeout_ms: i64,
    #[serde(deserialize_with = "null_default")]
    pub pods: Vec<PodSandbox>,
    #[serde(deserialize_with = "null_default")]
    pub containers: Vec<Container>,
    #[serde(deserialize_with = "null_default")]
    pub fail_updates: Vec<String>,
    /// Run every step as part of a trace of its own (a new W3C trace context
    /// passed with `nri_adaptation::with_trace_parent`); the step result
    /// records its trace id.
    pub trace: bool,
    #[serde(deserialize_with = "null_default")]
    pub steps: Vec<Step>,
}

/// Name and version reported to plugins in Configure.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Runtime {
    pub name: String,
    pub version: String,
}

/// One replayed operation.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Step {
    pub op: String,
    pub pod: String,
    pub container: String,
    pub count: i64,
    pub timeout_ms: i64,
    pub ms: i64,
    pub linux_resources: Option<LinuxResources>,
    pub overhead_linux_resources: Option<LinuxResources>,
}

/// Go's decoder reads `null` as the zero value.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl Step {
    /// The step's timeout in milliseconds, or `def` when unset.
    pub fn timeout(&self, def: i64) -> i64 {
        if self.timeout_ms > 0 {
            self.timeout_ms
        } else {
            def
        }
    }
}

impl Scenario {
    /// Reads and parses a scenario file; unknown top-level and step fields
    /// are errors. Texts follow `nri-ref-runtime`'s.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let data = std::fs::read(path).map_err(|e| format!("read scenario: {e}"))?;
        let mut s: Scenario = serde_json::from_slice(&data)
            .map_err(|e| format!("parse scenario {}: {e}", path.display()))?;
        if s.runtime.name.is_empty() {
            s.runtime.name = "nri-ref-runtime".into();
        }
        if s.runtime.version.is_empty() {
            s.runtime.version = "v0.0.0".into();
        }
        Ok(s)
    }

    /// Ids of the pods and containers created by a step (RunPodSandbox,
    /// CreateContainer): they join the table only when that step runs.
    pub fn created(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut pods = BTreeSet::new();
        let mut ctrs = BTreeSet::new();
        for st in &self.steps {
            match st.op.as_str() {
                "RunPodSandbox" => {
                    pods.insert(st.pod.clone());
                }
                "CreateContainer" => {
                    ctrs.insert(st.container.clone());
                }
                _ => {}
            }
        }
        (pods, ctrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_readme_form_and_rejects_unknown_fields() {
        let s: Scenario = serde_json::from_str(
            r#"{"pods":[{"id":"pod0","name":"pod0"}],
                "containers":[{"id":"ctr0","pod_sandbox_id":"pod0","state":1,"args":["a"]}],
                "steps":[{"op":"UpdateContainer","container":"ctr0",
                          "linux_resources":{"cpu":{"shares":{"value":512}}}}]}"#,
        )
        .unwrap();
        assert_eq!(s.containers[0].pod_sandbox_id, "pod0");
        let res = s.steps[0].linux_resources.as_ref().unwrap();
        assert_eq!(
            res.cpu.as_ref().unwrap().shares.as_ref().unwrap().value,
            512
        );
        assert_eq!(s.created().1.len(), 0);

        let err =
            serde_json::from_str::<Scenario>(r#"{"steps":[{"op":"x","bogus":1}]}"#).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        assert!(serde_json::from_str::<Scenario>(r#"{"stepz":[]}"#).is_err());
    }
}
