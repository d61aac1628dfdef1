//! The plugin: RunPodSandbox moves the annotated devices into the pod, StopPodSandbox
//! gives them back.

use std::path::PathBuf;

use nri_stub::api::{Event, PodSandbox};
use nri_stub::{ConfigureInfo, Context, EventMask, HandlerResult, Plugin};

use crate::netdevice::{parse_netdevices, NetDevice};
use crate::netlink::{self, NetlinkError};

/// Moves host network devices into pods.
#[derive(Debug, Default)]
pub struct NetDeviceInjector;

/// A pod in the host's network namespace asked for devices.
#[derive(Debug, thiserror::Error)]
#[error("trying to inject network device on host network Pod")]
pub struct HostNetworkPod;

/// The path of the pod's network namespace; `None` for pods on the host network.
pub fn network_namespace(pod: &PodSandbox) -> Option<PathBuf> {
    pod.linux
        .as_ref()?
        .namespaces
        .iter()
        .find(|ns| ns.r#type == "network")
        .map(|ns| PathBuf::from(&ns.path))
        .filter(|p| !p.as_os_str().is_empty())
}

/// Runs `work` on each device in turn on a thread of its own (netlink work blocks and
/// may change the thread's namespace), stopping at the first failure.
async fn for_each_device(
    devices: Vec<NetDevice>,
    ns: PathBuf,
    what: &'static str,
    work: fn(&NetDevice, &std::path::Path) -> Result<(), NetlinkError>,
) -> Result<(), NetlinkError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = devices.iter().try_for_each(|dev| {
            work(dev, &ns).inspect(|()| {
                tracing::info!(device = %dev.name, pod_name = %dev.new_name, netns = %ns.display(), "{what}");
            })
        });
        let _ = tx.send(result);
    });
    rx.await.unwrap_or(Err(NetlinkError::Worker))
}

#[nri_stub::plugin]
impl Plugin for NetDeviceInjector {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        if !info.runtime.capabilities().delivers(Event::RunPodSandbox) {
            tracing::warn!(
                "network-device-injector: runtime {} {} sends no pod events: this plugin moves no device on it",
                info.runtime.name,
                info.runtime.version
            );
        }
        Ok(EventMask::default())
    }

    async fn run_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::debug!(namespace = %pod.namespace, name = %pod.name, "started pod");
        let devices = parse_netdevices(&pod.annotations).inspect_err(|err| {
            tracing::warn!(pod = %pod.name, "refusing pod: {err}");
        })?;
        if devices.is_empty() {
            return Ok(());
        }
        let Some(ns) = network_namespace(pod) else {
            tracing::info!(namespace = %pod.namespace, name = %pod.name, "pod uses the host network namespace");
            return Err(HostNetworkPod.into());
        };
        // As the Go plugin: a device that cannot be moved is logged, the pod still starts.
        if let Err(err) = for_each_device(devices, ns, "injected device", netlink::inject).await {
            tracing::error!(pod = %pod.name, "failed to inject network device: {err}");
        }
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::debug!(namespace = %pod.namespace, name = %pod.name, "stopped pod");
        let devices = parse_netdevices(&pod.annotations)?;
        if devices.is_empty() {
            return Ok(());
        }
        let Some(ns) = network_namespace(pod) else {
            return Ok(());
        };
        if let Err(err) = for_each_device(devices, ns, "released device", netlink::release).await {
            tracing::error!(pod = %pod.name, "failed to release network device: {err}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::{LinuxNamespace, LinuxPodSandbox};

    fn pod(namespaces: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            linux: Some(LinuxPodSandbox {
                namespaces: namespaces
                    .iter()
                    .map(|(t, p)| LinuxNamespace {
                        r#type: t.to_string(),
                        path: p.to_string(),
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn finds_the_network_namespace() {
        let p = pod(&[
            ("ipc", "/proc/1/ns/ipc"),
            ("network", "/var/run/netns/cni-1"),
        ]);
        assert_eq!(
            network_namespace(&p),
            Some(PathBuf::from("/var/run/netns/cni-1"))
        );
        assert_eq!(network_namespace(&pod(&[("network", "")])), None);
        assert_eq!(network_namespace(&pod(&[("ipc", "/x")])), None);
        assert_eq!(network_namespace(&PodSandbox::default()), None);
    }
}
