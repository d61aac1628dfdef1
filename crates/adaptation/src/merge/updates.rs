//! Updates of existing containers, as returned by plugins from
//! CreateContainer, UpdateContainer and StopContainer.
//!
//! Updates are merged per container id, with the same ownership rules as
//! adjustments. For each update, in order:
//! 1. its container gets a merged entry on first appearance (empty memory
//!    and CPU parts); `ignore_failure` of an existing entry stays true only
//!    if every update of that container sets it;
//! 2. if it has resources, each field it sets is claimed (see
//!    `resources::claim`); on a conflict nothing is written, and the error is
//!    ignored if the update has `ignore_failure` (claims made before the
//!    conflict remain), else the call fails;
//! 3. otherwise the values are written into the merged entry, or, for the
//!    container an UpdateContainer call is about, into the request's
//!    resources (which later plugins see, and which become that container's
//!    merged update).
//!
//! A pids limit is taken from the update itself (decision \[7\]; the reference
//! looks at the base resources instead, dropping requested pids limits).
//! Device cgroup rules in updates are ignored, as in the reference.

use std::collections::BTreeMap;

use nri_api::{ContainerUpdate, LinuxContainerUpdate, LinuxResources};

use super::empty_resources;
use super::resources::{self, DeviceRules};
use crate::error::MergeError;
use crate::owners::Owners;

/// Which runtime call updates are merged for.
pub(super) enum Scope<'a> {
    /// CreateContainer of container `id`: updating it is an error.
    Create { id: &'a str },
    /// UpdateContainer of container `id`, whose requested resources are
    /// `resources`.
    Update {
        id: &'a str,
        resources: &'a mut LinuxResources,
    },
    /// StopContainer: any container may be updated.
    Stop,
}

/// State of the merged update of an UpdateContainer call's own container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TargetState {
    /// Merged `ignore_failure`.
    pub(super) ignore_failure: bool,
    /// True once an update's resources were written to the request; the
    /// merged update is then the request's resources, else empty.
    pub(super) written: bool,
}

/// Merged updates of one runtime call.
#[derive(Debug, Clone, Default)]
pub(super) struct UpdateSet {
    /// Updates of other containers, in order of first appearance.
    others: Vec<ContainerUpdate>,
    /// Position of each container id in `others`.
    index: BTreeMap<String, usize>,
    /// The UpdateContainer call's own container, once any update named it.
    target: Option<TargetState>,
}

impl UpdateSet {
    /// Merges the updates `plugin` returned.
    pub(super) fn merge(
        &mut self,
        owners: &mut Owners,
        scope: &mut Scope<'_>,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
    ) -> Result<(), MergeError> {
        for update in updates {
            self.merge_one(owners, scope, plugin, update)?;
        }
        Ok(())
    }

