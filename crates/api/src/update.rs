//! Builders on [`ContainerUpdate`]: resource changes a plugin requests for an
//! existing container.
//!
//! ```
//! use nri_api::ContainerUpdate;
//!
//! let mut update = ContainerUpdate::for_container("ctr-1");
//! update
//!     .set_linux_cpu_shares(1024)
//!     .set_linux_memory_limit(1 << 30)
//!     .set_ignore_failure();
//! assert_eq!(update.container_id, "ctr-1");
//! assert!(update.ignore_failure);
//! ```

use crate::resources::linux_resource_setters;
use crate::{ContainerUpdate, LinuxResources};

impl ContainerUpdate {
    /// An empty update of container `id`.
    pub fn for_container(id: impl Into<String>) -> Self {
        ContainerUpdate {
            container_id: id.into(),
            ..Default::default()
        }
    }

    /// Sets the id of the container to update.
    pub fn set_container_id(&mut self, id: impl Into<String>) -> &mut Self {
        self.container_id = id.into();
        self
    }

    /// The Linux resources of the update, created empty if absent.
    pub fn linux_resources_mut(&mut self) -> &mut LinuxResources {
        self.linux
            .get_or_insert_with(Default::default)
            .resources
            .get_or_insert_with(Default::default)
    }

    /// Marks the update as optional: failing to apply it is not an error.
    pub fn set_ignore_failure(&mut self) -> &mut Self {
        self.ignore_failure = true;
        self
    }
}

linux_resource_setters!(ContainerUpdate);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinuxDeviceCgroup, OptionalString};

    fn resources(u: &ContainerUpdate) -> &LinuxResources {
        u.linux.as_ref().unwrap().resources.as_ref().unwrap()
    }

    #[test]
    fn empty_update_has_no_linux_part() {
        let u = ContainerUpdate::for_container("c");
        assert_eq!(u.container_id, "c");
        assert!(u.linux.is_none());
        assert!(!u.ignore_failure);
    }

    #[test]
    fn memory_and_cpu() {
        let mut u = ContainerUpdate::default();
        u.set_container_id("x")
            .set_linux_memory_limit(10)
            .set_linux_memory_reservation(9)
            .set_linux_memory_swap(20)
            .set_linux_memory_kernel(1)
            .set_linux_memory_kernel_tcp(2)
            .set_linux_memory_swappiness(60)
            .set_linux_memory_disable_oom_killer()
            .set_linux_memory_use_hierarchy()
            .set_linux_cpu_shares(2)
            .set_linux_cpu_quota(50_000)
            .set_linux_cpu_period(100_000)
            .set_linux_cpu_realtime_runtime(7)
            .set_linux_cpu_realtime_period(8)
            .set_linux_cpuset_cpus("2")
            .set_linux_cpuset_mems("0");
        let r = resources(&u);
        let m = r.memory.as_ref().unwrap();
        assert_eq!(
            (
                m.limit.unwrap().value,
                m.reservation.unwrap().value,
                m.swap.unwrap().value
            ),
            (10, 9, 20)
        );
        assert_eq!(
            (m.kernel.unwrap().value, m.kernel_tcp.unwrap().value),
            (1, 2)
        );
        assert_eq!(m.swappiness.unwrap().value, 60);
        assert!(m.disable_oom_killer.unwrap().value && m.use_hierarchy.unwrap().value);
        let c = r.cpu.as_ref().unwrap();
        assert_eq!(c.shares.unwrap().value, 2);
        assert_eq!(c.quota.unwrap().value, 50_000);
        assert_eq!(c.period.unwrap().value, 100_000);
        assert_eq!(c.realtime_runtime.unwrap().value, 7);
        assert_eq!(c.realtime_period.unwrap().value, 8);
        assert_eq!((c.cpus.as_str(), c.mems.as_str()), ("2", "0"));
    }

    #[test]
    fn other_resources() {
        let mut u = ContainerUpdate::for_container("y");
        u.set_linux_pid_limits(100)
            .add_linux_hugepage_limit("1GB", 1 << 30)
            .set_linux_blockio_class("io")
            .set_linux_rdt_class("rdt")
            .add_linux_unified("cpu.weight", "50")
            .add_linux_device_rule(LinuxDeviceCgroup {
                allow: false,
                access: "rwm".into(),
                ..Default::default()
            })
            .set_ignore_failure();
        let r = resources(&u);
        assert_eq!(r.pids.unwrap().limit, 100);
        assert_eq!(r.hugepage_limits.len(), 1);
        assert_eq!(r.blockio_class, Some(OptionalString::from("io")));
        assert_eq!(r.rdt_class, Some(OptionalString::from("rdt")));
        assert_eq!(r.unified["cpu.weight"], "50");
        assert_eq!(r.devices[0].access, "rwm");
        assert!(u.ignore_failure);
    }
}
