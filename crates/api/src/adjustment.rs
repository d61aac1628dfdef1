//! Builders on [`ContainerAdjustment`]: what a plugin asks to change in a
//! container being created.
//!
//! Every setter creates the intermediate messages it needs and returns
//! `&mut Self`, so calls can be chained. Removals use the removal-marker
//! convention of [`markers`](crate::markers).
//!
//! ```
//! use nri_api::{ContainerAdjustment, Mount};
//!
//! let mut adjust = ContainerAdjustment::default();
//! adjust
//!     .add_annotation("example.com/owner", "me")
//!     .remove_env("DEBUG")
//!     .add_mount(Mount {
//!         destination: "/data".into(),
//!         source: "/srv/data".into(),
//!         r#type: "bind".into(),
//!         options: vec!["rbind".into(), "ro".into()],
//!     })
//!     .set_linux_memory_limit(256 << 20)
//!     .set_linux_cpuset_cpus("0-1");
//!
//! assert_eq!(adjust.env[0].key, "-DEBUG");
//! let res = adjust.linux.as_ref().unwrap().resources.as_ref().unwrap();
//! assert_eq!(res.memory.as_ref().unwrap().limit.unwrap().value, 256 << 20);
//! ```

use crate::markers::mark_for_removal;
use crate::optional::opt;
use crate::resources::linux_resource_setters;
use crate::{
    CdiDevice, ContainerAdjustment, Hook, Hooks, KeyValue, LinuxContainerAdjustment, LinuxDevice,
    LinuxIoPriority, LinuxMemoryPolicy, LinuxNamespace, LinuxNetDevice, LinuxRdt, LinuxResources,
    LinuxScheduler, LinuxSeccomp, Mount, MpolFlag, MpolMode, PosixRlimit,
};

impl ContainerAdjustment {
    /// The Linux part of the adjustment, created empty if absent.
    pub fn linux_mut(&mut self) -> &mut LinuxContainerAdjustment {
        self.linux.get_or_insert_with(Default::default)
    }

    /// The Linux resources of the adjustment, created empty if absent.
    pub fn linux_resources_mut(&mut self) -> &mut LinuxResources {
        self.linux_mut()
            .resources
            .get_or_insert_with(Default::default)
    }

    fn linux_rdt_mut(&mut self) -> &mut LinuxRdt {
        self.linux_mut().rdt.get_or_insert_with(Default::default)
    }