    fn merge_one(
        &mut self,
        owners: &mut Owners,
        scope: &mut Scope<'_>,
        plugin: &str,
        update: ContainerUpdate,
    ) -> Result<(), MergeError> {
        let ContainerUpdate {
            container_id: id,
            linux,
            ignore_failure,
        } = update;
        if id.is_empty() {
            // Merged as the reference does; no runtime can apply it.
            tracing::warn!(
                plugin,
                "container update without a container id cannot be applied"
            );
        }

        let is_target = match scope {
            Scope::Create { id: created } if *created == id.as_str() => {
                return Err(MergeError::UpdateDuringCreation {
                    plugin: plugin.to_string(),
                    container_id: id,
                });
            }
            Scope::Update { id: target, .. } => *target == id.as_str(),
            Scope::Create { .. } | Scope::Stop => false,
        };

        if is_target {
            match &mut self.target {
                Some(state) => state.ignore_failure &= ignore_failure,
                None => {
                    self.target = Some(TargetState {
                        ignore_failure,
                        written: false,
                    });
                }
            }
        } else {
            match self.index.get(&id).and_then(|&i| self.others.get_mut(i)) {
                Some(entry) => entry.ignore_failure &= ignore_failure,
                None => {
                    self.index.insert(id.clone(), self.others.len());
                    self.others.push(ContainerUpdate {
                        container_id: id.clone(),
                        linux: Some(LinuxContainerUpdate {
                            resources: Some(empty_resources()),
                        }),
                        ignore_failure,
                    });
                }
            }
        }

        let Some(requested) = linux.and_then(|l| l.resources) else {
            return Ok(());
        };
        if !requested.devices.is_empty() {
            tracing::warn!(
                plugin,
                container = %id,
                "device cgroup rules in a container update are ignored"
            );
        }

        if let Err(err) = resources::claim(owners, &id, plugin, &requested) {
            if ignore_failure {
                tracing::warn!(
                    plugin,
                    container = %id,
                    error = %err,
                    "ignoring failed container update (ignore_failure set)"
                );
                return Ok(());
            }
            return Err(err.into());
        }

        if is_target {
            if let Scope::Update {
                resources: target, ..
            } = scope
            {
                resources::write(&requested, target, DeviceRules::Ignore);
            }
            if let Some(state) = &mut self.target {
                state.written = true;
            }
        } else if let Some(entry) = self.index.get(&id).and_then(|&i| self.others.get_mut(i)) {
            let dst = entry
                .linux
                .get_or_insert_with(Default::default)
                .resources
                .get_or_insert_with(empty_resources);
            resources::write(&requested, dst, DeviceRules::Ignore);
        }
        Ok(())
    }

    /// Merged updates of containers other than an UpdateContainer call's
    /// own, in order of first appearance.
    pub(super) fn others(&self) -> &[ContainerUpdate] {
        &self.others
    }

    /// Consumes the set into [`others`](Self::others).
    pub(super) fn into_others(self) -> Vec<ContainerUpdate> {
        self.others
    }

