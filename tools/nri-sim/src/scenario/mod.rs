//! The scenario file: what the simulated runtime runs (plugins, pods,
//! containers) and the script of lifecycle steps, with expectations.

mod expect;
mod load;
mod model;
mod step;

pub use expect::StepExpect;
pub use load::{load_file, load_str, ScenarioError};
pub use model::{
    AdjustSpec, BuiltinSpec, ContainerSpec, HandlerSpec, HookSpec, HooksSpec, MountSpec,
    PluginSpec, PodSpec, ResourcesSpec, RlimitSpec, RuntimeSpec, SampleName, Scenario,
    TimeoutsSpec, UpdateSpec, ValidateSpec,
};
pub use step::{Action, Step};

/// The demo scenario run when no scenario file is given.
pub const DEMO: &str = include_str!("../../scenarios/demo.yaml");
