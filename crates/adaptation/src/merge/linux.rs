//! The Linux part of an adjustment, except devices, resources, sysctl and
//! network devices (see `lists`, `resources` and `maps`).

use std::collections::BTreeMap;

use nri_api::markers::is_marked_for_removal;
use nri_api::{
    Field, LinuxIoPriority, LinuxMemoryPolicy, LinuxNamespace, LinuxRdt, LinuxScheduler,
    LinuxSeccomp, OptionalInt,
};

use super::{linux_of, reply_linux_of, Merge};
use crate::error::ConflictError;

/// Linux fields owned as a whole: the first plugin to set one claims it, and
/// its value goes to both the request container and the reply.
macro_rules! whole_fields {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => $field:ident;)*) => {
        impl Merge<'_> {
            $(
                $(#[$doc])*
                pub(super) fn $name(&mut self, value: Option<$ty>) -> Result<(), ConflictError> {
                    let Some(value) = value else {
                        return Ok(());
                    };
                    self.owners.claim(self.id, Field::$field, self.plugin)?;
                    linux_of(self.container).$name = Some(Clone::clone(&value));
                    reply_linux_of(self.reply).$name = Some(value);
                    Ok(())
                }
            )*
        }
    };
}

whole_fields! {
    /// The OOM score adjustment.
    oom_score_adj: OptionalInt => OomScoreAdj;
    /// The I/O priority, as a whole.
    io_priority: LinuxIoPriority => IoPriority;
    /// The seccomp policy, replaced as a whole.
    seccomp_policy: LinuxSeccomp => SeccompPolicy;
    /// The process scheduling attributes, as a whole.
    scheduler: LinuxScheduler => LinuxSched;
}

impl Merge<'_> {
    /// The cgroups path; an empty path changes nothing.
    pub(super) fn cgroups_path(&mut self, path: String) -> Result<(), ConflictError> {
        if path.is_empty() {
            return Ok(());
        }
        self.owners
            .claim(self.id, Field::CgroupsPath, self.plugin)?;
        linux_of(self.container).cgroups_path.clone_from(&path);
        reply_linux_of(self.reply).cgroups_path = path;
        Ok(())
    }

    /// Namespaces, owned by type. Both additions and removals (`-<type>`)
    /// claim the type, so two plugins touching one namespace type conflict.
    /// Entries go to the reply unchanged, markers included.
    ///
    /// The request container keeps one entry per type: existing types keep
    /// their position (with the new value), new types are appended, removed
    /// types dropped. (The reference rebuilds the list from a hash map, in no
    /// particular order.)
    pub(super) fn namespaces(
        &mut self,
        namespaces: Vec<LinuxNamespace>,
    ) -> Result<(), ConflictError> {
        if namespaces.is_empty() {
            return Ok(());
        }
        let container = &mut linux_of(self.container).namespaces;
        let mut slots: Vec<Option<LinuxNamespace>> = Vec::with_capacity(container.len());
        let mut position: BTreeMap<String, usize> = BTreeMap::new();
        for ns in container.drain(..) {
            upsert(&mut slots, &mut position, ns);
        }

        let reply = &mut reply_linux_of(self.reply).namespaces;
        let mut result = Ok(());
        for ns in namespaces {
            let (kind, removal) = is_marked_for_removal(&ns.r#type);
            if let Err(e) = self
                .owners
                .claim_key(self.id, Field::Namespace, kind, self.plugin)
            {
                result = Err(e);
                break;
            }
            if removal {
                if let Some(slot) = position.remove(kind).and_then(|i| slots.get_mut(i)) {
                    *slot = None;
                }
            } else {
                upsert(&mut slots, &mut position, ns.clone());
            }
            reply.push(ns);
        }

        *container = slots.into_iter().flatten().collect();
        result
    }

    /// RDT settings, each of CLOS id, schemata and monitoring owned on its
    /// own. `remove` clears the three and resets the collected RDT to a bare
    /// removal, which values set by the same plugin then override.
    ///
    /// As in the reference, the reply gets an (empty) RDT message as soon as
    /// a plugin's adjustment has a Linux part, and the request container's
    /// RDT is left alone.
    pub(super) fn rdt(&mut self, rdt: Option<LinuxRdt>) -> Result<(), ConflictError> {
        let reply = reply_linux_of(self.reply)
            .rdt
            .get_or_insert_with(Default::default);
        let Some(rdt) = rdt else {
            return Ok(());
        };
        if rdt.remove {
            self.owners.clear_rdt(self.id, self.plugin);
            *reply = LinuxRdt {
                remove: true,
                ..Default::default()
            };
        }
        if let Some(clos_id) = rdt.clos_id {
            self.owners.claim(self.id, Field::RdtClosId, self.plugin)?;
            reply.clos_id = Some(clos_id);
            reply.remove = false;
        }
        if let Some(schemata) = rdt.schemata {
            self.owners
                .claim(self.id, Field::RdtSchemata, self.plugin)?;
            reply.schemata = Some(schemata);
            reply.remove = false;
        }
        if let Some(monitoring) = rdt.enable_monitoring {
            self.owners
                .claim(self.id, Field::RdtEnableMonitoring, self.plugin)?;
            reply.enable_monitoring = Some(monitoring);
            reply.remove = false;
        }
        Ok(())
    }

    /// The NUMA memory policy, as a whole. The request container has no such
    /// field; only the reply carries it.
    pub(super) fn memory_policy(
        &mut self,
        value: Option<LinuxMemoryPolicy>,
    ) -> Result<(), ConflictError> {
        let Some(value) = value else {
            return Ok(());
        };
        self.owners
            .claim(self.id, Field::MemoryPolicy, self.plugin)?;
        reply_linux_of(self.reply).memory_policy = Some(value);
        Ok(())
    }
}

