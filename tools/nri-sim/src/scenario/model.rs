//! The scenario's data model, as written in YAML.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::expect::SpecExpect;
use super::step::Step;

/// A whole scenario file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text shown in the report.
    #[serde(default)]
    pub description: String,
    /// The runtime name and version plugins see in Configure.
    #[serde(default)]
    pub runtime: RuntimeSpec,
    /// Request, registration and step timeouts.
    #[serde(default)]
    pub timeouts: TimeoutsSpec,
    /// The builtin default validator's configuration (its YAML form).
    #[serde(default)]
    pub default_validator: Option<nri_validator::DefaultValidatorConfig>,
    /// Socket for external plugins; enables them.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// A directory of pre-installed plugins (`NN-name` executables) to launch.
    #[serde(default)]
    pub plugin_dir: Option<PathBuf>,
    /// Their configuration files (`NN-name.conf` or `name.conf`).
    #[serde(default)]
    pub plugin_config_dir: Option<PathBuf>,
    /// The plugins.
    #[serde(default)]
    pub plugins: Vec<PluginSpec>,
    /// The pods.
    #[serde(default)]
    pub pods: Vec<PodSpec>,
    /// The containers.
    #[serde(default)]
    pub containers: Vec<ContainerSpec>,
    /// The script.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Checks of the containers' final adjusted specs, by container name.
    #[serde(default)]
    pub expect: BTreeMap<String, SpecExpect>,
    /// Directory relative paths are resolved against (the file's).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Where the scenario came from (file path or `<demo>`).
    #[serde(skip)]
    pub origin: String,
}

/// Runtime identity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSpec {
    /// Name (default `nri-sim`).
    #[serde(default = "default_runtime_name")]
    pub name: String,
    /// Version (default this program's version).
    #[serde(default = "default_runtime_version")]
    pub version: String,
}

fn default_runtime_name() -> String {
    "nri-sim".into()
}

fn default_runtime_version() -> String {
    env!("CARGO_PKG_VERSION").into()
}

impl Default for RuntimeSpec {
    fn default() -> Self {
        RuntimeSpec {
            name: default_runtime_name(),
            version: default_runtime_version(),
        }
    }
}

/// Timeouts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsSpec {
    /// Deadline of each request to a plugin (default 2s).
    #[serde(default, deserialize_with = "crate::units::opt_duration")]
    pub request: Option<Duration>,
    /// How long a plugin may take to register (default 5s).
    #[serde(default, deserialize_with = "crate::units::opt_duration")]
    pub registration: Option<Duration>,
    /// How long to wait for the declared external plugins to connect
    /// (default 30s).
    #[serde(default, deserialize_with = "crate::units::opt_duration")]
    pub external: Option<Duration>,
    /// Upper bound of one step (default: computed from the request timeout).
    #[serde(default, deserialize_with = "crate::units::opt_duration")]
    pub step: Option<Duration>,
}

/// One plugin: exactly one of `builtin`, `command`, `sample`, `wasm` or
/// `external`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Base name (for `sample` plugins: default the sample's name; for
    /// `wasm` plugins: default the module's file name without `.wasm`).
    #[serde(default)]
    pub name: String,
    /// Two-digit index (default `50`; ignored for external plugins).
    #[serde(default)]
    pub index: Option<String>,
    /// An in-process plugin whose behaviour the scenario declares.
    #[serde(default)]
    pub builtin: Option<BuiltinSpec>,
    /// A program launched as a pre-installed plugin (socket on fd 3,
    /// `NRI_PLUGIN_NAME`/`NRI_PLUGIN_IDX`), with its arguments.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// One of the sample plugins of `plugins/`, run in-process.
    #[serde(default)]
    pub sample: Option<SampleName>,
    /// A WebAssembly plugin module (path relative to the scenario),
    /// loaded by the runtime as a pre-installed plugin.
    #[serde(default)]
    pub wasm: Option<String>,
    /// Arguments of a `sample` plugin (those of its program).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for `command`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Configuration handed to `command`, `sample` and `wasm` plugins in
    /// Configure: a string is sent as is, anything else as JSON.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// A plugin that connects to `socket` on its own; the run waits for it.
    #[serde(default)]
    pub external: bool,
}

