//! Cgroup resources, shared by adjustments (CreateContainer) and updates.
//!
//! Merging happens in two passes: [`claim`] takes ownership of every field
//! the plugin sets, in the reference order, and stops at the first conflict;
//! only if all claims succeed does [`write`] copy the values into a target.
//! So a failed (possibly ignored) update leaves every target untouched, while
//! the claims made before the conflict stay, as in the reference.

use nri_api::{Field, LinuxCpu, LinuxMemory, LinuxPids, LinuxResources};

use super::{reply_linux_of, resources_of, Merge};
use crate::error::ConflictError;
use crate::owners::Owners;

/// Claims every resource field `src` sets for container `id`: memory, CPU,
/// huge page limits (per page size), unified entries (per key), block I/O
/// class, RDT class and pids limit. Device cgroup rules are not owned.
pub(super) fn claim(
    owners: &mut Owners,
    id: &str,
    plugin: &str,
    src: &LinuxResources,
) -> Result<(), ConflictError> {
    let mut simple = |present: bool, field: Field| -> Result<(), ConflictError> {
        if present {
            owners.claim(id, field, plugin)?;
        }
        Ok(())
    };

    if let Some(m) = &src.memory {
        simple(m.limit.is_some(), Field::MemLimit)?;
        simple(m.reservation.is_some(), Field::MemReservation)?;
        simple(m.swap.is_some(), Field::MemSwapLimit)?;
        simple(m.kernel.is_some(), Field::MemKernelLimit)?;
        simple(m.kernel_tcp.is_some(), Field::MemTcpLimit)?;
        simple(m.swappiness.is_some(), Field::MemSwappiness)?;
        simple(m.disable_oom_killer.is_some(), Field::MemDisableOomKiller)?;
        simple(m.use_hierarchy.is_some(), Field::MemUseHierarchy)?;
    }
    if let Some(c) = &src.cpu {
        simple(c.shares.is_some(), Field::CpuShares)?;
        simple(c.quota.is_some(), Field::CpuQuota)?;
        simple(c.period.is_some(), Field::CpuPeriod)?;
        simple(c.realtime_runtime.is_some(), Field::CpuRealtimeRuntime)?;
        simple(c.realtime_period.is_some(), Field::CpuRealtimePeriod)?;
        simple(!c.cpus.is_empty(), Field::CpuSetCpUs)?;
        simple(!c.mems.is_empty(), Field::CpuSetMems)?;
    }
    for limit in &src.hugepage_limits {
        owners.claim_key(id, Field::HugepageLimits, &limit.page_size, plugin)?;
    }
    for key in src.unified.keys() {
        owners.claim_key(id, Field::CgroupsUnified, key, plugin)?;
    }
    if src.blockio_class.is_some() {
        owners.claim(id, Field::BlockioClass, plugin)?;
    }
    if src.rdt_class.is_some() {
        owners.claim(id, Field::RdtClass, plugin)?;
    }
    if src.pids.is_some() {
        owners.claim(id, Field::PidsLimit, plugin)?;
    }
    Ok(())
}

/// Whether [`write`] appends device cgroup rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum DeviceRules {
    /// Append them (adjustments).
    Append,
    /// Leave them out (updates: the reference ignores them).
    Ignore,
}

/// Copies every field `src` sets into `dst`: present memory and CPU values
/// (non-empty cpuset strings), huge page limits appended, unified entries
/// inserted, classes and pids set.
pub(super) fn write(src: &LinuxResources, dst: &mut LinuxResources, rules: DeviceRules) {
    if let Some(m) = &src.memory {
        write_memory(m, dst.memory_mut());
    }
    if let Some(c) = &src.cpu {
        write_cpu(c, dst.cpu_mut());
    }
    dst.hugepage_limits
        .extend(src.hugepage_limits.iter().cloned());
    if rules == DeviceRules::Append {
        dst.devices.extend(src.devices.iter().cloned());
    }
    for (key, value) in &src.unified {
        dst.unified.insert(key.clone(), value.clone());
    }
    if let Some(class) = &src.blockio_class {
        dst.blockio_class = Some(class.clone());
    }
    if let Some(class) = &src.rdt_class {
        dst.rdt_class = Some(class.clone());
    }
    if let Some(pids) = src.pids {
        dst.pids = Some(LinuxPids { limit: pids.limit });
    }
}

fn write_memory(src: &LinuxMemory, dst: &mut LinuxMemory) {
    macro_rules! copy {
        ($($f:ident),*) => {$(
            if src.$f.is_some() {
                dst.$f = src.$f;
            }
        )*};
    }
    copy!(
        limit,
        reservation,
        swap,
        kernel,
        kernel_tcp,
        swappiness,
        disable_oom_killer,
        use_hierarchy
    );
}

