//! The report of a run: what the human output and `--output json` show.
//! The JSON form is a stable interface (`schema: nri-sim/v1`), documented
//! in the README.

use serde::Serialize;
use serde_json::Value;

/// The schema identifier of the JSON report.
pub const SCHEMA: &str = "nri-sim/v1";

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Scenario file, or `<demo>`.
    pub scenario: String,
    /// The scenario's description.
    pub description: String,
    /// Runtime name and version.
    pub runtime: RuntimeInfo,
    /// The plugins that were running after start-up, in index order.
    pub plugins: Vec<PluginReport>,
    /// One entry per step.
    pub steps: Vec<StepReport>,
    /// Updates and evictions plugins asked for on their own.
    pub unsolicited: Vec<AppliedReport>,
    /// Every container, with its adjusted spec.
    pub containers: Vec<ContainerReport>,
    /// The checks of the scenario's top-level `expect`.
    pub checks: Vec<CheckReport>,
    /// Every problem: unexpected step errors, failed checks.
    pub failures: Vec<String>,
    /// No failures.
    pub passed: bool,
}

/// Runtime identity.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeInfo {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// A plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginReport {
    /// `NN-name`.
    pub name: String,
    /// `builtin`, `launched` (a program of the plugin directory), `wasm`
    /// (a WebAssembly module of the plugin directory), `sample` or
    /// `external`.
    pub kind: String,
    /// Subscribed events.
    pub events: Vec<String>,
    /// Whether it was gone by the end of the run (crashed, timed out).
    pub disconnected: bool,
}

/// One step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepReport {
    /// One-based position.
    pub index: usize,
    /// The action keyword (`create`...).
    pub action: String,
    /// The pod or container name.
    pub target: Option<String>,
    /// Whether the runtime's call succeeded.
    pub ok: bool,
    /// Its error.
    pub error: Option<String>,
    /// `conflict`, `validation`, `plugin`, `timeout` or `runtime`.
    pub error_kind: Option<String>,
    /// Plugin calls, in order.
    pub calls: Vec<CallReport>,
    /// Field ownership after the merge (create steps).
    pub changes: Vec<ChangeReport>,
    /// The merged adjustment (create steps), NRI JSON form.
    pub adjustment: Option<Value>,
    /// The resources applied (update steps), NRI JSON form.
    pub resources: Option<Value>,
    /// Validation (create steps with validators).
    pub validation: Option<ValidationReport>,
    /// Updates and evictions applied during the step.
    pub updates: Vec<AppliedReport>,
    /// Plugin calls that failed (errors, timeouts).
    pub plugin_failures: Vec<PluginFailure>,
    /// Extra facts worth knowing.
    pub notes: Vec<String>,
    /// The step's `expect` checks.
    pub checks: Vec<CheckReport>,
    /// Step as expected: no unexpected error, all checks passed.
    pub passed: bool,
}

/// One plugin call.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    /// `NN-name`.
    pub plugin: String,
    /// Event name.
    pub event: String,
    /// Its error.
    pub error: Option<String>,
    /// Number of updates it asked for.
    pub updates: usize,
    /// Number of evictions it asked for.
    pub evictions: usize,
}

/// Which plugin owns an adjusted field.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChangeReport {
    /// `NN-name` (several, comma-separated, for hooks).
    pub plugin: String,
    /// NRI field name (`Annotations`, `Env`, `MemLimit`...).
    pub field: String,
    /// Key within the field (annotation key, variable name, mount path).
    pub key: Option<String>,
}

/// Validation of a new container.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    /// Validator plugins called.
    pub validators: Vec<String>,
    /// `accepted` or `rejected`.
    pub verdict: String,
    /// The rejecting validator.
    pub rejected_by: Option<String>,
    /// Its reason.
    pub reason: Option<String>,
}

/// An update or eviction.
#[derive(Debug, Clone, Serialize)]
pub struct AppliedReport {
    /// Container name.
    pub container: String,
    /// `update` or `eviction`.
    pub kind: String,
    /// The update's resources (NRI JSON form).
    pub resources: Option<Value>,
    /// Eviction reason.
    pub reason: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Evictions: the runtime stopped the container afterwards
    /// (StopContainer reached the plugins).
    pub stopped: bool,
}

/// A failed plugin call.
#[derive(Debug, Clone, Serialize)]
pub struct PluginFailure {
    /// `NN-name`.
    pub plugin: String,
    /// Event.
    pub event: String,
    /// The error.
    pub error: String,
    /// Whether it was a timeout.
    pub timed_out: bool,
    /// Whether the plugin was disconnected as a result.
    pub disconnected: bool,
    /// Whether the scenario expected it.
    pub expected: bool,
    /// The last lines of a launched plugin's standard error, when the
    /// plugin was found gone (its process exited or closed the connection).
    pub stderr: Option<String>,
}

/// One `expect` check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// What was checked, e.g. `annotation demo/owner = "x"`.
    pub check: String,
    /// Whether it held.
    pub ok: bool,
    /// What was found instead.
    pub found: Option<String>,
}

/// A container at the end of the run.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerReport {
    /// Name.
    pub name: String,
    /// Id.
    pub id: String,
    /// Pod name.
    pub pod: String,
    /// State.
    pub state: String,
    /// Eviction reason.
    pub evicted: Option<String>,
    /// The base spec.
    pub base_spec: Value,
    /// The adjusted spec.
    pub spec: Value,
    /// The differences.
    pub diff: Vec<crate::diff::Change>,
}
