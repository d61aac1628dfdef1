//! [`WasmEvent`]: the calls a plugin module exports, one per NRI request.

/// One of the request handlers a plugin module exports. Every plugin module
/// must export all of them (as `plugin_<snake case name>`), whether or not
/// it subscribes to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WasmEvent {
    /// `plugin_configure` (`ConfigureRequest` → `ConfigureResponse`).
    Configure,
    /// `plugin_synchronize`.
    Synchronize,
    /// `plugin_shutdown` (`Empty` → `Empty`).
    Shutdown,
    /// `plugin_run_pod_sandbox`.
    RunPodSandbox,
    /// `plugin_update_pod_sandbox`.
    UpdatePodSandbox,
    /// `plugin_post_update_pod_sandbox`.
    PostUpdatePodSandbox,
    /// `plugin_stop_pod_sandbox`.
    StopPodSandbox,
    /// `plugin_remove_pod_sandbox`.
    RemovePodSandbox,
    /// `plugin_create_container`.
    CreateContainer,
    /// `plugin_post_create_container`.
    PostCreateContainer,
    /// `plugin_start_container`.
    StartContainer,
    /// `plugin_post_start_container`.
    PostStartContainer,
    /// `plugin_update_container`.
    UpdateContainer,
    /// `plugin_post_update_container`.
    PostUpdateContainer,
    /// `plugin_stop_container`.
    StopContainer,
    /// `plugin_remove_container`.
    RemoveContainer,
    /// `plugin_state_change` (`StateChangeEvent` → `Empty`).
    StateChange,
    /// `plugin_validate_container_adjustment`.
    ValidateContainerAdjustment,
}

impl WasmEvent {
    /// Every handler, in the order the module's exports are checked.
    pub const ALL: [WasmEvent; 18] = [
        WasmEvent::Configure,
        WasmEvent::Synchronize,
        WasmEvent::Shutdown,
        WasmEvent::RunPodSandbox,
        WasmEvent::UpdatePodSandbox,
        WasmEvent::PostUpdatePodSandbox,
        WasmEvent::StopPodSandbox,
        WasmEvent::RemovePodSandbox,
        WasmEvent::CreateContainer,
        WasmEvent::PostCreateContainer,
        WasmEvent::StartContainer,
        WasmEvent::PostStartContainer,
        WasmEvent::UpdateContainer,
        WasmEvent::PostUpdateContainer,
        WasmEvent::StopContainer,
        WasmEvent::RemoveContainer,
        WasmEvent::StateChange,
        WasmEvent::ValidateContainerAdjustment,
    ];

    /// The name of the module's export for this handler.
    pub fn export_name(self) -> &'static str {
        match self {
            WasmEvent::Configure => "plugin_configure",
            WasmEvent::Synchronize => "plugin_synchronize",
            WasmEvent::Shutdown => "plugin_shutdown",
            WasmEvent::RunPodSandbox => "plugin_run_pod_sandbox",
            WasmEvent::UpdatePodSandbox => "plugin_update_pod_sandbox",
            WasmEvent::PostUpdatePodSandbox => "plugin_post_update_pod_sandbox",
            WasmEvent::StopPodSandbox => "plugin_stop_pod_sandbox",
            WasmEvent::RemovePodSandbox => "plugin_remove_pod_sandbox",
            WasmEvent::CreateContainer => "plugin_create_container",
            WasmEvent::PostCreateContainer => "plugin_post_create_container",
            WasmEvent::StartContainer => "plugin_start_container",
            WasmEvent::PostStartContainer => "plugin_post_start_container",
            WasmEvent::UpdateContainer => "plugin_update_container",
            WasmEvent::PostUpdateContainer => "plugin_post_update_container",
            WasmEvent::StopContainer => "plugin_stop_container",
            WasmEvent::RemoveContainer => "plugin_remove_container",
            WasmEvent::StateChange => "plugin_state_change",
            WasmEvent::ValidateContainerAdjustment => "plugin_validate_container_adjustment",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_declaration_order() {
        for (i, e) in WasmEvent::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(e.export_name().starts_with("plugin_"));
        }
    }
}
