//! Turning annotated values into a container adjustment.

use nri_stub::api::{
    CdiDevice, ContainerAdjustment, IoPrioClass, LinuxDevice, LinuxIoPriority, LinuxNetDevice,
    LinuxScheduler, LinuxSchedulerFlag, LinuxSchedulerPolicy, MpolFlag, MpolMode,
};

use crate::annotations::{Annotated, Device, IoPriority, MemoryPolicy, Mount, Scheduler};
use crate::InjectError;

impl Device {
    /// The NRI form; zero `file_mode`, `uid` and `gid` are left unset.
    pub fn to_nri(&self) -> LinuxDevice {
        LinuxDevice {
            path: self.path.clone(),
            r#type: self.kind.clone(),
            major: self.major,
            minor: self.minor,
            file_mode: (self.file_mode != 0).then(|| self.file_mode.into()),
            uid: (self.uid != 0).then(|| self.uid.into()),
            gid: (self.gid != 0).then(|| self.gid.into()),
        }
    }
}

impl Mount {
    /// The NRI form.
    pub fn to_nri(&self) -> nri_stub::api::Mount {
        nri_stub::api::Mount {
            source: self.source.clone(),
            destination: self.destination.clone(),
            r#type: self.kind.clone(),
            options: self.options.clone(),
        }
    }
}

impl IoPriority {
    /// The NRI form, or `None` for an unknown class (then nothing is set, as in the
    /// Go plugin).
    pub fn to_nri(&self) -> Option<LinuxIoPriority> {
        let class = IoPrioClass::from_str_name(&self.class)?;
        Some(LinuxIoPriority {
            class: class as i32,
            priority: self.priority,
        })
    }
}

impl Scheduler {
    /// The NRI form. Unknown policy and flag names read as value 0 (`SCHED_NONE`,
    /// `SCHED_FLAG_RESET_ON_FORK`), as in the Go plugin; they are logged.
    pub fn to_nri(&self) -> LinuxScheduler {
        let policy = LinuxSchedulerPolicy::from_str_name(&self.policy).unwrap_or_else(|| {
            tracing::warn!(policy = %self.policy, "unknown scheduling policy, using SCHED_NONE");
            LinuxSchedulerPolicy::SchedNone
        });
        let flags = self
            .flags
            .iter()
            .map(|f| {
                LinuxSchedulerFlag::from_str_name(f).unwrap_or_else(|| {
                    tracing::warn!(flag = %f, "unknown scheduling flag, using value 0");
                    LinuxSchedulerFlag::SchedFlagResetOnFork
                }) as i32
            })
            .collect();
        LinuxScheduler {
            policy: policy as i32,
            nice: self.nice,
            priority: self.priority,
            flags,
            runtime: self.runtime,
            deadline: self.deadline,
            period: self.period,
        }
    }
}

