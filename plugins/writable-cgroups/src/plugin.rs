//! The plugin: CreateContainer makes the cgroup mount read-write when asked to.

use nri_plugin_util::{adjuster_plugin, ContainerAdjuster};
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{Adjustment, CreateContainerResult, HandlerResult};

use crate::cgroups::{
    adjustment, find_cgroups_mount, read_write_mount, writable_cgroups_requested, CGROUPS_MOUNT,
};

/// Mounts `/sys/fs/cgroup` read-write in annotated containers.
#[derive(Debug, Default)]
pub struct WritableCgroups {
    /// The host's cgroup v2 mount has `nsdelegate`; without it nothing is changed.
    pub host_ns_delegate: bool,
}

/// An annotated container has no cgroup mount to change.
#[derive(Debug, thiserror::Error)]
#[error("no {CGROUPS_MOUNT} mount found to modify, this is unexpected")]
pub struct NoCgroupsMount;

/// A runtime that does not apply both mount options and removals gets no adjustment.
impl ContainerAdjuster for WritableCgroups {
    const NAME: &'static str = "writable-cgroups";
    const NEEDS: &'static [Adjustment] = &[Adjustment::MountOptions, Adjustment::Removals];

    fn adjust(&self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<CreateContainerResult> {
        let span = tracing::debug_span!(
            "create container",
            pod = %pod.name, namespace = %pod.namespace, container = %ctr.name
        );
        let _enter = span.enter();
        if !writable_cgroups_requested(pod, ctr) {
            tracing::debug!("writable cgroups not requested");
            return Ok(CreateContainerResult::default());
        }
        if !self.host_ns_delegate {
            tracing::warn!(
                "cgroup mount on host does not have 'nsdelegate' option; \
                 ignoring request to make cgroups writable"
            );
            return Ok(CreateContainerResult::default());
        }
        let Some(old) = find_cgroups_mount(&ctr.mounts) else {
            tracing::error!("{NoCgroupsMount}");
            return Err(NoCgroupsMount.into());
        };
        let Some(new) = read_write_mount(old) else {
            tracing::debug!("cgroup mount is already read-write");
            return Ok(CreateContainerResult::default());
        };
        tracing::info!("adjusted mounts for writable cgroups");
        Ok(adjustment(new).into())
    }
}

adjuster_plugin!(WritableCgroups);
