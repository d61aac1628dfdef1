//! The plugin: CreateContainer makes the cgroup mount read-write when asked to.

use nri_plugin_util::report_unapplied;
use nri_stub::api::{Container, PodSandbox};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
};

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

/// What the plugin adjusts; a runtime that applies none of it gets no adjustment.
const NEEDS: [Adjustment; 2] = [Adjustment::MountOptions, Adjustment::Removals];

#[nri_stub::plugin]
impl Plugin for WritableCgroups {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        report_unapplied("writable-cgroups", &info.runtime, &NEEDS);
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let span = tracing::debug_span!(
            "create container",
            pod = %pod.name, namespace = %pod.namespace, container = %ctr.name
        );
        let _enter = span.enter();
        if !ctx.runtime().capabilities().unapplied(&NEEDS).is_empty() {
            return Ok(CreateContainerResult::default());
        }
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