    /// State of the UpdateContainer call's own container, if any update
    /// named it.
    pub(super) fn target(&self) -> Option<TargetState> {
        self.target
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{ContainerUpdate, Field, LinuxDeviceCgroup};

    use crate::merge::testutil::{self, *};

    fn upd(id: &str, build: impl FnOnce(&mut ContainerUpdate)) -> ContainerUpdate {
        let mut u = ContainerUpdate::for_container(id);
        build(&mut u);
        u
    }

    #[test]
    fn update_of_created_container_is_an_error() {
        let err = conflict(vec![(
            "00-test",
            testutil::updates(vec![upd(ID, |u| {
                u.set_linux_cpu_shares(1);
            })]),
        )]);
        assert_eq!(
            err,
            r#"plugin "00-test" asked update of "ctr0" during creation"#
        );
    }

    #[test]
    fn update_of_created_container_is_an_error_even_if_ignorable() {
        let err = conflict(vec![(
            "00-test",
            testutil::updates(vec![upd(ID, |u| {
                u.set_ignore_failure();
            })]),
        )]);
        assert_eq!(
            err,
            r#"plugin "00-test" asked update of "ctr0" during creation"#
        );
    }

    #[test]
    fn updates_keep_order_of_first_appearance() {
        let r = run(vec![
            (
                "00-a",
                testutil::updates(vec![
                    upd("ctr2", |u| {
                        u.set_linux_cpu_shares(2);
                    }),
                    upd("ctr1", |u| {
                        u.set_linux_cpu_shares(1);
                    }),
                ]),
            ),
            (
                "10-b",
                testutil::updates(vec![
                    upd("ctr3", |u| {
                        u.set_linux_memory_limit(3);
                    }),
                    upd("ctr2", |u| {
                        u.set_linux_memory_limit(2);
                    }),
                ]),
            ),
        ])
        .unwrap();
        let ids: Vec<_> = r
            .updates()
            .iter()
            .map(|u| u.container_id.as_str())
            .collect();
        assert_eq!(ids, ["ctr2", "ctr1", "ctr3"]);
        let ctr2 = resources(&r.updates()[0]);
        assert_eq!(ctr2.cpu.as_ref().unwrap().shares.unwrap().value, 2);
        assert_eq!(ctr2.memory.as_ref().unwrap().limit.unwrap().value, 2);
        assert_eq!(r.owners().owner("ctr2", Field::MemLimit), Some("10-b"));
    }

    #[test]
    fn update_conflict_between_plugins() {
        let u = || {
            testutil::updates(vec![upd("ctr1", |u| {
                u.set_linux_cpu_quota(1);
            })])
        };
        let err = conflict(vec![("00-bar", u()), ("10-foo", u())]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set CPUQuota "#
        );
    }

    #[test]
    fn ignored_failure_writes_nothing_but_keeps_earlier_claims() {
        let r = run(vec![
            (
                "00-bar",
                testutil::updates(vec![upd("ctr1", |u| {
                    u.set_linux_cpu_quota(1);
                })]),
            ),
            (
                "10-foo",
                testutil::updates(vec![upd("ctr1", |u| {
                    // Shares is claimed before quota conflicts.
                    u.set_linux_cpu_shares(7)
                        .set_linux_cpu_quota(2)
                        .set_ignore_failure();
                })]),
            ),
        ])
        .unwrap();
        let cpu = resources(&r.updates()[0]).cpu.as_ref().unwrap();
        assert_eq!(cpu.quota.unwrap().value, 1);
        assert!(cpu.shares.is_none());
        assert_eq!(r.owners().owner("ctr1", Field::CpuShares), Some("10-foo"));
        // Merged ignore_failure: false && true.
        assert!(!r.updates()[0].ignore_failure);
    }

    #[test]
    fn ignore_failure_is_merged_with_and() {
        let r = run(vec![
            (
                "00-a",
                testutil::updates(vec![upd("c1", |u| {
                    u.set_ignore_failure();
                })]),
            ),
            (
                "10-b",
                testutil::updates(vec![upd("c1", |u| {
                    u.set_ignore_failure();
                })]),
            ),
        ])
        .unwrap();
        assert!(r.updates()[0].ignore_failure);
    }

    #[test]
    fn update_without_resources_still_gets_an_entry() {
        let r = run(vec![("00-a", testutil::updates(vec![upd("c1", |_| {})]))]).unwrap();
        assert_eq!(r.updates().len(), 1);
        let res = resources(&r.updates()[0]);
        assert_eq!(res.memory, Some(Default::default()));
        assert_eq!(res.cpu, Some(Default::default()));
    }

    #[test]
    fn pids_are_taken_from_the_update() {
        let r = run(vec![(
            "00-a",
            testutil::updates(vec![upd("c1", |u| {
                u.set_linux_pid_limits(64);
            })]),
        )])
        .unwrap();
        assert_eq!(resources(&r.updates()[0]).pids.unwrap().limit, 64);
        assert_eq!(r.owners().owner("c1", Field::PidsLimit), Some("00-a"));
        let err = conflict(vec![
            (
                "00-a",
                testutil::updates(vec![upd("c1", |u| {
                    u.set_linux_pid_limits(64);
                })]),
            ),
            (
                "10-b",
                testutil::updates(vec![upd("c1", |u| {
                    u.set_linux_pid_limits(32);
                })]),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "10-b" and "00-a" both tried to set PidsLimit "#
        );
    }

    #[test]
    fn update_device_rules_are_ignored() {
        let r = run(vec![(
            "00-a",
            testutil::updates(vec![upd("c1", |u| {
                u.add_linux_device_rule(LinuxDeviceCgroup::default())
                    .add_linux_hugepage_limit("2MB", 5)
                    .add_linux_unified("k", "v")
                    .set_linux_rdt_class("r")
                    .set_linux_blockio_class("b");
            })]),
        )])
        .unwrap();
        let res = resources(&r.updates()[0]);
        assert!(res.devices.is_empty());
        assert_eq!(res.hugepage_limits.len(), 1);
        assert_eq!(res.unified["k"], "v");
        assert_eq!(res.rdt_class.as_ref().unwrap().value, "r");
        assert_eq!(res.blockio_class.as_ref().unwrap().value, "b");
    }
}
