//! [`Subject`]: the pod and container an event request is about, for logs
//! and traces.

use crate::*;

/// The pod and container a request is about (empty strings for neither),
/// as logs and trace spans name them.
///
/// ```
/// use nri_api::{Container, CreateContainerRequest, PodSandbox, Subject};
///
/// let req = CreateContainerRequest {
///     pod: Some(PodSandbox { id: "pod0".into(), ..Default::default() }),
///     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
/// };
/// assert_eq!((req.pod_id(), req.container_id()), ("pod0", "ctr0"));
/// assert_eq!(nri_api::ConfigureRequest::default().pod_id(), "");
/// ```
pub trait Subject {
    /// The pod's id, or `""`.
    fn pod_id(&self) -> &str {
        ""
    }
    /// The container's id, or `""`.
    fn container_id(&self) -> &str {
        ""
    }
}

macro_rules! subject {
    (none: $($t:ty),*) => { $(impl Subject for $t {})* };
    (pod: $($t:ty),*) => {
        $(impl Subject for $t {
            fn pod_id(&self) -> &str {
                self.pod.as_ref().map_or("", |p| p.id.as_str())
            }
        })*
    };
    (container: $($t:ty),*) => {
        $(impl Subject for $t {
            fn pod_id(&self) -> &str {
                self.pod.as_ref().map_or("", |p| p.id.as_str())
            }
            fn container_id(&self) -> &str {
                self.container.as_ref().map_or("", |c| c.id.as_str())
            }
        })*
    };
}

subject!(none: ConfigureRequest, SynchronizeRequest, Empty);
subject!(pod: RunPodSandboxRequest, UpdatePodSandboxRequest, PostUpdatePodSandboxRequest,
    StopPodSandboxRequest, RemovePodSandboxRequest);
subject!(container: CreateContainerRequest, PostCreateContainerRequest, StartContainerRequest,
    PostStartContainerRequest, UpdateContainerRequest, PostUpdateContainerRequest,
    StopContainerRequest, RemoveContainerRequest, ValidateContainerAdjustmentRequest,
    StateChangeEvent);
