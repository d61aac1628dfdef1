//! Keyed lists: mounts (by destination), devices (by path) and environment
//! variables (by name).
//!
//! A plugin's list is split into removals (key `-K`) and additions. Then:
//! 1. entries collected from earlier plugins whose key is removed are dropped
//!    from the reply, and their ownership is cleared by this plugin;
//! 2. entries whose key is removed or added are dropped from the request
//!    container;
//! 3. each addition claims its key and is appended to the reply;
//! 4. for mounts only, each removal that is not also an addition is appended
//!    to the reply as is (`-K`), so the runtime removes the mount;
//! 5. the additions are appended to the request container.
//!
//! Environment and device removals never reach the reply (reference
//! behaviour, decision \[4\]): they undo earlier plugins' additions and hide
//! the entry from later plugins, but cannot remove an entry the runtime put
//! in the container spec. Such lost removals are logged.

use std::collections::{BTreeMap, BTreeSet};

use nri_api::markers::is_marked_for_removal;
use nri_api::{ContainerAdjustment, Field, KeyValue, LinuxDevice, Mount};

use super::{linux_of, reply_linux_of, Merge};
use crate::error::ConflictError;

/// A plugin's list, split by the removal marker.
struct Split<T> {
    /// Additions, in order.
    add: Vec<T>,
    /// Keys of the additions.
    added: BTreeSet<String>,
    /// Removals by bare key; the last removal entry of a key wins.
    removed: BTreeMap<String, T>,
}

fn split<T>(items: Vec<T>, key: fn(&T) -> &str) -> Split<T> {
    let mut out = Split {
        add: Vec::new(),
        added: BTreeSet::new(),
        removed: BTreeMap::new(),
    };
    for item in items {
        match is_marked_for_removal(key(&item)) {
            (bare, true) => {
                let bare = bare.to_string();
                out.removed.insert(bare, item);
            }
            (k, false) => {
                out.added.insert(k.to_string());
                out.add.push(item);
            }
        }
    }
    out
}

/// Steps 1 and 3 on the reply: drops removed entries (clearing their
/// ownership), then claims and appends the additions. Returns the removed
/// keys that matched nothing in the reply.
fn merge_reply<T: Clone>(
    merge: &mut Merge<'_>,
    field: Field,
    key: fn(&T) -> &str,
    split: &Split<T>,
    reply: fn(&mut ContainerAdjustment) -> &mut Vec<T>,
) -> Result<BTreeSet<String>, ConflictError> {
    let (owners, id, plugin) = (&mut *merge.owners, merge.id, merge.plugin);
    let reply = reply(merge.reply);
    let mut unmatched: BTreeSet<String> = split.removed.keys().cloned().collect();
    if !split.removed.is_empty() {
        reply.retain(|item| {
            let k = key(item);
            if split.removed.contains_key(k) {
                owners.clear_key(id, field, k, plugin);
                unmatched.remove(k);
                false
            } else {
                true
            }
        });
    }
    for item in &split.add {
        owners.claim_key(id, field, key(item), plugin)?;
        reply.push(item.clone());
    }
    Ok(unmatched)
}

fn mount_key(m: &Mount) -> &str {
    &m.destination
}

fn device_key(d: &LinuxDevice) -> &str {
    &d.path
}

fn env_key(e: &KeyValue) -> &str {
    &e.key
}

/// The name part of a `NAME=value` string.
fn env_name(entry: &str) -> &str {
    entry.split_once('=').map_or(entry, |(name, _)| name)
}

impl<T> Split<T> {
    /// True if `key` is removed or added by this plugin.
    fn touches(&self, key: &str) -> bool {
        self.added.contains(key) || self.removed.contains_key(key)
    }
}

