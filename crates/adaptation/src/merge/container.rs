//! Container-level fields: arguments, OCI hooks, rlimits and CDI devices.

use nri_api::{CdiDevice, Field, Hook, Hooks, PosixRlimit};

use super::Merge;
use crate::error::ConflictError;

/// Selects the hook list of one stage.
type Stage = fn(&mut Hooks) -> &mut Vec<Hook>;

impl Merge<'_> {
    /// Arguments replace the whole list and are owned as one field. A leading
    /// empty string ("update" rather than "set") first clears the field, so
    /// the plugin may override arguments set by an earlier plugin; it is not
    /// part of the new list. An empty list changes nothing.
    pub(super) fn args(&mut self, mut args: Vec<String>) -> Result<(), ConflictError> {
        if args.is_empty() {
            return Ok(());
        }
        if args.first().is_some_and(String::is_empty) {
            self.owners.clear(self.id, Field::Args, self.plugin);
            args.remove(0);
        }
        self.owners.claim(self.id, Field::Args, self.plugin)?;
        self.container.args.clone_from(&args);
        self.reply.args = args;
        Ok(())
    }

    /// Hooks of every stage are appended to the reply and the request
    /// container. They never conflict; their owner accumulates the names of
    /// all contributing plugins.
    pub(super) fn hooks(&mut self, hooks: Option<Hooks>) {
        let Some(hooks) = hooks else {
            return;
        };
        let reply = self.reply.hooks.get_or_insert_with(Default::default);
        let container = self.container.hooks.get_or_insert_with(Default::default);

        let stages: [(Vec<Hook>, Stage); 6] = [
            (hooks.prestart, |h| &mut h.prestart),
            (hooks.poststart, |h| &mut h.poststart),
            (hooks.poststop, |h| &mut h.poststop),
            (hooks.create_runtime, |h| &mut h.create_runtime),
            (hooks.create_container, |h| &mut h.create_container),
            (hooks.start_container, |h| &mut h.start_container),
        ];
        let mut added = false;
        for (new, stage) in stages {
            if new.is_empty() {
                continue;
            }
            stage(container).extend(new.iter().cloned());
            stage(reply).extend(new);
            added = true;
        }
        if added {
            self.owners.accumulate_hooks(self.id, self.plugin);
        }
    }

    /// Rlimits, each owned by its type, appended to the reply and the request
    /// container.
    pub(super) fn rlimits(&mut self, rlimits: Vec<PosixRlimit>) -> Result<(), ConflictError> {
        for rlimit in rlimits {
            self.owners
                .claim_key(self.id, Field::Rlimits, &rlimit.r#type, self.plugin)?;
            self.container.rlimits.push(rlimit.clone());
            self.reply.rlimits.push(rlimit);
        }
        Ok(())
    }

    /// CDI devices, each owned by its name (so injecting the same device
    /// twice conflicts, even from one plugin). They go to the reply only: the
    /// runtime resolves them, later plugins do not see them. They cannot be
    /// removed.
    pub(super) fn cdi_devices(&mut self, devices: Vec<CdiDevice>) -> Result<(), ConflictError> {
        for device in devices {
            self.owners
                .claim_key(self.id, Field::CdiDevices, &device.name, self.plugin)?;
            self.reply.cdi_devices.push(device);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{CdiDevice, Container, Field, Hook, Hooks, PosixRlimit};

    use crate::merge::testutil::*;

    fn hook(path: &str) -> Hook {
        Hook {
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn args_set_in_reply_and_request() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.set_args(&["echo", "hi"]);
            }),
        )])
        .unwrap();
        assert_eq!(r.adjustment().args, ["echo", "hi"]);
        assert_eq!(container(&r).args, ["echo", "hi"]);
        assert_eq!(r.owners().owner(ID, Field::Args), Some("00-a"));
    }

    #[test]
    fn args_conflict_has_trailing_space() {
        let set = adjust(|a| {
            a.set_args(&["echo"]);
        });
        let err = conflict(vec![("00-bar", set.clone()), ("10-foo", set)]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Args "#
        );
    }

    #[test]
    fn args_leading_empty_string_overrides() {
        let mut r = create();
        r.apply(
            "00-bar",
            adjust(|a| {
                a.set_args(&["echo", "updated", "argument", "list"]);
            }),
        )
        .unwrap();
        // 10-foo extends what it sees in its request.
        let mut seen = container(&r).args.clone();
        seen.push("twice...".into());
        r.apply(
            "10-foo",
            adjust(|a| {
                a.update_args(&seen);
            }),
        )
        .unwrap();
        assert_eq!(
            r.adjustment().args,
            ["echo", "updated", "argument", "list", "twice..."]
        );
        assert_eq!(container(&r).args, r.adjustment().args);
        assert_eq!(r.owners().owner(ID, Field::Args), Some("10-foo"));
    }

    #[test]
    fn args_only_empty_string_claims_and_empties() {
        let mut r = create_from(Container {
            args: vec!["sleep".into()],
            ..Default::default()
        });
        r.apply(
            "00-a",
            adjust(|a| {
                a.args = vec![String::new()];
            }),
        )
        .unwrap();
        assert!(r.adjustment().args.is_empty());
        assert!(container(&r).args.is_empty());
        assert_eq!(r.owners().owner(ID, Field::Args), Some("00-a"));
    }

    #[test]
    fn hooks_accumulate_without_conflict() {
        let add = |p: &'static str| {
            adjust(move |a| {
                a.add_hooks(&Hooks {
                    prestart: vec![hook(p)],
                    ..Default::default()
                });
            })
        };
        let r = run(vec![
            ("00-bar", add("/bin/00-bar")),
            ("10-foo", add("/bin/10-foo")),
        ])
        .unwrap();
        let hooks = r.adjustment().hooks.as_ref().unwrap();
        assert_eq!(hooks.prestart, [hook("/bin/00-bar"), hook("/bin/10-foo")]);
        let ch = container(&r).hooks.as_ref().unwrap();
        assert_eq!(ch.prestart, hooks.prestart);
        assert_eq!(r.owners().hooks_owner(ID), Some("00-bar,10-foo"));
    }

    #[test]
    fn every_hook_stage_is_collected() {
        let all = Hooks {
            prestart: vec![hook("/1")],
            create_runtime: vec![hook("/2")],
            create_container: vec![hook("/3")],
            start_container: vec![hook("/4")],
            poststart: vec![hook("/5")],
            poststop: vec![hook("/6")],
        };
        let expected = all.clone();
        let r = run(vec![(
            "00-a",
            adjust(move |a| {
                a.hooks = Some(all);
            }),
        )])
        .unwrap();
        assert_eq!(r.adjustment().hooks.as_ref(), Some(&expected));
        assert_eq!(r.owners().hooks_owner(ID), Some("00-a"));
    }

    #[test]
    fn empty_hooks_claim_nothing() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.hooks = Some(Hooks::default());
            }),
        )])
        .unwrap();
        assert_eq!(r.owners().hooks_owner(ID), None);
    }

    #[test]
    fn rlimits_appended_and_owned_by_type() {
        let add = |hard: u64| {
            adjust(move |a| {
                a.add_rlimit("RLIMIT_NOFILE", hard, 1);
            })
        };
        let r = run(vec![
            ("00-a", add(10)),
            (
                "00-a",
                adjust(|a| {
                    a.add_rlimit("RLIMIT_NPROC", 5, 5);
                }),
            ),
        ])
        .unwrap();
        let types: Vec<_> = r
            .adjustment()
            .rlimits
            .iter()
            .map(|l| l.r#type.as_str())
            .collect();
        assert_eq!(types, ["RLIMIT_NOFILE", "RLIMIT_NPROC"]);
        assert_eq!(
            container(&r).rlimits[0],
            PosixRlimit {
                r#type: "RLIMIT_NOFILE".into(),
                hard: 10,
                soft: 1
            }
        );
        let err = conflict(vec![("00-bar", add(1)), ("10-foo", add(2))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Rlimits RLIMIT_NOFILE"#
        );
    }

    #[test]
    fn cdi_devices_go_to_reply_only() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.add_cdi_device("vendor.com/gpu=0");
            }),
        )])
        .unwrap();
        assert_eq!(
            r.adjustment().cdi_devices,
            [CdiDevice::from("vendor.com/gpu=0")]
        );
        assert!(container(&r).cdi_devices.is_empty());
    }

    #[test]
    fn same_cdi_device_twice_conflicts_even_from_one_plugin() {
        let err = conflict(vec![(
            "00-a",
            adjust(|a| {
                a.add_cdi_device("vendor.com/gpu=0")
                    .add_cdi_device("vendor.com/gpu=0");
            }),
        )]);
        assert_eq!(
            err,
            r#"plugins "00-a" and "00-a" both tried to set CdiDevices vendor.com/gpu=0"#
        );
    }
}
