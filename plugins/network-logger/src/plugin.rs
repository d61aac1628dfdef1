//! The network-logger plugin: one log line per pod event with the pod's
//! network namespace and IP addresses.

use nri_stub::api::Event;
use nri_stub::api::{Container, ContainerUpdate, PodSandbox};
use nri_stub::{Context, EventMask, HandlerResult, Plugin};

/// What [`network_namespace`] reports for a pod without a network namespace
/// of its own (one that shares the host's network).
pub const HOST_NETWORK: &str = "<host-network>";

/// The path of the pod's network namespace, or [`HOST_NETWORK`].
pub fn network_namespace(pod: &PodSandbox) -> &str {
    pod.linux
        .iter()
        .flat_map(|l| l.namespaces.iter())
        .find(|ns| ns.r#type == "network")
        .map_or(HOST_NETWORK, |ns| ns.path.as_str())
}

/// `namespace/name: namespace=PATH ips=[IP ...]`, the line logged for a pod.
pub fn describe(pod: &PodSandbox) -> String {
    format!(
        "{}/{}: namespace={} ips=[{}]",
        pod.namespace,
        pod.name,
        network_namespace(pod),
        pod.ips.join(" ")
    )
}

/// The network-logger plugin. It subscribes to RunPodSandbox, StopPodSandbox
/// and RemovePodSandbox and never changes anything.
#[derive(Debug, Default)]
pub struct NetworkLogger;

/// The events the plugin handles.
pub fn events() -> EventMask {
    EventMask::from_events(&[
        Event::RunPodSandbox,
        Event::StopPodSandbox,
        Event::RemovePodSandbox,
    ])
}

#[nri_stub::plugin]
impl Plugin for NetworkLogger {
    async fn configure(
        &self,
        ctx: &Context,
        info: &nri_stub::ConfigureInfo,
    ) -> HandlerResult<EventMask> {
        tracing::info!(
            "connected to {}/{} as {}",
            info.runtime.name,
            info.runtime.version,
            ctx.name()
        );
        Ok(events())
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        tracing::info!(
            "synchronized state with the runtime ({} pods, {} containers)",
            pods.len(),
            containers.len()
        );
        for pod in pods {
            tracing::info!("pod {}", describe(pod));
        }
        Ok(Vec::new())
    }

    async fn shutdown(&self, _ctx: &Context) {
        tracing::info!("runtime shutting down");
    }

    async fn run_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("started pod {}", describe(pod));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("stopped pod {}", describe(pod));
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("removed pod {}", describe(pod));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nri_stub::api::{LinuxNamespace, LinuxPodSandbox};

    use super::*;

    #[test]
    fn host_network_pods_have_no_namespace_path() {
        let mut pod = PodSandbox {
            name: "p".into(),
            namespace: "n".into(),
            linux: Some(LinuxPodSandbox {
                namespaces: vec![LinuxNamespace {
                    r#type: "pid".into(),
                    path: "/proc/1/ns/pid".into(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(network_namespace(&pod), HOST_NETWORK);
        pod.linux = None;
        assert_eq!(describe(&pod), "n/p: namespace=<host-network> ips=[]");
    }

    #[test]
    fn handles_only_pod_lifecycle_events() {
        let mask = events();
        assert!(mask.is_set(Event::RunPodSandbox));
        assert!(mask.is_set(Event::RemovePodSandbox));
        assert!(!mask.is_set(Event::CreateContainer));
        assert!(!mask.is_set(Event::UpdatePodSandbox));
    }
}
