//! One step of the script: an action (`create: app`) plus options.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::expect::StepExpect;
use super::model::ResourcesSpec;

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// RunPodSandbox.
    RunPod(String),
    /// StopPodSandbox.
    StopPod(String),
    /// RemovePodSandbox.
    RemovePod(String),
    /// UpdatePodSandbox (with the step's `resources` and `overhead`), then
    /// PostUpdatePodSandbox.
    UpdatePod(String),
    /// CreateContainer, then PostCreateContainer.
    Create(String),
    /// StartContainer, then PostStartContainer.
    Start(String),
    /// UpdateContainer (with the step's `resources`), then PostUpdateContainer.
    Update(String),
    /// StopContainer.
    Stop(String),
    /// The container exited on its own: an exit notification.
    Exit(String),
    /// RemoveContainer.
    Remove(String),
    /// Wait until plugins asked for `count` container updates on their own.
    WaitUpdate {
        /// How many (default 1).
        count: usize,
    },
    /// Sleep.
    Sleep(Duration),
}

impl Action {
    /// The keyword as written in the scenario.
    pub fn keyword(&self) -> &'static str {
        match self {
            Action::RunPod(_) => "run_pod",
            Action::StopPod(_) => "stop_pod",
            Action::RemovePod(_) => "remove_pod",
            Action::UpdatePod(_) => "update_pod",
            Action::Create(_) => "create",
            Action::Start(_) => "start",
            Action::Update(_) => "update",
            Action::Stop(_) => "stop",
            Action::Exit(_) => "exit",
            Action::Remove(_) => "remove",
            Action::WaitUpdate { .. } => "wait_update",
            Action::Sleep(_) => "sleep",
        }
    }

    /// The pod or container the step is about.
    pub fn target(&self) -> Option<&str> {
        match self {
            Action::RunPod(t)
            | Action::StopPod(t)
            | Action::RemovePod(t)
            | Action::UpdatePod(t)
            | Action::Create(t)
            | Action::Start(t)
            | Action::Update(t)
            | Action::Stop(t)
            | Action::Exit(t)
            | Action::Remove(t) => Some(t),
            Action::WaitUpdate { .. } | Action::Sleep(_) => None,
        }
    }

    /// Whether the target is a container.
    pub fn is_container(&self) -> bool {
        matches!(
            self,
            Action::Create(_)
                | Action::Start(_)
                | Action::Update(_)
                | Action::Stop(_)
                | Action::Exit(_)
                | Action::Remove(_)
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::WaitUpdate { count } => write!(f, "wait_update {count}"),
            Action::Sleep(d) => write!(f, "sleep {d:?}"),
            other => write!(f, "{} {}", other.keyword(), other.target().unwrap_or("")),
        }
    }
}

/// A step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The action.
    pub action: Action,
    /// New resources (`update` and `update_pod` steps).
    pub resources: Option<ResourcesSpec>,
    /// New pod overhead (`update_pod` steps).
    pub overhead: Option<ResourcesSpec>,
    /// Exit code (`exit` steps).
    pub exit_code: i32,
    /// Bound of this step (`wait_update`; otherwise the scenario's step
    /// timeout).
    pub timeout: Option<Duration>,
    /// Checks.
    pub expect: Option<StepExpect>,
}

impl Step {
    /// A step with defaults for everything but the action.
    pub fn new(action: Action) -> Step {
        Step {
            action,
            resources: None,
            overhead: None,
            exit_code: 0,
            timeout: None,
            expect: None,
        }
    }
}

const ACTIONS: &[&str] = &[
    "run_pod",
    "stop_pod",
    "remove_pod",
    "update_pod",
    "create",
    "start",
    "update",
    "stop",
    "exit",
    "remove",
    "wait_update",
    "sleep",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitSpec {
    #[serde(default = "one")]
    count: usize,
}

fn one() -> usize {
    1
}

struct DurationValue(Duration);

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::units::opt_duration(d).map(|d| DurationValue(d.unwrap_or_default()))
    }
}

struct StepVisitor;

impl<'de> Visitor<'de> for StepVisitor {
    type Value = Step;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a step such as `create: app` (actions: {})",
            ACTIONS.join(", ")
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
        let mut action: Option<Action> = None;
        let mut resources = None;
        let mut overhead = None;
        let mut exit_code = 0;
        let mut timeout = None;
        let mut expect = None;
        while let Some(key) = map.next_key::<String>()? {
            let new_action = match key.as_str() {
                "run_pod" => Some(Action::RunPod(map.next_value()?)),
                "stop_pod" => Some(Action::StopPod(map.next_value()?)),
                "remove_pod" => Some(Action::RemovePod(map.next_value()?)),
                "update_pod" => Some(Action::UpdatePod(map.next_value()?)),
                "create" => Some(Action::Create(map.next_value()?)),
                "start" => Some(Action::Start(map.next_value()?)),
                "update" => Some(Action::Update(map.next_value()?)),
                "stop" => Some(Action::Stop(map.next_value()?)),
                "exit" => Some(Action::Exit(map.next_value()?)),
                "remove" => Some(Action::Remove(map.next_value()?)),
                "wait_update" => {
                    let w: Option<WaitSpec> = map.next_value()?;
                    Some(Action::WaitUpdate {
                        count: w.map_or(1, |w| w.count),
                    })
                }
                "sleep" => Some(Action::Sleep(map.next_value::<DurationValue>()?.0)),
                "resources" => {
                    resources = Some(map.next_value()?);
                    None
                }
                "overhead" => {
                    overhead = Some(map.next_value()?);
                    None
                }
                "exit_code" => {
                    exit_code = map.next_value()?;
                    None
                }
                "timeout" => {
                    timeout = Some(map.next_value::<DurationValue>()?.0);
                    None
                }
                "expect" => {
                    expect = Some(map.next_value()?);
                    None
                }
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown step key `{other}`; actions: {}; options: resources, overhead, exit_code, timeout, expect",
                        ACTIONS.join(", ")
                    )))
                }
            };
            if let Some(a) = new_action {
                if let Some(prev) = &action {
                    return Err(de::Error::custom(format!(
                        "a step has one action, found `{}` and `{}` (start a new list item with `-`)",
                        prev.keyword(),
                        key
                    )));
                }
                action = Some(a);
            }
        }
        let action = action.ok_or_else(|| {
            de::Error::custom(format!(
                "step without an action; use one of: {}",
                ACTIONS.join(", ")
            ))
        })?;
        if resources.is_some() && !matches!(action, Action::Update(_) | Action::UpdatePod(_)) {
            return Err(de::Error::custom(
                "`resources` only applies to `update` and `update_pod` steps",
            ));
        }
        if overhead.is_some() && !matches!(action, Action::UpdatePod(_)) {
            return Err(de::Error::custom(
                "`overhead` only applies to `update_pod` steps",
            ));
        }
        Ok(Step {
            action,
            resources,
            overhead,
            exit_code,
            timeout,
            expect,
        })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Step, E> {
        Err(E::custom(format!(
            "step `{v}` needs a target, e.g. `- create: app` (actions: {})",
            ACTIONS.join(", ")
        )))
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
        d.deserialize_any(StepVisitor)
    }
}