/// The name of a sample plugin the simulator can run; checked while the
/// YAML is read, so a wrong name is reported with its line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleName(pub String);

impl<'de> Deserialize<'de> for SampleName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        crate::samples::check(&name).map_err(serde::de::Error::custom)?;
        Ok(SampleName(name))
    }
}

/// Behaviour of a builtin (scenario-declared) plugin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSpec {
    /// Events to subscribe to (NRI names, e.g. `CreateContainer`,
    /// `StopContainer`); default: those with a handler below.
    #[serde(default)]
    pub events: Vec<String>,
    /// Which containers the handlers apply to (names or ids; default all).
    #[serde(default)]
    pub containers: Vec<String>,
    /// CreateContainer.
    #[serde(default)]
    pub create: Option<HandlerSpec>,
    /// UpdateContainer.
    #[serde(default)]
    pub update: Option<HandlerSpec>,
    /// StopContainer.
    #[serde(default)]
    pub stop: Option<HandlerSpec>,
    /// ValidateContainerAdjustment.
    #[serde(default)]
    pub validate: Option<ValidateSpec>,
}

/// What a builtin plugin answers to one event.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerSpec {
    /// Adjustment of the new container (CreateContainer).
    #[serde(default)]
    pub adjust: Option<AdjustSpec>,
    /// Resources of the updated container (UpdateContainer).
    #[serde(default)]
    pub resources: Option<ResourcesSpec>,
    /// Updates of other containers.
    #[serde(default)]
    pub update: Vec<UpdateSpec>,
    /// Containers to evict (name or id → reason).
    #[serde(default)]
    pub evict: BTreeMap<String, String>,
    /// Fail the call with this message.
    #[serde(default)]
    pub error: Option<String>,
    /// Wait this long before answering (to play a slow or hung plugin).
    #[serde(default, deserialize_with = "crate::units::opt_duration")]
    pub delay: Option<Duration>,
}

/// What a builtin validator answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateSpec {
    /// Reject with this reason.
    #[serde(default)]
    pub reject: Option<String>,
    /// Reject adjustments that were made by any plugin other than these.
    #[serde(default)]
    pub required_plugins: Vec<String>,
}

/// A container update requested by a builtin plugin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSpec {
    /// Container name or id.
    pub container: String,
    /// New resources.
    #[serde(default)]
    pub resources: ResourcesSpec,
    /// A failure to apply it is not an error.
    #[serde(default)]
    pub ignore_failure: bool,
}

/// A container adjustment, in readable form.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdjustSpec {
    /// Annotations to add or replace.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Annotations to remove.
    #[serde(default)]
    pub remove_annotations: Vec<String>,
    /// Environment variables to add or replace.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Environment variables to remove.
    #[serde(default)]
    pub remove_env: Vec<String>,
    /// Mounts to add.
    #[serde(default)]
    pub mounts: Vec<MountSpec>,
    /// Mounts to remove, by destination.
    #[serde(default)]
    pub remove_mounts: Vec<String>,
    /// OCI hooks to inject.
    #[serde(default)]
    pub hooks: Option<HooksSpec>,
    /// Replace the command line.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// POSIX rlimits to set.
    #[serde(default)]
    pub rlimits: Vec<RlimitSpec>,
    /// Sysctls to set.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Linux resources.
    #[serde(default)]
    pub resources: Option<ResourcesSpec>,
    /// OOM score adjustment.
    #[serde(default)]
    pub oom_score_adj: Option<i64>,
    /// Anything else, as an NRI `ContainerAdjustment` in its JSON form
    /// (proto field names), merged last.
    #[serde(default)]
    pub nri: Option<serde_json::Value>,
}

