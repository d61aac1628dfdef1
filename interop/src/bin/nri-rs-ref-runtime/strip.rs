//! Removal of empty sub-messages from step results, as the reference API's
//! generated `Strip()` methods do (v0.12): an empty sub-message becomes
//! absent, and a message left empty is absent itself. Leaf messages are
//! empty when every field has its zero value.

use nri_api::{
    ContainerAdjustment, ContainerUpdate, LinuxContainerAdjustment, LinuxContainerUpdate,
    LinuxResources,
};

/// `None` when `msg` equals its zero value.
fn non_empty<T: Default + PartialEq>(msg: T) -> Option<T> {
    (msg != T::default()).then_some(msg)
}

fn leaf<T: Default + PartialEq>(msg: Option<T>) -> Option<T> {
    msg.and_then(non_empty)
}

/// Strips Linux resources (memory, CPU and pids parts, then the whole).
pub fn resources(r: Option<LinuxResources>) -> Option<LinuxResources> {
    let mut r = r?;
    r.memory = leaf(r.memory);
    r.cpu = leaf(r.cpu);
    r.pids = leaf(r.pids);
    non_empty(r)
}

fn linux_adjustment(l: Option<LinuxContainerAdjustment>) -> Option<LinuxContainerAdjustment> {
    let mut l = l?;
    l.resources = resources(l.resources);
    l.io_priority = leaf(l.io_priority);
    l.seccomp_policy = leaf(l.seccomp_policy);
    l.scheduler = leaf(l.scheduler);
    l.rdt = leaf(l.rdt);
    l.memory_policy = leaf(l.memory_policy);
    non_empty(l)
}

/// Strips a container adjustment.
pub fn adjustment(a: Option<ContainerAdjustment>) -> Option<ContainerAdjustment> {
    let mut a = a?;
    a.hooks = leaf(a.hooks);
    a.linux = linux_adjustment(a.linux);
    non_empty(a)
}

fn linux_update(l: Option<LinuxContainerUpdate>) -> Option<LinuxContainerUpdate> {
    let mut l = l?;
    l.resources = resources(l.resources);
    non_empty(l)
}

/// Strips each update and drops those left empty.
pub fn updates(updates: Vec<ContainerUpdate>) -> Vec<ContainerUpdate> {
    updates
        .into_iter()
        .filter_map(|mut u| {
            u.linux = linux_update(u.linux);
            non_empty(u)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{Hooks, LinuxCpu, LinuxMemory, OptionalInt, OptionalInt64};

    #[test]
    fn empty_parts_vanish_and_set_ones_stay() {
        let a = ContainerAdjustment {
            hooks: Some(Hooks::default()),
            linux: Some(LinuxContainerAdjustment {
                resources: Some(LinuxResources {
                    memory: Some(LinuxMemory::default()),
                    cpu: Some(LinuxCpu::default()),
                    ..Default::default()
                }),
                rdt: Some(Default::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(adjustment(Some(a.clone())), None);

        let mut b = a;
        b.linux.as_mut().unwrap().oom_score_adj = Some(OptionalInt { value: 0 });
        b.linux.as_mut().unwrap().resources.as_mut().unwrap().memory = Some(LinuxMemory {
            limit: Some(OptionalInt64 { value: 1 }),
            ..Default::default()
        });
        let got = adjustment(Some(b)).unwrap();
        assert!(got.hooks.is_none());
        let linux = got.linux.unwrap();
        assert!(linux.rdt.is_none());
        assert_eq!(linux.oom_score_adj, Some(OptionalInt { value: 0 }));
        let res = linux.resources.unwrap();
        assert!(res.cpu.is_none());
        assert_eq!(res.memory.unwrap().limit.unwrap().value, 1);

        let kept = updates(vec![
            ContainerUpdate::default(),
            ContainerUpdate {
                linux: Some(LinuxContainerUpdate {
                    resources: Some(LinuxResources::default()),
                }),
                ..Default::default()
            },
            ContainerUpdate {
                container_id: "c".into(),
                linux: Some(LinuxContainerUpdate::default()),
                ..Default::default()
            },
        ]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].container_id, "c");
        assert!(kept[0].linux.is_none());
    }
}