/// Puts `ns` into its type's slot, or appends a slot for a new type.
fn upsert(
    slots: &mut Vec<Option<LinuxNamespace>>,
    position: &mut BTreeMap<String, usize>,
    ns: LinuxNamespace,
) {
    match position.get(&ns.r#type).and_then(|&i| slots.get_mut(i)) {
        Some(slot) => *slot = Some(ns),
        None => {
            position.insert(ns.r#type.clone(), slots.len());
            slots.push(Some(ns));
        }
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{
        Field, LinuxContainer, LinuxIoPriority, LinuxMemoryPolicy, LinuxNamespace, LinuxRdt,
        LinuxScheduler, LinuxSeccomp, OptionalBool, OptionalRepeatedString, OptionalString,
    };

    use crate::merge::testutil::*;

    fn reply_linux(r: &crate::CreateResult) -> &nri_api::LinuxContainerAdjustment {
        r.adjustment().linux.as_ref().unwrap()
    }

    fn request_linux(r: &crate::CreateResult) -> &LinuxContainer {
        container(r).linux.as_ref().unwrap()
    }

    fn ns(t: &str, path: &str) -> LinuxNamespace {
        LinuxNamespace {
            r#type: t.into(),
            path: path.into(),
        }
    }

    /// Two plugins setting the same simple Linux field conflict with
    /// `expected` as the field name.
    fn assert_simple_conflict(
        set: impl Fn(&mut nri_api::ContainerAdjustment) + Clone + 'static,
        expected: &str,
    ) {
        let s2 = set.clone();
        let err = conflict(vec![("00-bar", adjust(set)), ("10-foo", adjust(s2))]);
        assert_eq!(
            err,
            format!(r#"plugins "10-foo" and "00-bar" both tried to set {expected} "#)
        );
    }

    #[test]
    fn cgroups_path() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_linux_cgroups_path("/kubepods/x");
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).cgroups_path, "/kubepods/x");
        assert_eq!(request_linux(&r).cgroups_path, "/kubepods/x");
        assert_simple_conflict(
            |a| {
                a.set_linux_cgroups_path("/p");
            },
            "CgroupsPath",
        );
        // An empty path claims nothing.
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.linux_mut().cgroups_path = String::new();
            }),
        )])
        .unwrap();
        assert_eq!(r.owners().owner(ID, Field::CgroupsPath), None);
    }

    #[test]
    fn oom_score_adj() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_linux_oom_score_adj(Some(-500));
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).oom_score_adj.unwrap().value, -500);
        assert_eq!(request_linux(&r).oom_score_adj.unwrap().value, -500);
        assert_simple_conflict(
            |a| {
                a.set_linux_oom_score_adj(Some(1));
            },
            "OomScoreAdj",
        );
    }

    #[test]
    fn io_priority() {
        let prio = LinuxIoPriority {
            class: 2,
            priority: 4,
        };
        let r = run(vec![(
            "00-a",
            adjust(move |a| {
                a.set_linux_io_priority(prio);
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).io_priority, Some(prio));
        assert_eq!(request_linux(&r).io_priority, Some(prio));
        assert_simple_conflict(
            move |a| {
                a.set_linux_io_priority(prio);
            },
            "IoPriority",
        );
    }

    #[test]
    fn seccomp_policy() {
        let policy = LinuxSeccomp {
            default_action: "SCMP_ACT_ERRNO".into(),
            ..Default::default()
        };
        let p = policy.clone();
        let r = run(vec![(
            "00-a",
            adjust(move |a| {
                a.set_linux_seccomp_policy(p);
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).seccomp_policy.as_ref(), Some(&policy));
        assert_eq!(request_linux(&r).seccomp_policy.as_ref(), Some(&policy));
        assert_simple_conflict(
            move |a| {
                a.set_linux_seccomp_policy(policy.clone());
            },
            "SeccompPolicy",
        );
    }

    #[test]
    fn scheduler() {
        let sched = LinuxScheduler {
            policy: 2,
            priority: 10,
            ..Default::default()
        };
        let s = sched.clone();
        let r = run(vec![(
            "00-a",
            adjust(move |a| {
                a.set_linux_scheduler(s);
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).scheduler.as_ref(), Some(&sched));
        assert_eq!(request_linux(&r).scheduler.as_ref(), Some(&sched));
        assert_simple_conflict(
            move |a| {
                a.set_linux_scheduler(sched.clone());
            },
            "LinuxSched",
        );
    }

    #[test]
    fn memory_policy_reply_only() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.linux_mut().memory_policy = Some(LinuxMemoryPolicy {
                    mode: 2,
                    nodes: "0-1".into(),
                    flags: vec![],
                });
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).memory_policy.as_ref().unwrap().nodes, "0-1");
        assert_simple_conflict(
            |a| {
                a.linux_mut().memory_policy = Some(LinuxMemoryPolicy::default());
            },
            "MemoryPolicy",
        );
    }

    #[test]
    fn namespaces_replace_append_and_remove() {
        let mut r = create_linux(LinuxContainer {
            namespaces: vec![ns("pid", ""), ns("network", "/old"), ns("ipc", "")],
            ..Default::default()
        });
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_or_replace_namespace(ns("network", "/new"))
                    .remove_namespace("ipc")
                    .add_or_replace_namespace(ns("uts", "/u"));
            }),
        )
        .unwrap();
        assert_eq!(
            request_linux(&r).namespaces,
            [ns("pid", ""), ns("network", "/new"), ns("uts", "/u")]
        );
        // The reply carries the entries as sent, markers included.
        assert_eq!(
            reply_linux(&r).namespaces,
            [ns("network", "/new"), ns("-ipc", ""), ns("uts", "/u")]
        );
        let owners = r.owners().namespace_owners(ID).unwrap();
        assert_eq!(owners.len(), 3);
        assert_eq!(owners["ipc"], "00-a");
    }

    #[test]
    fn namespace_removal_conflicts_with_addition() {
        let err = conflict(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_or_replace_namespace(ns("network", "/n"));
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_namespace("network");
                }),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Namespace network"#
        );
    }

    #[test]
    fn namespace_duplicates_in_request_collapse() {
        let mut r = create_linux(LinuxContainer {
            namespaces: vec![ns("pid", "/1"), ns("pid", "/2")],
            ..Default::default()
        });
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_or_replace_namespace(ns("uts", ""));
            }),
        )
        .unwrap();
        assert_eq!(
            request_linux(&r).namespaces,
            [ns("pid", "/2"), ns("uts", "")]
        );
    }

    fn rdt_of(r: &crate::CreateResult) -> &LinuxRdt {
        reply_linux(r).rdt.as_ref().unwrap()
    }

    #[test]
    fn rdt_set_and_conflict() {
        let set = |clos: &'static str| {
            adjust(move |a| {
                a.set_linux_rdt_clos_id(clos)
                    .set_linux_rdt_schemata(&["L3:0=ff"])
                    .set_linux_rdt_enable_monitoring(true);
            })
        };
        let r = run(vec![("00-bar", set("bar"))]).unwrap();
        assert_eq!(
            *rdt_of(&r),
            LinuxRdt {
                clos_id: Some(OptionalString::from("bar")),
                schemata: Some(OptionalRepeatedString::from(["L3:0=ff"])),
                enable_monitoring: Some(OptionalBool::from(true)),
                remove: false,
            }
        );
        // The request container's RDT is not touched.
        assert!(request_linux(&r).rdt.is_none());
        let err = conflict(vec![("00-bar", set("bar")), ("10-foo", set("foo"))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set RdtClosID "#
        );
    }

    #[test]
    fn rdt_remove_then_set_takes_over() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.set_linux_rdt_clos_id("bar")
                        .set_linux_rdt_schemata(&["L3:0=f"])
                        .set_linux_rdt_enable_monitoring(true);
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_linux_rdt()
                        .set_linux_rdt_clos_id("foo")
                        .set_linux_rdt_schemata(&["L3:0=f"])
                        .set_linux_rdt_enable_monitoring(true);
                }),
            ),
        ])
        .unwrap();
        let rdt = rdt_of(&r);
        assert_eq!(rdt.clos_id.as_ref().unwrap().value, "foo");
        assert!(!rdt.remove);
        assert_eq!(r.owners().owner(ID, Field::RdtClosId), Some("10-foo"));
    }

    #[test]
    fn rdt_remove_resets_earlier_values() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.set_linux_rdt_clos_id("bar");
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_linux_rdt();
                }),
            ),
        ])
        .unwrap();
        assert_eq!(
            *rdt_of(&r),
            LinuxRdt {
                remove: true,
                ..Default::default()
            }
        );
        for f in [
            Field::RdtClosId,
            Field::RdtSchemata,
            Field::RdtEnableMonitoring,
        ] {
            assert_eq!(r.owners().owner(ID, f), Some("-10-foo"));
        }
    }

    #[test]
    fn empty_rdt_is_materialized_with_any_linux_part() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_linux_cgroups_path("/x");
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).rdt, Some(LinuxRdt::default()));
        // Without a Linux part there is none.
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.add_env("A", "b");
            }),
        )])
        .unwrap();
        assert_eq!(reply_linux(&r).rdt, None);
    }
}
