//! Merging of plugin results into the reply of one runtime call.
//!
//! * [`CreateResult`] collects the adjustments and updates of CreateContainer;
//! * [`UpdateResult`] the updates of UpdateContainer;
//! * [`StopResult`] the updates of StopContainer.
//!
//! Each collector owns the [`crate::Owners`] record of its call and
//! fails with a [`MergeError`](crate::MergeError) as soon as two plugins ask
//! for the same field. After an error the collector's content is unspecified:
//! the runtime call fails and the collector must be dropped.
//!
//! The per-area rules live in one file each: `maps` (annotations, sysctl,
//! network devices), `lists` (mounts, environment, devices), `container`
//! (arguments, hooks, rlimits, CDI devices), `linux` (the other Linux
//! fields), `resources` (cgroup resources, shared with updates) and
//! `updates` (updates of existing containers, shared by all three calls).

mod container;
mod create;
mod linux;
mod lists;
mod maps;
mod resources;
mod stop;
mod update;
mod updates;

pub use create::{CreateOutcome, CreateResult};
pub use stop::StopResult;
pub use update::UpdateResult;

use nri_api::{
    Container, ContainerAdjustment, LinuxContainer, LinuxContainerAdjustment, LinuxResources,
};

use crate::owners::Owners;

/// The state one plugin's adjustment is merged into during CreateContainer.
///
/// `container` is the request container that the next plugin will see,
/// `reply` the adjustment collected so far for the runtime.
pub(super) struct Merge<'a> {
    pub(super) owners: &'a mut Owners,
    pub(super) id: &'a str,
    pub(super) plugin: &'a str,
    pub(super) container: &'a mut Container,
    pub(super) reply: &'a mut ContainerAdjustment,
}

/// The Linux part of a request container, created if absent.
fn linux_of(container: &mut Container) -> &mut LinuxContainer {
    container.linux.get_or_insert_with(Default::default)
}

/// The resources of a request container, created if absent.
fn resources_of(container: &mut Container) -> &mut LinuxResources {
    linux_of(container)
        .resources
        .get_or_insert_with(Default::default)
}

/// The Linux part of the collected adjustment, created if absent.
fn reply_linux_of(reply: &mut ContainerAdjustment) -> &mut LinuxContainerAdjustment {
    reply.linux.get_or_insert_with(Default::default)
}

/// Resources with empty memory, CPU, huge page and unified parts: the
/// starting point of every collected resource set.
fn empty_resources() -> LinuxResources {
    LinuxResources {
        memory: Some(Default::default()),
        cpu: Some(Default::default()),
        ..Default::default()
    }
}

#[cfg(test)]
mod testutil;