impl MemoryPolicy {
    /// The NRI mode and flags; unknown names are errors.
    pub fn to_nri(&self) -> Result<(MpolMode, Vec<MpolFlag>), InjectError> {
        let mode = MpolMode::from_str_name(&self.mode)
            .ok_or_else(|| InjectError::MemoryPolicyMode(self.mode.clone()))?;
        let flags = self
            .flags
            .iter()
            .map(|f| {
                MpolFlag::from_str_name(f).ok_or_else(|| InjectError::MemoryPolicyFlag(f.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((mode, flags))
    }
}

/// Builds the adjustment for what is annotated; `ctr` names the container in logs.
///
/// ```
/// use nri_plugin_device_injector::adjust::build_adjustment;
/// use nri_plugin_device_injector::annotations::{Annotated, Device};
///
/// let annotated = Annotated {
///     devices: vec![Device { path: "/dev/nri-null".into(), kind: "c".into(), major: 1, minor: 3, ..Default::default() }],
///     ..Default::default()
/// };
/// let adjust = build_adjustment(&annotated, "pod/ctr").unwrap();
/// assert_eq!(adjust.linux.unwrap().devices[0].path, "/dev/nri-null");
/// ```
pub fn build_adjustment(a: &Annotated, ctr: &str) -> Result<ContainerAdjustment, InjectError> {
    let mut adjust = ContainerAdjustment::default();
    for d in &a.devices {
        adjust.add_device(d.to_nri());
        tracing::info!("{ctr}: injected device {:?}", d.path);
    }
    for name in &a.cdi_devices {
        adjust.add_cdi_device(CdiDevice { name: name.clone() });
        tracing::info!("{ctr}: injected CDI device {name:?}");
    }
    for m in &a.mounts {
        adjust.add_mount(m.to_nri());
        tracing::info!(
            "{ctr}: injected mount {:?} -> {:?}",
            m.source,
            m.destination
        );
    }
    if let Some(p) = &a.io_priority {
        match p.to_nri() {
            Some(prio) => {
                adjust.set_linux_io_priority(prio);
                tracing::info!("{ctr}: injected I/O priority {}:{}", p.class, p.priority);
            }
            None => tracing::warn!("{ctr}: unknown I/O priority class {:?}, ignored", p.class),
        }
    }
    if let Some(s) = &a.scheduler {
        adjust.set_linux_scheduler(s.to_nri());
        tracing::info!("{ctr}: adjusted scheduling attributes to {s:?}");
    }
    for d in &a.net_devices {
        adjust.add_linux_net_device(
            d.host_if.clone(),
            LinuxNetDevice {
                name: d.name.clone(),
            },
        );
        tracing::info!(
            "{ctr}: injected network device {:?} -> {:?}",
            d.host_if,
            d.name
        );
    }
    for (key, value) in &a.sysctl {
        adjust.set_linux_sysctl(key.clone(), value.clone());
        tracing::info!("{ctr}: adjusted sysctl {key}={value}");
    }
    if let Some(pol) = &a.memory_policy {
        let (mode, flags) = pol.to_nri().inspect_err(|e| {
            tracing::error!("{ctr}: invalid memory policy annotation: {e}");
        })?;
        adjust.set_linux_memory_policy(mode, pol.nodes.clone(), &flags);
        tracing::info!("{ctr}: adjusted memory policy to {pol:?}");
    }
    Ok(adjust)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::NetDevice;
    use std::collections::BTreeMap;

    #[test]
    fn device_optional_fields() {
        let d = Device {
            path: "/dev/x".into(),
            kind: "c".into(),
            major: 1,
            minor: 5,
            file_mode: 0o666,
            uid: 0,
            gid: 7,
        };
        let n = d.to_nri();
        assert_eq!(n.file_mode.map(|m| m.value), Some(0o666));
        assert_eq!(n.uid, None);
        assert_eq!(n.gid.map(|g| g.value), Some(7));
    }

    #[test]
    fn unknown_io_priority_class_sets_nothing() {
        let a = Annotated {
            io_priority: Some(IoPriority {
                class: "BOGUS".into(),
                priority: 1,
            }),
            ..Default::default()
        };
        let adjust = build_adjustment(&a, "p/c").unwrap();
        assert!(adjust.linux.is_none_or(|l| l.io_priority.is_none()));
    }

    #[test]
    fn scheduler_names_map_to_values() {
        let s = Scheduler {
            policy: "SCHED_DEADLINE".into(),
            flags: vec!["SCHED_FLAG_RECLAIM".into(), "nonsense".into()],
            runtime: 10,
            deadline: 20,
            period: 30,
            ..Default::default()
        };
        let n = s.to_nri();
        assert_eq!(n.policy, LinuxSchedulerPolicy::SchedDeadline as i32);
        assert_eq!(n.flags, [LinuxSchedulerFlag::SchedFlagReclaim as i32, 0]);
        assert_eq!((n.runtime, n.deadline, n.period), (10, 20, 30));
        let unknown = Scheduler {
            policy: "SCHED_X".into(),
            ..Default::default()
        };
        assert_eq!(
            unknown.to_nri().policy,
            LinuxSchedulerPolicy::SchedNone as i32
        );
    }

    #[test]
    fn memory_policy_errors() {
        let bad_mode = MemoryPolicy {
            mode: "MPOL_X".into(),
            ..Default::default()
        };
        let a = Annotated {
            memory_policy: Some(bad_mode),
            ..Default::default()
        };
        assert_eq!(
            build_adjustment(&a, "p/c").unwrap_err().to_string(),
            "invalid memory policy: invalid memory policy mode \"MPOL_X\""
        );
        let bad_flag = MemoryPolicy {
            mode: "MPOL_BIND".into(),
            flags: vec!["MPOL_F_X".into()],
            ..Default::default()
        };
        assert_eq!(
            bad_flag.to_nri().unwrap_err().to_string(),
            "invalid memory policy: invalid memory policy flag \"MPOL_F_X\""
        );
    }

    #[test]
    fn everything_lands_in_the_adjustment() {
        let a = Annotated {
            cdi_devices: vec!["v.com/d=0".into()],
            mounts: vec![Mount {
                source: "/s".into(),
                destination: "/d".into(),
                kind: "bind".into(),
                options: vec!["ro".into()],
            }],
            net_devices: vec![NetDevice {
                host_if: "eth9".into(),
                name: "n0".into(),
            }],
            sysctl: BTreeMap::from([("net.core.somaxconn".to_string(), "256".to_string())]),
            memory_policy: Some(MemoryPolicy {
                mode: "MPOL_BIND".into(),
                nodes: "0".into(),
                flags: vec!["MPOL_F_STATIC_NODES".into()],
            }),
            ..Default::default()
        };
        let adjust = build_adjustment(&a, "p/c").unwrap();
        assert_eq!(adjust.cdi_devices[0].name, "v.com/d=0");
        assert_eq!(adjust.mounts[0].destination, "/d");
        let linux = adjust.linux.unwrap();
        assert_eq!(linux.net_devices["eth9"].name, "n0");
        assert_eq!(linux.sysctl["net.core.somaxconn"], "256");
        let pol = linux.memory_policy.unwrap();
        assert_eq!(pol.mode, MpolMode::MpolBind as i32);
        assert_eq!(pol.flags, [MpolFlag::MpolFStaticNodes as i32]);
    }
}
