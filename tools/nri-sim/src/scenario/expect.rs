//! `expect` blocks: what a step or the final state must look like.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::model::ResourcesSpec;

/// Checks of a step (or, at the end, of a container's adjusted spec).
///
/// The spec checks (`annotations`, `env`, `mounts`, `hooks`, `resources`,
/// `spec`, `state`) look at the step's container after the step. The other
/// checks are about the step itself and cannot be used at the end.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StepExpect {
    /// The step must fail with an error containing this text.
    #[serde(default)]
    pub error: Option<String>,
    /// Plugins (base or full names) that must have been called.
    #[serde(default)]
    pub called: Vec<String>,
    /// Plugins that must not have been called.
    #[serde(default)]
    pub not_called: Vec<String>,
    /// Plugins expected to fail or time out in this step (otherwise a
    /// failing plugin fails the run).
    #[serde(default)]
    pub plugin_failures: Vec<String>,
    /// Containers (names or ids) that must have been updated in this step.
    #[serde(default)]
    pub updated: Vec<String>,
    /// Containers (names or ids) that must have been evicted in this step.
    #[serde(default)]
    pub evicted: Vec<String>,
    /// Owners of adjusted fields: `annotations/<key>`, `env/<name>`,
    /// `mounts/<destination>` or a field name such as `MemLimit`, mapped to
    /// the plugin (base or full name) that must own it.
    #[serde(default)]
    pub owners: BTreeMap<String, String>,
    /// Annotations the spec must have (`null`: must not have).
    #[serde(default)]
    pub annotations: BTreeMap<String, Option<String>>,
    /// Environment variables the spec must have (`null`: must not have).
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    /// Mount destinations the spec must have.
    #[serde(default)]
    pub mounts: Vec<String>,
    /// Hook paths the spec must have (any stage).
    #[serde(default)]
    pub hooks: Vec<String>,
    /// Linux resources the spec must have (only the fields given).
    #[serde(default)]
    pub resources: Option<ResourcesSpec>,
    /// JSON pointers into the spec (`/process/cwd`) and their values
    /// (`null`: must be absent).
    #[serde(default)]
    pub spec: BTreeMap<String, serde_json::Value>,
    /// The container's state: created, running, stopped, removed, evicted.
    #[serde(default)]
    pub state: Option<String>,
}

/// Checks of a container's final adjusted spec (the spec checks of
/// [`StepExpect`]).
pub type SpecExpect = StepExpect;

impl StepExpect {
    /// Whether any spec check is set.
    pub fn has_spec_checks(&self) -> bool {
        !self.annotations.is_empty()
            || !self.env.is_empty()
            || !self.mounts.is_empty()
            || !self.hooks.is_empty()
            || self.resources.is_some()
            || !self.spec.is_empty()
            || self.state.is_some()
    }

    /// The names of the step-only checks that are set.
    pub fn step_only_checks(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.error.is_some() {
            v.push("error");
        }
        if !self.called.is_empty() {
            v.push("called");
        }
        if !self.not_called.is_empty() {
            v.push("not_called");
        }
        if !self.plugin_failures.is_empty() {
            v.push("plugin_failures");
        }
        if !self.updated.is_empty() {
            v.push("updated");
        }
        if !self.evicted.is_empty() {
            v.push("evicted");
        }
        if !self.owners.is_empty() {
            v.push("owners");
        }
        v
    }
}