impl Merge<'_> {
    /// Mounts, keyed by destination.
    pub(super) fn mounts(&mut self, mounts: Vec<Mount>) -> Result<(), ConflictError> {
        if mounts.is_empty() {
            return Ok(());
        }
        let split = split(mounts, mount_key);
        merge_reply(self, Field::Mounts, mount_key, &split, |r| &mut r.mounts)?;
        self.container
            .mounts
            .retain(|m| !split.touches(&m.destination));

        let Split {
            add,
            added,
            removed,
        } = split;
        for (bare, mount) in removed {
            if !added.contains(&bare) {
                self.reply.mounts.push(mount);
            }
        }
        self.container.mounts.extend(add);
        Ok(())
    }

    /// Devices, keyed by path. Pure removals do not reach the reply.
    pub(super) fn devices(&mut self, devices: Vec<LinuxDevice>) -> Result<(), ConflictError> {
        if devices.is_empty() {
            return Ok(());
        }
        let split = split(devices, device_key);
        let unmatched = merge_reply(self, Field::Devices, device_key, &split, |r| {
            &mut reply_linux_of(r).devices
        })?;
        self.warn_lost_removals("device", &unmatched, &split.added);

        let container = &mut linux_of(self.container).devices;
        container.retain(|d| !split.touches(&d.path));
        container.extend(split.add);
        Ok(())
    }

    /// Environment variables, keyed by name. The request container holds
    /// `NAME=value` strings. Pure removals do not reach the reply.
    pub(super) fn env(&mut self, env: Vec<KeyValue>) -> Result<(), ConflictError> {
        if env.is_empty() {
            return Ok(());
        }
        let split = split(env, env_key);
        let unmatched = merge_reply(self, Field::Env, env_key, &split, |r| &mut r.env)?;
        self.warn_lost_removals("environment variable", &unmatched, &split.added);
        self.warn_env_overrides(&split);

        let container = &mut self.container.env;
        container.retain(|e| !split.touches(env_name(e)));
        container.extend(split.add.iter().map(|e| format!("{}={}", e.key, e.value)));
        Ok(())
    }

    /// Logs additions that replace a variable the container already has
    /// (set by the runtime or an earlier plugin) without removing it first:
    /// the old value is dropped, as in the reference.
    fn warn_env_overrides(&self, split: &Split<KeyValue>) {
        for e in &split.add {
            if split.removed.contains_key(&e.key) {
                continue;
            }
            // Values are not logged: they may be secrets.
            if self
                .container
                .env
                .iter()
                .any(|entry| env_name(entry) == e.key)
            {
                tracing::warn!(
                    plugin = self.plugin,
                    container = self.id,
                    "environment variable {:?} is already set in the container; \
                     the adjustment replaces its value",
                    e.key
                );
            }
        }
    }

    /// Logs removals that the runtime will never see: those that neither
    /// undid an earlier plugin's addition nor came with a replacement.
    fn warn_lost_removals(
        &self,
        what: &str,
        unmatched: &BTreeSet<String>,
        added: &BTreeSet<String>,
    ) {
        for key in unmatched.iter().filter(|k| !added.contains(*k)) {
            tracing::warn!(
                plugin = self.plugin,
                container = self.id,
                "removal of {what} {key:?} is not passed to the runtime (only additions of other plugins can be removed)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{Container, Field, KeyValue, LinuxContainer, LinuxDevice, Mount};

    use crate::merge::testutil::*;

    fn mount(dest: &str, source: &str) -> Mount {
        Mount {
            destination: dest.into(),
            source: source.into(),
            r#type: "bind".into(),
            options: vec!["rbind".into()],
        }
    }

    fn device(path: &str, minor: i64) -> LinuxDevice {
        LinuxDevice {
            path: path.into(),
            r#type: "c".into(),
            major: 313,
            minor,
            ..Default::default()
        }
    }

    fn devices_of(r: &crate::CreateResult) -> &[LinuxDevice] {
        &r.adjustment().linux.as_ref().unwrap().devices
    }

    #[test]
    fn mount_added_to_reply_and_request() {
        let mut original = Container::default();
        original.mounts.push(mount("/orig", "/src"));
        let mut r = create_from(original);
        r.apply(
            "00-test",
            adjust(|a| {
                a.add_mount(mount("/mnt/test", "/dev/00"));
            }),
        )
        .unwrap();
        assert_eq!(r.adjustment().mounts, vec![mount("/mnt/test", "/dev/00")]);
        let dests: Vec<_> = container(&r)
            .mounts
            .iter()
            .map(|m| m.destination.as_str())
            .collect();
        assert_eq!(dests, ["/orig", "/mnt/test"]);
        assert_eq!(
            r.owners().key_owner(ID, Field::Mounts, "/mnt/test"),
            Some("00-test")
        );
    }

    #[test]
    fn mount_conflict() {
        let add = |src: &'static str| {
            adjust(move |a| {
                a.add_mount(mount("/mnt/test", src));
            })
        };
        let err = conflict(vec![("00-bar", add("/a")), ("10-foo", add("/b"))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Mounts /mnt/test"#
        );
    }

    #[test]
    fn pure_mount_removal_reaches_reply() {
        let mut original = Container::default();
        original
            .mounts
            .push(mount("/remove/test/destination", "/x"));
        let mut r = create_from(original);
        r.apply(
            "00-test",
            adjust(|a| {
                a.remove_mount("/remove/test/destination");
            }),
        )
        .unwrap();
        let m = &r.adjustment().mounts;
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].destination, "-/remove/test/destination");
        assert!(container(&r).mounts.is_empty());
        // A pure removal of a mount no plugin added claims nothing.
        assert!(r.owners().is_empty());
    }

    /// 00-bar mounts /dev/00-bar on /mnt/test, then 10-foo adjusts with `foo`.
    fn after_bar_mounts(
        foo: impl FnOnce(&mut nri_api::ContainerAdjustment),
    ) -> crate::CreateResult {
        run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_mount(mount("/mnt/test", "/dev/00-bar"));
                }),
            ),
            ("10-foo", adjust(foo)),
        ])
        .unwrap()
    }

    #[test]
    fn mount_remove_and_readd_takes_ownership() {
        let r = after_bar_mounts(|a| {
            a.remove_mount("/mnt/test")
                .add_mount(mount("/mnt/test", "/dev/10-foo"));
        });
        assert_eq!(
            r.adjustment().mounts,
            vec![mount("/mnt/test", "/dev/10-foo")]
        );
        assert_eq!(
            container(&r).mounts,
            vec![mount("/mnt/test", "/dev/10-foo")]
        );
        assert_eq!(
            r.owners().key_owner(ID, Field::Mounts, "/mnt/test"),
            Some("10-foo")
        );
    }

    #[test]
    fn removing_another_plugins_mount_clears_it() {
        let r = after_bar_mounts(|a| {
            a.remove_mount("/mnt/test");
        });
        let m = &r.adjustment().mounts;
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].destination, "-/mnt/test");
        assert!(container(&r).mounts.is_empty());
        assert_eq!(
            r.owners().key_owner(ID, Field::Mounts, "/mnt/test"),
            Some("-10-foo")
        );
    }

    #[test]
    fn mount_replaces_unowned_original() {
        let mut original = Container::default();
        original.mounts.push(mount("/data", "/old"));
        let mut r = create_from(original);
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_mount(mount("/data", "/new"));
            }),
        )
        .unwrap();
        assert_eq!(container(&r).mounts, vec![mount("/data", "/new")]);
    }

    #[test]
    fn mount_removals_are_sorted_after_additions() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.remove_mount("/z")
                    .remove_mount("/b")
                    .add_mount(mount("/m", "/s"));
            }),
        )])
        .unwrap();
        let dests: Vec<_> = r
            .adjustment()
            .mounts
            .iter()
            .map(|m| m.destination.as_str())
            .collect();
        assert_eq!(dests, ["/m", "-/b", "-/z"]);
    }

    #[test]
    fn env_added_as_key_value_and_oci_string() {
        let mut original = Container::default();
        original.env.push("PATH=/bin".into());
        let mut r = create_from(original);
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_env("FOO", "bar=baz");
            }),
        )
        .unwrap();
        assert_eq!(
            r.adjustment().env,
            vec![KeyValue {
                key: "FOO".into(),
                value: "bar=baz".into()
            }]
        );
        assert_eq!(container(&r).env, ["PATH=/bin", "FOO=bar=baz"]);
        assert_eq!(r.owners().key_owner(ID, Field::Env, "FOO"), Some("00-a"));
    }

    #[test]
    fn env_conflict() {
        let add = |v: &'static str| {
            adjust(move |a| {
                a.add_env("FOO", v);
            })
        };
        let err = conflict(vec![("00-bar", add("1")), ("10-foo", add("2"))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Env FOO"#
        );
    }

    #[test]
    fn env_overrides_original_value_in_request() {
        let mut original = Container::default();
        original
            .env
            .extend(["FOO=old".into(), "BARE".into(), "X=1".into()]);
        let mut r = create_from(original);
        r.apply(
            "00-a",
            adjust(|a| {
                a.add_env("FOO", "new").add_env("BARE", "v");
            }),
        )
        .unwrap();
        assert_eq!(container(&r).env, ["X=1", "FOO=new", "BARE=v"]);
    }

    #[test]
    fn pure_env_removal_does_not_reach_reply() {
        let mut original = Container::default();
        original.env.extend(["FOO=old".into(), "KEEP=1".into()]);
        let mut r = create_from(original);
        r.apply(
            "00-a",
            adjust(|a| {
                a.remove_env("FOO");
            }),
        )
        .unwrap();
        assert!(r.adjustment().env.is_empty());
        // The next plugin no longer sees it, though the runtime will.
        assert_eq!(container(&r).env, ["KEEP=1"]);
    }

    #[test]
    fn env_removal_undoes_other_plugins_addition() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_env("FOO", "bar").add_env("KEEP", "1");
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_env("FOO");
                }),
            ),
        ])
        .unwrap();
        assert_eq!(
            r.adjustment().env,
            vec![KeyValue {
                key: "KEEP".into(),
                value: "1".into()
            }]
        );
        assert_eq!(container(&r).env, ["KEEP=1"]);
        assert_eq!(r.owners().key_owner(ID, Field::Env, "FOO"), Some("-10-foo"));
    }

    #[test]
    fn env_remove_and_readd_takes_ownership() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_env("FOO", "bar");
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_env("FOO").add_env("FOO", "foo");
                }),
            ),
        ])
        .unwrap();
        assert_eq!(
            r.adjustment().env,
            vec![KeyValue {
                key: "FOO".into(),
                value: "foo".into()
            }]
        );
        assert_eq!(container(&r).env, ["FOO=foo"]);
    }

    #[test]
    fn device_added_and_conflicts() {
        let add = |minor: i64| {
            adjust(move |a| {
                a.add_device(device("/dev/test", minor));
            })
        };
        let r = run(vec![("00-bar", add(100))]).unwrap();
        assert_eq!(devices_of(&r), [device("/dev/test", 100)]);
        let c = container(&r).linux.as_ref().unwrap();
        assert_eq!(c.devices, [device("/dev/test", 100)]);

        let err = conflict(vec![("00-bar", add(100)), ("10-foo", add(110))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Devices /dev/test"#
        );
    }

    #[test]
    fn device_remove_and_readd_takes_ownership() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_device(device("/dev/test", 100));
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_device("/dev/test")
                        .add_device(device("/dev/test", 110));
                }),
            ),
        ])
        .unwrap();
        assert_eq!(devices_of(&r), [device("/dev/test", 110)]);
        assert_eq!(
            r.owners().key_owner(ID, Field::Devices, "/dev/test"),
            Some("10-foo")
        );
    }

    #[test]
    fn pure_device_removal_does_not_reach_reply() {
        let mut r = create_linux(LinuxContainer {
            devices: vec![device("/dev/orig", 1), device("/dev/keep", 2)],
            ..Default::default()
        });
        r.apply(
            "00-a",
            adjust(|a| {
                a.remove_device("/dev/orig");
            }),
        )
        .unwrap();
        assert!(devices_of(&r).is_empty());
        let c = container(&r).linux.as_ref().unwrap();
        assert_eq!(c.devices, [device("/dev/keep", 2)]);
    }

    #[test]
    fn duplicate_addition_in_one_reply_is_self_conflict() {
        let err = conflict(vec![(
            "00-a",
            adjust(|a| {
                a.add_mount(mount("/m", "/1")).add_mount(mount("/m", "/2"));
            }),
        )]);
        assert_eq!(
            err,
            r#"plugins "00-a" and "00-a" both tried to set Mounts /m"#
        );
    }
}
