//! The event handlers of the `Plugin` trait and the event each one subscribes to.

/// Handler method name → variant of `nri_api::Event` it handles.
///
/// `configure`, `synchronize` and `shutdown` are requests, not events: they do not
/// appear here and do not count as implemented events.
pub(crate) const EVENT_HANDLERS: &[(&str, &str)] = &[
    ("run_pod_sandbox", "RunPodSandbox"),
    ("stop_pod_sandbox", "StopPodSandbox"),
    ("remove_pod_sandbox", "RemovePodSandbox"),
    ("create_container", "CreateContainer"),
    ("post_create_container", "PostCreateContainer"),
    ("start_container", "StartContainer"),
    ("post_start_container", "PostStartContainer"),
    ("update_container", "UpdateContainer"),
    ("post_update_container", "PostUpdateContainer"),
    ("stop_container", "StopContainer"),
    ("remove_container", "RemoveContainer"),
    ("update_pod_sandbox", "UpdatePodSandbox"),
    ("post_update_pod_sandbox", "PostUpdatePodSandbox"),
    (
        "validate_container_adjustment",
        "ValidateContainerAdjustment",
    ),
];

/// The event variant handled by the method `name`, if it is an event handler.
pub(crate) fn event_for(name: &str) -> Option<&'static str> {
    EVENT_HANDLERS
        .iter()
        .find(|(method, _)| *method == name)
        .map(|(_, event)| *event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_not_events() {
        assert_eq!(event_for("configure"), None);
        assert_eq!(event_for("synchronize"), None);
        assert_eq!(event_for("shutdown"), None);
    }

    #[test]
    fn every_event_has_one_handler() {
        assert_eq!(EVENT_HANDLERS.len(), 14);
        let mut events: Vec<_> = EVENT_HANDLERS.iter().map(|(_, e)| *e).collect();
        events.sort_unstable();
        events.dedup();
        assert_eq!(events.len(), 14);
        assert_eq!(event_for("create_container"), Some("CreateContainer"));
    }
}
