//! Resource setters shared by [`ContainerAdjustment`](crate::ContainerAdjustment)
//! and [`ContainerUpdate`](crate::ContainerUpdate).
//!
//! Both messages carry a [`LinuxResources`]; the setters below create the
//! intermediate messages on first use and set one field each.

use crate::{LinuxCpu, LinuxMemory, LinuxPids, LinuxResources};

impl LinuxResources {
    /// The memory settings, created empty if absent.
    pub fn memory_mut(&mut self) -> &mut LinuxMemory {
        self.memory.get_or_insert_with(Default::default)
    }

    /// The CPU settings, created empty if absent.
    pub fn cpu_mut(&mut self) -> &mut LinuxCpu {
        self.cpu.get_or_insert_with(Default::default)
    }

    /// The pids settings, created empty if absent.
    pub fn pids_mut(&mut self) -> &mut LinuxPids {
        self.pids.get_or_insert_with(Default::default)
    }
}

/// Generates the resource setters on a type that has a
/// `linux_resources_mut(&mut self) -> &mut LinuxResources` method.
macro_rules! linux_resource_setters {
    ($ty:ty) => {
        impl $ty {
            /// Sets the memory limit, in bytes.
            pub fn set_linux_memory_limit(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().memory_mut().limit = $crate::optional::opt(value);
                self
            }

            /// Sets the memory reservation (soft limit), in bytes.
            pub fn set_linux_memory_reservation(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().memory_mut().reservation = $crate::optional::opt(value);
                self
            }

            /// Sets the memory plus swap limit, in bytes.
            pub fn set_linux_memory_swap(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().memory_mut().swap = $crate::optional::opt(value);
                self
            }

            /// Sets the kernel memory limit, in bytes.
            pub fn set_linux_memory_kernel(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().memory_mut().kernel = $crate::optional::opt(value);
                self
            }

            /// Sets the kernel TCP buffer memory limit, in bytes.
            pub fn set_linux_memory_kernel_tcp(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().memory_mut().kernel_tcp = $crate::optional::opt(value);
                self
            }

            /// Sets the swappiness (0 to 100).
            pub fn set_linux_memory_swappiness(&mut self, value: u64) -> &mut Self {
                self.linux_resources_mut().memory_mut().swappiness = $crate::optional::opt(value);
                self
            }

            /// Disables the OOM killer.
            pub fn set_linux_memory_disable_oom_killer(&mut self) -> &mut Self {
                self.linux_resources_mut().memory_mut().disable_oom_killer =
                    $crate::optional::opt(true);
                self
            }

            /// Enables hierarchical memory accounting.
            pub fn set_linux_memory_use_hierarchy(&mut self) -> &mut Self {
                self.linux_resources_mut().memory_mut().use_hierarchy = $crate::optional::opt(true);
                self
            }

            /// Sets the CPU shares (relative weight).
            pub fn set_linux_cpu_shares(&mut self, value: u64) -> &mut Self {
                self.linux_resources_mut().cpu_mut().shares = $crate::optional::opt(value);
                self
            }

            /// Sets the CFS quota, in microseconds per period.
            pub fn set_linux_cpu_quota(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().cpu_mut().quota = $crate::optional::opt(value);
                self
            }

            /// Sets the CFS period, in microseconds.
            pub fn set_linux_cpu_period(&mut self, value: u64) -> &mut Self {
                self.linux_resources_mut().cpu_mut().period = $crate::optional::opt(value);
                self
            }

            /// Sets the realtime runtime, in microseconds.
            pub fn set_linux_cpu_realtime_runtime(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().cpu_mut().realtime_runtime =
                    $crate::optional::opt(value);
                self
            }

            /// Sets the realtime period, in microseconds.
            pub fn set_linux_cpu_realtime_period(&mut self, value: u64) -> &mut Self {
                self.linux_resources_mut().cpu_mut().realtime_period = $crate::optional::opt(value);
                self
            }

            /// Sets the CPUs the container may run on (cpuset list, e.g. `"0-3"`).
            pub fn set_linux_cpuset_cpus(&mut self, value: impl Into<String>) -> &mut Self {
                self.linux_resources_mut().cpu_mut().cpus = value.into();
                self
            }

            /// Sets the memory nodes the container may use (e.g. `"0"`).
            pub fn set_linux_cpuset_mems(&mut self, value: impl Into<String>) -> &mut Self {
                self.linux_resources_mut().cpu_mut().mems = value.into();
                self
            }

            /// Sets the pids limit (`-1` for no limit).
            pub fn set_linux_pid_limits(&mut self, value: i64) -> &mut Self {
                self.linux_resources_mut().pids_mut().limit = value;
                self
            }

            /// Adds a huge page limit for one page size (e.g. `"2MB"`), in bytes.
            pub fn add_linux_hugepage_limit(
                &mut self,
                page_size: impl Into<String>,
                value: u64,
            ) -> &mut Self {
                self.linux_resources_mut()
                    .hugepage_limits
                    .push($crate::HugepageLimit {
                        page_size: page_size.into(),
                        limit: value,
                    });
                self
            }

            /// Sets the block I/O class.
            pub fn set_linux_blockio_class(&mut self, value: impl Into<String>) -> &mut Self {
                self.linux_resources_mut().blockio_class = $crate::optional::opt(value.into());
                self
            }

            /// Sets the RDT class.
            pub fn set_linux_rdt_class(&mut self, value: impl Into<String>) -> &mut Self {
                self.linux_resources_mut().rdt_class = $crate::optional::opt(value.into());
                self
            }

            /// Sets one cgroup v2 unified-hierarchy entry.
            pub fn add_linux_unified(
                &mut self,
                key: impl Into<String>,
                value: impl Into<String>,
            ) -> &mut Self {
                self.linux_resources_mut()
                    .unified
                    .insert(key.into(), value.into());
                self
            }

            /// Adds a device cgroup rule.
            pub fn add_linux_device_rule(&mut self, rule: $crate::LinuxDeviceCgroup) -> &mut Self {
                self.linux_resources_mut().devices.push(rule);
                self
            }
        }
    };
}

pub(crate) use linux_resource_setters;