/// A mount.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MountSpec {
    /// Path in the container.
    pub destination: String,
    /// Host path or device.
    #[serde(default)]
    pub source: String,
    /// Type (default `bind`).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Options (default `rbind`, `ro`... as given).
    #[serde(default)]
    pub options: Vec<String>,
}

/// OCI hooks by stage.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSpec {
    /// prestart.
    #[serde(default)]
    pub prestart: Vec<HookSpec>,
    /// createRuntime.
    #[serde(default)]
    pub create_runtime: Vec<HookSpec>,
    /// createContainer.
    #[serde(default)]
    pub create_container: Vec<HookSpec>,
    /// startContainer.
    #[serde(default)]
    pub start_container: Vec<HookSpec>,
    /// poststart.
    #[serde(default)]
    pub poststart: Vec<HookSpec>,
    /// poststop.
    #[serde(default)]
    pub poststop: Vec<HookSpec>,
}

/// One OCI hook.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    /// Program.
    pub path: String,
    /// Arguments (including `argv[0]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment (`NAME=value`).
    #[serde(default)]
    pub env: Vec<String>,
}

/// A POSIX rlimit.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RlimitSpec {
    /// Type, e.g. `RLIMIT_NOFILE`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Hard limit.
    pub hard: u64,
    /// Soft limit.
    pub soft: u64,
}

/// Linux resources, in readable form.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourcesSpec {
    /// Memory limit (bytes or `512Mi`).
    #[serde(default, deserialize_with = "crate::units::opt_bytes")]
    pub memory: Option<i64>,
    /// Memory reservation.
    #[serde(default, deserialize_with = "crate::units::opt_bytes")]
    pub memory_reservation: Option<i64>,
    /// Memory + swap limit.
    #[serde(default, deserialize_with = "crate::units::opt_bytes")]
    pub memory_swap: Option<i64>,
    /// CPU shares.
    #[serde(default)]
    pub cpu_shares: Option<u64>,
    /// CPU CFS quota (µs).
    #[serde(default)]
    pub cpu_quota: Option<i64>,
    /// CPU CFS period (µs).
    #[serde(default)]
    pub cpu_period: Option<u64>,
    /// cpuset CPUs (`0-3`).
    #[serde(default)]
    pub cpuset_cpus: Option<String>,
    /// cpuset memory nodes.
    #[serde(default)]
    pub cpuset_mems: Option<String>,
    /// Pids limit.
    #[serde(default)]
    pub pids: Option<i64>,
    /// cgroup v2 unified entries.
    #[serde(default)]
    pub unified: BTreeMap<String, String>,
}

/// A pod sandbox.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSpec {
    /// Name.
    pub name: String,
    /// Id (default: the name).
    #[serde(default)]
    pub id: Option<String>,
    /// UID (default `uid-<name>`).
    #[serde(default)]
    pub uid: Option<String>,
    /// Kubernetes namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Runtime handler.
    #[serde(default)]
    pub runtime_handler: String,
    /// Already running when plugins start (they see it in Synchronize).
    #[serde(default)]
    pub existing: bool,
}

/// A container.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerSpec {
    /// Name.
    pub name: String,
    /// Its pod's name (default: the only pod).
    #[serde(default)]
    pub pod: Option<String>,
    /// Id (default: the name).
    #[serde(default)]
    pub id: Option<String>,
    /// Base OCI spec: a path to a `config.json` (relative to the scenario
    /// file) or an inline mapping. Default: a minimal Linux spec.
    #[serde(default)]
    pub spec: Option<serde_json::Value>,
    /// Command line (replaces the spec's).
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Environment added to the spec's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Annotations added to the spec's.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Resources set in the spec.
    #[serde(default)]
    pub resources: Option<ResourcesSpec>,
    /// Already running when plugins start (they see it in Synchronize).
    #[serde(default)]
    pub existing: bool,
}