fn write_cpu(src: &LinuxCpu, dst: &mut LinuxCpu) {
    macro_rules! copy {
        ($($f:ident),*) => {$(
            if src.$f.is_some() {
                dst.$f = src.$f;
            }
        )*};
    }
    copy!(shares, quota, period, realtime_runtime, realtime_period);
    if !src.cpus.is_empty() {
        dst.cpus.clone_from(&src.cpus);
    }
    if !src.mems.is_empty() {
        dst.mems.clone_from(&src.mems);
    }
}

impl Merge<'_> {
    /// Resources of the container being created: every field set is claimed
    /// and written to the request container and to the reply. Device cgroup
    /// rules are appended to both without ownership.
    pub(super) fn resources(
        &mut self,
        resources: Option<LinuxResources>,
    ) -> Result<(), ConflictError> {
        let Some(resources) = resources else {
            return Ok(());
        };
        claim(self.owners, self.id, self.plugin, &resources)?;
        write(
            &resources,
            resources_of(self.container),
            DeviceRules::Append,
        );
        let reply = reply_linux_of(self.reply)
            .resources
            .get_or_insert_with(Default::default);
        write(&resources, reply, DeviceRules::Append);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{ContainerAdjustment, Field, LinuxDeviceCgroup, LinuxResources, OptionalString};

    use crate::merge::testutil::*;

    type Setter = fn(&mut ContainerAdjustment);

    /// Every resource setter with the field name its conflicts report.
    const FIELDS: &[(Setter, &str)] = &[
        (
            |a| {
                a.set_linux_memory_limit(1);
            },
            "MemLimit",
        ),
        (
            |a| {
                a.set_linux_memory_reservation(1);
            },
            "MemReservation",
        ),
        (
            |a| {
                a.set_linux_memory_swap(1);
            },
            "MemSwapLimit",
        ),
        (
            |a| {
                a.set_linux_memory_kernel(1);
            },
            "MemKernelLimit",
        ),
        (
            |a| {
                a.set_linux_memory_kernel_tcp(1);
            },
            "MemTCPLimit",
        ),
        (
            |a| {
                a.set_linux_memory_swappiness(1);
            },
            "MemSwappiness",
        ),
        (
            |a| {
                a.set_linux_memory_disable_oom_killer();
            },
            "MemDisableOomKiller",
        ),
        (
            |a| {
                a.set_linux_memory_use_hierarchy();
            },
            "MemUseHierarchy",
        ),
        (
            |a| {
                a.set_linux_cpu_shares(1);
            },
            "CPUShares",
        ),
        (
            |a| {
                a.set_linux_cpu_quota(1);
            },
            "CPUQuota",
        ),
        (
            |a| {
                a.set_linux_cpu_period(1);
            },
            "CPUPeriod",
        ),
        (
            |a| {
                a.set_linux_cpu_realtime_runtime(1);
            },
            "CPURealtimeRuntime",
        ),
        (
            |a| {
                a.set_linux_cpu_realtime_period(1);
            },
            "CPURealtimePeriod",
        ),
        (
            |a| {
                a.set_linux_cpuset_cpus("0");
            },
            "CPUSetCPUs",
        ),
        (
            |a| {
                a.set_linux_cpuset_mems("0");
            },
            "CPUSetMems",
        ),
        (
            |a| {
                a.set_linux_pid_limits(1);
            },
            "PidsLimit",
        ),
        (
            |a| {
                a.set_linux_blockio_class("c");
            },
            "BlockioClass",
        ),
        (
            |a| {
                a.set_linux_rdt_class("c");
            },
            "RdtClass",
        ),
    ];

    #[test]
    fn every_simple_resource_field_conflicts_by_name() {
        for (set, name) in FIELDS {
            let err = conflict(vec![("00-bar", adjust(set)), ("10-foo", adjust(set))]);
            assert_eq!(
                err,
                format!(r#"plugins "10-foo" and "00-bar" both tried to set {name} "#)
            );
        }
    }

    #[test]
    fn different_resource_fields_do_not_conflict() {
        let mut r = create();
        for (i, (set, _)) in FIELDS.iter().enumerate() {
            r.apply(&format!("{i:02}-p"), adjust(set)).unwrap();
        }
        let res = r
            .adjustment()
            .linux
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .unwrap();
        assert_eq!(res.memory.as_ref().unwrap().limit.unwrap().value, 1);
        assert_eq!(res.cpu.as_ref().unwrap().cpus, "0");
        assert_eq!(res.pids.unwrap().limit, 1);
        assert_eq!(r.owners().owner(ID, Field::RdtClass), Some("17-p"));
    }

    fn reply_resources(r: &crate::CreateResult) -> &LinuxResources {
        r.adjustment()
            .linux
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .unwrap()
    }

    fn request_resources(r: &crate::CreateResult) -> &LinuxResources {
        container(r)
            .linux
            .as_ref()
            .unwrap()
            .resources
            .as_ref()
            .unwrap()
    }

    #[test]
    fn values_reach_reply_and_request() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_linux_memory_limit(1 << 20)
                    .set_linux_cpu_shares(512)
                    .set_linux_cpuset_cpus("0-3")
                    .set_linux_blockio_class("gold")
                    .set_linux_pid_limits(100);
            }),
        )])
        .unwrap();
        for res in [reply_resources(&r), request_resources(&r)] {
            assert_eq!(res.memory.as_ref().unwrap().limit.unwrap().value, 1 << 20);
            assert_eq!(res.cpu.as_ref().unwrap().shares.unwrap().value, 512);
            assert_eq!(res.cpu.as_ref().unwrap().cpus, "0-3");
            assert_eq!(res.blockio_class, Some(OptionalString::from("gold")));
            assert_eq!(res.pids.unwrap().limit, 100);
        }
    }

    #[test]
    fn next_plugin_sees_resources() {
        let mut r = create();
        r.apply(
            "00-a",
            adjust(|a| {
                a.set_linux_memory_limit(4096);
            }),
        )
        .unwrap();
        let seen = request_resources(&r).memory.as_ref().unwrap();
        assert_eq!(seen.limit.unwrap().value, 4096);
        // Untouched fields stay absent.
        assert!(seen.swap.is_none());
    }

    #[test]
    fn hugepage_limits_owned_per_page_size() {
        let r = run(vec![
            (
                "00-a",
                adjust(|a| {
                    a.add_linux_hugepage_limit("2MB", 1);
                }),
            ),
            (
                "10-b",
                adjust(|a| {
                    a.add_linux_hugepage_limit("1GB", 2);
                }),
            ),
        ])
        .unwrap();
        let sizes: Vec<_> = reply_resources(&r)
            .hugepage_limits
            .iter()
            .map(|l| l.page_size.as_str())
            .collect();
        assert_eq!(sizes, ["2MB", "1GB"]);
        assert_eq!(request_resources(&r).hugepage_limits.len(), 2);
        let err = conflict(vec![
            (
                "00-a",
                adjust(|a| {
                    a.add_linux_hugepage_limit("2MB", 1);
                }),
            ),
            (
                "10-b",
                adjust(|a| {
                    a.add_linux_hugepage_limit("2MB", 2);
                }),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "10-b" and "00-a" both tried to set HugepageLimits 2MB"#
        );
    }

    #[test]
    fn unified_owned_per_key() {
        let r = run(vec![
            (
                "00-a",
                adjust(|a| {
                    a.add_linux_unified("memory.high", "1G");
                }),
            ),
            (
                "10-b",
                adjust(|a| {
                    a.add_linux_unified("cpu.weight", "50");
                }),
            ),
        ])
        .unwrap();
        assert_eq!(reply_resources(&r).unified.len(), 2);
        assert_eq!(request_resources(&r).unified["memory.high"], "1G");
        let err = conflict(vec![
            (
                "00-a",
                adjust(|a| {
                    a.add_linux_unified("memory.high", "1G");
                }),
            ),
            (
                "10-b",
                adjust(|a| {
                    a.add_linux_unified("memory.high", "2G");
                }),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "10-b" and "00-a" both tried to set CgroupsUnified memory.high"#
        );
    }

    #[test]
    fn device_rules_are_appended_without_ownership() {
        let rule = LinuxDeviceCgroup {
            allow: true,
            access: "rw".into(),
            ..Default::default()
        };
        let add = {
            let rule = rule.clone();
            move || {
                let rule = rule.clone();
                adjust(move |a| {
                    a.add_linux_device_rule(rule);
                })
            }
        };
        let r = run(vec![("00-a", add()), ("10-b", add())]).unwrap();
        assert_eq!(reply_resources(&r).devices, [rule.clone(), rule.clone()]);
        assert_eq!(request_resources(&r).devices, [rule.clone(), rule]);
        assert!(r.owners().is_empty());
    }

    #[test]
    fn empty_cpuset_strings_are_not_claimed() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_linux_cpuset_cpus("").set_linux_cpu_shares(2);
            }),
        )])
        .unwrap();
        assert_eq!(r.owners().owner(ID, Field::CpuSetCpUs), None);
        assert_eq!(r.owners().owner(ID, Field::CpuShares), Some("00-a"));
    }
}