    /// Adds (or overwrites) an annotation.
    pub fn add_annotation(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> &mut Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Asks for the removal of an annotation.
    pub fn remove_annotation(&mut self, key: &str) -> &mut Self {
        self.annotations
            .insert(mark_for_removal(key), String::new());
        self
    }

    /// Adds a mount.
    pub fn add_mount(&mut self, mount: Mount) -> &mut Self {
        self.mounts.push(mount);
        self
    }

    /// Asks for the removal of the mount at `container_path`.
    pub fn remove_mount(&mut self, container_path: &str) -> &mut Self {
        self.mounts.push(Mount {
            destination: mark_for_removal(container_path),
            ..Default::default()
        });
        self
    }

    /// Adds (or overwrites) an environment variable.
    pub fn add_env(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.env.push(KeyValue {
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Asks for the removal of an environment variable.
    pub fn remove_env(&mut self, key: &str) -> &mut Self {
        self.env.push(KeyValue {
            key: mark_for_removal(key),
            value: String::new(),
        });
        self
    }

    /// Sets the process arguments (merged with other plugins' arguments as
    /// a conflict if another plugin also sets them).
    pub fn set_args<S: AsRef<str>>(&mut self, args: &[S]) -> &mut Self {
        self.args = args.iter().map(|a| a.as_ref().to_string()).collect();
        self
    }

    /// Replaces the process arguments, overriding what earlier plugins set:
    /// the stored list starts with an empty string.
    ///
    /// ```
    /// use nri_api::ContainerAdjustment;
    /// let mut adjust = ContainerAdjustment::default();
    /// adjust.update_args(&["sleep", "10"]);
    /// assert_eq!(adjust.args, ["", "sleep", "10"]);
    /// ```
    pub fn update_args<S: AsRef<str>>(&mut self, args: &[S]) -> &mut Self {
        self.args = std::iter::once(String::new())
            .chain(args.iter().map(|a| a.as_ref().to_string()))
            .collect();
        self
    }

    /// Appends OCI hooks, stage by stage.
    pub fn add_hooks(&mut self, hooks: &Hooks) -> &mut Self {
        let own = self.hooks.get_or_insert_with(Default::default);
        let extend = |to: &mut Vec<Hook>, from: &[Hook]| to.extend_from_slice(from);
        extend(&mut own.prestart, &hooks.prestart);
        extend(&mut own.create_runtime, &hooks.create_runtime);
        extend(&mut own.create_container, &hooks.create_container);
        extend(&mut own.start_container, &hooks.start_container);
        extend(&mut own.poststart, &hooks.poststart);
        extend(&mut own.poststop, &hooks.poststop);
        self
    }

    /// Adds a POSIX resource limit (e.g. `"RLIMIT_NOFILE"`).
    pub fn add_rlimit(&mut self, r#type: impl Into<String>, hard: u64, soft: u64) -> &mut Self {
        self.rlimits.push(PosixRlimit {
            r#type: r#type.into(),
            hard,
            soft,
        });
        self
    }

    /// Adds a device node.
    pub fn add_device(&mut self, device: LinuxDevice) -> &mut Self {
        self.linux_mut().devices.push(device);
        self
    }

    /// Asks for the removal of the device node at `path`.
    pub fn remove_device(&mut self, path: &str) -> &mut Self {
        self.linux_mut().devices.push(LinuxDevice {
            path: mark_for_removal(path),
            ..Default::default()
        });
        self
    }

    /// Adds a CDI device by its fully qualified name (e.g.
    /// `"vendor.com/device=gpu0"`).
    pub fn add_cdi_device(&mut self, device: impl Into<CdiDevice>) -> &mut Self {
        self.cdi_devices.push(device.into());
        self
    }

    /// Adds a namespace, or replaces the one of the same type.
    pub fn add_or_replace_namespace(&mut self, namespace: LinuxNamespace) -> &mut Self {
        self.linux_mut().namespaces.push(namespace);
        self
    }

    /// Asks for the removal of the namespace of type `ns_type` (e.g. `"network"`).
    pub fn remove_namespace(&mut self, ns_type: &str) -> &mut Self {
        self.linux_mut().namespaces.push(LinuxNamespace {
            r#type: mark_for_removal(ns_type),
            path: String::new(),
        });
        self
    }

    /// Moves the host network device `host_dev` into the container.
    pub fn add_linux_net_device(
        &mut self,
        host_dev: impl Into<String>,
        device: LinuxNetDevice,
    ) -> &mut Self {
        self.linux_mut().net_devices.insert(host_dev.into(), device);
        self
    }

    /// Asks for the removal of the network device of host name `host_dev`.
    pub fn remove_linux_net_device(&mut self, host_dev: &str) -> &mut Self {
        self.linux_mut()
            .net_devices
            .insert(mark_for_removal(host_dev), LinuxNetDevice::default());
        self
    }

    /// Sets the NUMA memory policy.
    pub fn set_linux_memory_policy(
        &mut self,
        mode: MpolMode,
        nodes: impl Into<String>,
        flags: &[MpolFlag],
    ) -> &mut Self {
        self.linux_mut().memory_policy = Some(LinuxMemoryPolicy {
            mode: mode as i32,
            nodes: nodes.into(),
            flags: flags.iter().map(|f| *f as i32).collect(),
        });
        self
    }

    /// Sets the RDT class of service id.
    pub fn set_linux_rdt_clos_id(&mut self, value: impl Into<String>) -> &mut Self {
        self.linux_rdt_mut().clos_id = opt(value.into());
        self
    }

    /// Sets the RDT schemata lines.
    pub fn set_linux_rdt_schemata<S: AsRef<str>>(&mut self, schemata: &[S]) -> &mut Self {
        let lines: Vec<String> = schemata.iter().map(|s| s.as_ref().to_string()).collect();
        self.linux_rdt_mut().schemata = opt(lines);
        self
    }

    /// Enables or disables RDT monitoring.
    pub fn set_linux_rdt_enable_monitoring(&mut self, value: bool) -> &mut Self {
        self.linux_rdt_mut().enable_monitoring = opt(value);
        self
    }

    /// Asks for the removal of the whole RDT configuration.
    pub fn remove_linux_rdt(&mut self) -> &mut Self {
        self.linux_rdt_mut().remove = true;
        self
    }

    /// Sets the cgroups path.
    pub fn set_linux_cgroups_path(&mut self, value: impl Into<String>) -> &mut Self {
        self.linux_mut().cgroups_path = value.into();
        self
    }

    /// Sets the OOM score adjustment; `None` leaves it unset.
    pub fn set_linux_oom_score_adj(&mut self, value: Option<i64>) -> &mut Self {
        self.linux_mut().oom_score_adj = value.map(Into::into);
        self
    }

    /// Sets the I/O priority.
    pub fn set_linux_io_priority(&mut self, value: LinuxIoPriority) -> &mut Self {
        self.linux_mut().io_priority = Some(value);
        self
    }

    /// Sets the seccomp policy.
    pub fn set_linux_seccomp_policy(&mut self, value: LinuxSeccomp) -> &mut Self {
        self.linux_mut().seccomp_policy = Some(value);
        self
    }

    /// Sets (or overwrites) a sysctl.
    pub fn set_linux_sysctl(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> &mut Self {
        self.linux_mut().sysctl.insert(key.into(), value.into());
        self
    }

    /// Asks for the removal of a sysctl.
    pub fn remove_linux_sysctl(&mut self, key: &str) -> &mut Self {
        self.linux_mut()
            .sysctl
            .insert(mark_for_removal(key), String::new());
        self
    }

    /// Sets the process scheduling attributes.
    pub fn set_linux_scheduler(&mut self, value: LinuxScheduler) -> &mut Self {
        self.linux_mut().scheduler = Some(value);
        self
    }
}

linux_resource_setters!(ContainerAdjustment);

impl From<&str> for CdiDevice {
    fn from(name: &str) -> Self {
        CdiDevice {
            name: name.to_string(),
        }
    }
}

impl From<String> for CdiDevice {
    fn from(name: String) -> Self {
        CdiDevice { name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IoPrioClass, LinuxSchedulerPolicy, OptionalInt, OptionalString};

    fn linux(a: &ContainerAdjustment) -> &LinuxContainerAdjustment {
        a.linux.as_ref().unwrap()
    }

    fn resources(a: &ContainerAdjustment) -> &LinuxResources {
        linux(a).resources.as_ref().unwrap()
    }

    #[test]
    fn annotations_add_and_remove() {
        let mut a = ContainerAdjustment::default();
        a.add_annotation("k", "v").remove_annotation("gone");
        assert_eq!(a.annotations.get("k").map(String::as_str), Some("v"));
        assert_eq!(a.annotations.get("-gone").map(String::as_str), Some(""));
        assert_eq!(a.annotations.len(), 2);
    }

    #[test]
    fn mounts_add_and_remove() {
        let mut a = ContainerAdjustment::default();
        a.add_mount(Mount {
            destination: "/a".into(),
            ..Default::default()
        })
        .remove_mount("/b");
        assert_eq!(a.mounts[0].destination, "/a");
        assert_eq!(
            a.mounts[1],
            Mount {
                destination: "-/b".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn env_add_and_remove() {
        let mut a = ContainerAdjustment::default();
        a.add_env("A", "1").remove_env("B");
        assert_eq!(
            a.env,
            vec![
                KeyValue {
                    key: "A".into(),
                    value: "1".into()
                },
                KeyValue {
                    key: "-B".into(),
                    value: String::new()
                },
            ]
        );
    }

    #[test]
    fn args_set_and_update() {
        let mut a = ContainerAdjustment::default();
        a.set_args(&["echo", "hi"]);
        assert_eq!(a.args, ["echo", "hi"]);
        a.update_args(&["true"]);
        assert_eq!(a.args, ["", "true"]);
        let none: [&str; 0] = [];
        a.update_args(&none);
        assert_eq!(a.args, [""]);
    }

    #[test]
    fn hooks_are_appended_per_stage() {
        let hook = |p: &str| Hook {
            path: p.into(),
            ..Default::default()
        };
        let mut a = ContainerAdjustment::default();
        a.add_hooks(&Hooks {
            prestart: vec![hook("/1")],
            ..Default::default()
        });
        a.add_hooks(&Hooks {
            prestart: vec![hook("/2")],
            create_runtime: vec![hook("/3")],
            create_container: vec![hook("/4")],
            start_container: vec![hook("/5")],
            poststart: vec![hook("/6")],
            poststop: vec![hook("/7")],
        });
        let h = a.hooks.as_ref().unwrap();
        assert_eq!(h.prestart, vec![hook("/1"), hook("/2")]);
        assert_eq!(h.create_runtime, vec![hook("/3")]);
        assert_eq!(h.create_container, vec![hook("/4")]);
        assert_eq!(h.start_container, vec![hook("/5")]);
        assert_eq!(h.poststart, vec![hook("/6")]);
        assert_eq!(h.poststop, vec![hook("/7")]);
    }

    #[test]
    fn rlimits_devices_cdi() {
        let mut a = ContainerAdjustment::default();
        a.add_rlimit("RLIMIT_NOFILE", 1024, 512)
            .add_device(LinuxDevice {
                path: "/dev/x".into(),
                ..Default::default()
            })
            .remove_device("/dev/y")
            .add_cdi_device("vendor.com/gpu=0");
        assert_eq!(
            a.rlimits,
            vec![PosixRlimit {
                r#type: "RLIMIT_NOFILE".into(),
                hard: 1024,
                soft: 512
            }]
        );
        let devs: Vec<&str> = linux(&a).devices.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(devs, ["/dev/x", "-/dev/y"]);
        assert_eq!(
            a.cdi_devices,
            vec![CdiDevice {
                name: "vendor.com/gpu=0".into()
            }]
        );
    }

    #[test]
    fn namespaces_add_and_remove() {
        let mut a = ContainerAdjustment::default();
        a.add_or_replace_namespace(LinuxNamespace {
            r#type: "network".into(),
            path: "/proc/1/ns/net".into(),
        })
        .remove_namespace("ipc");
        let ns = &linux(&a).namespaces;
        assert_eq!(ns[0].path, "/proc/1/ns/net");
        assert_eq!(
            ns[1],
            LinuxNamespace {
                r#type: "-ipc".into(),
                path: String::new()
            }
        );
    }

    #[test]
    fn net_devices_sysctl() {
        let mut a = ContainerAdjustment::default();
        a.add_linux_net_device(
            "eth1",
            LinuxNetDevice {
                name: "net0".into(),
            },
        )
        .remove_linux_net_device("eth2")
        .set_linux_sysctl("net.ipv4.ip_forward", "1")
        .remove_linux_sysctl("kernel.shmmax");
        let l = linux(&a);
        assert_eq!(l.net_devices["eth1"].name, "net0");
        assert_eq!(l.net_devices["-eth2"], LinuxNetDevice::default());
        assert_eq!(l.sysctl["net.ipv4.ip_forward"], "1");
        assert_eq!(l.sysctl["-kernel.shmmax"], "");
    }

    #[test]
    fn memory_setters() {
        let mut a = ContainerAdjustment::default();
        a.set_linux_memory_limit(1)
            .set_linux_memory_reservation(2)
            .set_linux_memory_swap(3)
            .set_linux_memory_kernel(4)
            .set_linux_memory_kernel_tcp(5)
            .set_linux_memory_swappiness(6)
            .set_linux_memory_disable_oom_killer()
            .set_linux_memory_use_hierarchy();
        let m = resources(&a).memory.as_ref().unwrap();
        assert_eq!(m.limit.unwrap().value, 1);
        assert_eq!(m.reservation.unwrap().value, 2);
        assert_eq!(m.swap.unwrap().value, 3);
        assert_eq!(m.kernel.unwrap().value, 4);
        assert_eq!(m.kernel_tcp.unwrap().value, 5);
        assert_eq!(m.swappiness.unwrap().value, 6);
        assert!(m.disable_oom_killer.unwrap().value);
        assert!(m.use_hierarchy.unwrap().value);
    }

    #[test]
    fn cpu_setters() {
        let mut a = ContainerAdjustment::default();
        a.set_linux_cpu_shares(1)
            .set_linux_cpu_quota(-1)
            .set_linux_cpu_period(3)
            .set_linux_cpu_realtime_runtime(4)
            .set_linux_cpu_realtime_period(5)
            .set_linux_cpuset_cpus("0-3")
            .set_linux_cpuset_mems("1");
        let c = resources(&a).cpu.as_ref().unwrap();
        assert_eq!(c.shares.unwrap().value, 1);
        assert_eq!(c.quota.unwrap().value, -1);
        assert_eq!(c.period.unwrap().value, 3);
        assert_eq!(c.realtime_runtime.unwrap().value, 4);
        assert_eq!(c.realtime_period.unwrap().value, 5);
        assert_eq!(c.cpus, "0-3");
        assert_eq!(c.mems, "1");
    }

    #[test]
    fn other_resource_setters() {
        let mut a = ContainerAdjustment::default();
        a.set_linux_pid_limits(-1)
            .add_linux_hugepage_limit("2MB", 4096)
            .set_linux_blockio_class("slow")
            .set_linux_rdt_class("gold")
            .add_linux_unified("memory.high", "1G");
        let r = resources(&a);
        assert_eq!(r.pids.unwrap().limit, -1);
        assert_eq!(r.hugepage_limits[0].page_size, "2MB");
        assert_eq!(r.hugepage_limits[0].limit, 4096);
        assert_eq!(r.blockio_class, Some(OptionalString::from("slow")));
        assert_eq!(r.rdt_class, Some(OptionalString::from("gold")));
        assert_eq!(r.unified["memory.high"], "1G");
    }

    #[test]
    fn rdt_setters() {
        let mut a = ContainerAdjustment::default();
        a.set_linux_rdt_clos_id("c1")
            .set_linux_rdt_schemata(&["L3:0=ff"])
            .set_linux_rdt_enable_monitoring(true);
        let rdt = linux(&a).rdt.as_ref().unwrap();
        assert_eq!(rdt.clos_id.as_ref().unwrap().value, "c1");
        assert_eq!(rdt.schemata.as_ref().unwrap().value, ["L3:0=ff"]);
        assert!(rdt.enable_monitoring.unwrap().value);
        assert!(!rdt.remove);
        a.remove_linux_rdt();
        assert!(linux(&a).rdt.as_ref().unwrap().remove);
    }

    #[test]
    fn linux_scalars_and_messages() {
        let mut a = ContainerAdjustment::default();
        a.set_linux_cgroups_path("/kubepods/x")
            .set_linux_oom_score_adj(Some(-500))
            .set_linux_io_priority(LinuxIoPriority {
                class: IoPrioClass::IoprioClassBe as i32,
                priority: 4,
            })
            .set_linux_seccomp_policy(LinuxSeccomp {
                default_action: "SCMP_ACT_ERRNO".into(),
                ..Default::default()
            })
            .set_linux_scheduler(LinuxScheduler {
                policy: LinuxSchedulerPolicy::SchedFifo as i32,
                priority: 10,
                ..Default::default()
            })
            .set_linux_memory_policy(MpolMode::MpolBind, "0-1", &[MpolFlag::MpolFStaticNodes]);
        let l = linux(&a);
        assert_eq!(l.cgroups_path, "/kubepods/x");
        assert_eq!(l.oom_score_adj, Some(OptionalInt { value: -500 }));
        assert_eq!(l.io_priority.as_ref().unwrap().priority, 4);
        assert_eq!(
            l.seccomp_policy.as_ref().unwrap().default_action,
            "SCMP_ACT_ERRNO"
        );
        assert_eq!(l.scheduler.as_ref().unwrap().policy, 2);
        let mp = l.memory_policy.as_ref().unwrap();
        assert_eq!(
            (mp.mode, mp.nodes.as_str(), mp.flags.as_slice()),
            (2, "0-1", &[0][..])
        );
        a.set_linux_oom_score_adj(None);
        assert_eq!(linux(&a).oom_score_adj, None);
    }

    #[test]
    fn device_rules() {
        let mut a = ContainerAdjustment::default();
        a.add_linux_device_rule(crate::LinuxDeviceCgroup {
            allow: true,
            access: "rwm".into(),
            ..Default::default()
        });
        assert!(resources(&a).devices[0].allow);
    }
}
