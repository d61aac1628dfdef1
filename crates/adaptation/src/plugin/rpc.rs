//! [`Rpc`]: the static description of each event's request type, so one
//! generic call path serves every event and every kind of plugin.

use nri_api::service::plugin as method;
use nri_api::*;
use nri_ttrpc::BoxFuture;

use crate::adaptation_error::BoxError;
use crate::backlog::Queued;
use crate::builtin::BuiltinPlugin;

/// An event request sent to plugins.
pub(crate) trait Rpc: prost::Message + nri_api::Subject + Send + Sync + 'static {
    /// The event (and subscription bit) of the request.
    const EVENT: Event;
    /// The ttRPC method; also the event's name in logs and metrics.
    const METHOD: &'static str;
    /// Old plugins receive this event through StateChange.
    const LEGACY: bool;
    /// The reply type.
    type Response: prost::Message + Default + Send + 'static;

    /// The StateChange form of the request (only for `LEGACY` events).
    fn state_change(&self) -> StateChangeEvent;

    /// The event as queued for plugins that are synchronizing; `None` for
    /// requests that are never queued.
    fn queued(&self) -> Option<Queued>;

    /// Calls the matching handler of a builtin plugin.
    fn builtin<'a>(
        plugin: &'a dyn BuiltinPlugin,
        req: &'a Self,
    ) -> BoxFuture<'a, Result<Self::Response, BoxError>>;
}

macro_rules! rpc {
    ($req:ty => $resp:ty, $event:ident, $method:ident, $handler:ident, $legacy:tt) => {
        impl Rpc for $req {
            const EVENT: Event = Event::$event;
            const METHOD: &'static str = method::$method;
            const LEGACY: bool = rpc!(@legacy $legacy);
            type Response = $resp;

            fn state_change(&self) -> StateChangeEvent {
                rpc!(@state self, $event, $legacy)
            }

            fn queued(&self) -> Option<Queued> {
                Some(Queued::$event(self.clone()))
            }

            fn builtin<'a>(
                plugin: &'a dyn BuiltinPlugin,
                req: &'a Self,
            ) -> BoxFuture<'a, Result<Self::Response, BoxError>> {
                plugin.$handler(req)
            }
        }
    };
    (@legacy pod) => { true };
    (@legacy container) => { true };
    (@legacy none) => { false };
    (@state $s:ident, $event:ident, pod) => {
        StateChangeEvent {
            event: Event::$event as i32,
            pod: $s.pod.clone(),
            container: None,
        }
    };
    (@state $s:ident, $event:ident, container) => {
        StateChangeEvent {
            event: Event::$event as i32,
            pod: $s.pod.clone(),
            container: $s.container.clone(),
        }
    };
    (@state $s:ident, $event:ident, none) => {{
        let _ = $s;
        StateChangeEvent {
            event: Event::$event as i32,
            ..Default::default()
        }
    }};
}

rpc!(RunPodSandboxRequest => RunPodSandboxResponse, RunPodSandbox, RUN_POD_SANDBOX, run_pod_sandbox, pod);
rpc!(UpdatePodSandboxRequest => UpdatePodSandboxResponse, UpdatePodSandbox, UPDATE_POD_SANDBOX, update_pod_sandbox, none);
rpc!(PostUpdatePodSandboxRequest => PostUpdatePodSandboxResponse, PostUpdatePodSandbox, POST_UPDATE_POD_SANDBOX, post_update_pod_sandbox, pod);
rpc!(StopPodSandboxRequest => StopPodSandboxResponse, StopPodSandbox, STOP_POD_SANDBOX, stop_pod_sandbox, pod);
rpc!(RemovePodSandboxRequest => RemovePodSandboxResponse, RemovePodSandbox, REMOVE_POD_SANDBOX, remove_pod_sandbox, pod);
rpc!(CreateContainerRequest => CreateContainerResponse, CreateContainer, CREATE_CONTAINER, create_container, none);
rpc!(PostCreateContainerRequest => PostCreateContainerResponse, PostCreateContainer, POST_CREATE_CONTAINER, post_create_container, container);
rpc!(StartContainerRequest => StartContainerResponse, StartContainer, START_CONTAINER, start_container, container);
rpc!(PostStartContainerRequest => PostStartContainerResponse, PostStartContainer, POST_START_CONTAINER, post_start_container, container);
rpc!(UpdateContainerRequest => UpdateContainerResponse, UpdateContainer, UPDATE_CONTAINER, update_container, none);
rpc!(PostUpdateContainerRequest => PostUpdateContainerResponse, PostUpdateContainer, POST_UPDATE_CONTAINER, post_update_container, container);
rpc!(StopContainerRequest => StopContainerResponse, StopContainer, STOP_CONTAINER, stop_container, none);
rpc!(RemoveContainerRequest => RemoveContainerResponse, RemoveContainer, REMOVE_CONTAINER, remove_container, container);

impl Rpc for ValidateContainerAdjustmentRequest {
    const EVENT: Event = Event::ValidateContainerAdjustment;
    const METHOD: &'static str = method::VALIDATE_CONTAINER_ADJUSTMENT;
    const LEGACY: bool = false;
    type Response = ValidateContainerAdjustmentResponse;

    fn state_change(&self) -> StateChangeEvent {
        StateChangeEvent {
            event: Event::ValidateContainerAdjustment as i32,
            ..Default::default()
        }
    }

    /// Validation belongs to its CreateContainer call.
    fn queued(&self) -> Option<Queued> {
        None
    }

    /// A builtin validator's error rejects the adjustment, with the error
    /// text as reason.
    fn builtin<'a>(
        plugin: &'a dyn BuiltinPlugin,
        req: &'a Self,
    ) -> BoxFuture<'a, Result<Self::Response, BoxError>> {
        Box::pin(async move {
            Ok(match plugin.validate_container_adjustment(req).await {
                Ok(reply) => reply,
                Err(e) => ValidateContainerAdjustmentResponse {
                    reject: true,
                    reason: e.to_string(),
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_events_are_the_nine_notifications() {
        fn legacy<R: Rpc>() -> bool {
            R::LEGACY
        }
        assert!(legacy::<RunPodSandboxRequest>());
        assert!(legacy::<RemoveContainerRequest>());
        assert!(!legacy::<CreateContainerRequest>());
        assert!(!legacy::<UpdatePodSandboxRequest>());
        assert!(!legacy::<ValidateContainerAdjustmentRequest>());
    }

    #[test]
    fn state_change_carries_pod_and_container() {
        let req = StartContainerRequest {
            pod: Some(PodSandbox {
                id: "pod".into(),
                ..Default::default()
            }),
            container: Some(Container {
                id: "ctr".into(),
                ..Default::default()
            }),
        };
        let ev = req.state_change();
        assert_eq!(ev.event, Event::StartContainer as i32);
        assert_eq!(ev.container.unwrap().id, "ctr");
        let ev = StopPodSandboxRequest { pod: req.pod }.state_change();
        assert_eq!(ev.event, Event::StopPodSandbox as i32);
        assert_eq!(ev.pod.unwrap().id, "pod");
        assert!(ev.container.is_none());
    }

    #[test]
    fn methods_are_the_event_names() {
        assert_eq!(
            CreateContainerRequest::METHOD,
            Event::CreateContainer.pretty_name()
        );
        assert_eq!(
            ValidateContainerAdjustmentRequest::METHOD,
            Event::ValidateContainerAdjustment.pretty_name()
        );
    }
}
