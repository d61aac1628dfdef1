//! Map-valued fields: annotations, sysctl and network devices.
//!
//! A key `-K` in a plugin's map asks for the removal of `K`:
//! * removal and setting of the same key by one plugin ("remove, then set")
//!   clears the key's ownership, so the plugin takes it over from whoever set
//!   it before; the reply then holds both `-K` and `K`;
//! * a pure removal only adds `-K` to the reply: it neither clears ownership
//!   nor touches the request container (reference behaviour, decision \[5\]).

use std::collections::{BTreeMap, BTreeSet};

use nri_api::markers::{is_marked_for_removal, mark_for_removal};
use nri_api::{Field, LinuxNetDevice};

use super::{linux_of, reply_linux_of, Merge};
use crate::error::ConflictError;
use crate::owners::Owners;

/// Where one map-valued field is merged.
struct MapTarget<'a, V> {
    field: Field,
    container: &'a mut BTreeMap<String, V>,
    reply: &'a mut BTreeMap<String, V>,
    /// The reply value stored under a removal marker.
    marker_value: fn() -> V,
}

fn merge_map<V: Clone>(
    owners: &mut Owners,
    id: &str,
    plugin: &str,
    changes: BTreeMap<String, V>,
    target: MapTarget<'_, V>,
) -> Result<(), ConflictError> {
    let MapTarget {
        field,
        container,
        reply,
        marker_value,
    } = target;

    let mut removed = BTreeSet::new();
    let mut set = Vec::with_capacity(changes.len());
    for (key, value) in changes {
        match is_marked_for_removal(&key) {
            (bare, true) => {
                removed.insert(bare.to_string());
            }
            (_, false) => set.push((key, value)),
        }
    }

    for (key, value) in set {
        if removed.remove(&key) {
            owners.clear_key(id, field, &key, plugin);
            container.remove(&key);
            reply.insert(mark_for_removal(&key), marker_value());
        }
        owners.claim_key(id, field, &key, plugin)?;
        container.insert(key.clone(), value.clone());
        reply.insert(key, value);
    }

    for key in removed {
        reply.insert(mark_for_removal(&key), marker_value());
    }
    Ok(())
}

impl Merge<'_> {
    /// Annotations, keyed by annotation key.
    pub(super) fn annotations(
        &mut self,
        changes: BTreeMap<String, String>,
    ) -> Result<(), ConflictError> {
        if changes.is_empty() {
            return Ok(());
        }
        let target = MapTarget {
            field: Field::Annotations,
            container: &mut self.container.annotations,
            reply: &mut self.reply.annotations,
            marker_value: String::new,
        };
        merge_map(self.owners, self.id, self.plugin, changes, target)
    }

    /// Sysctl settings, keyed by sysctl name. Removal markers go to the
    /// reply's sysctl map (some earlier reference releases put them into the
    /// annotations by mistake).
    pub(super) fn sysctl(
        &mut self,
        changes: BTreeMap<String, String>,
    ) -> Result<(), ConflictError> {
        if changes.is_empty() {
            return Ok(());
        }
        let target = MapTarget {
            field: Field::Sysctl,
            container: &mut linux_of(self.container).sysctl,
            reply: &mut reply_linux_of(self.reply).sysctl,
            marker_value: String::new,
        };
        merge_map(self.owners, self.id, self.plugin, changes, target)
    }

    /// Network devices, keyed by host interface name. A removal marker maps
    /// to an empty device (nil in the reference).
    pub(super) fn net_devices(
        &mut self,
        changes: BTreeMap<String, LinuxNetDevice>,
    ) -> Result<(), ConflictError> {
        if changes.is_empty() {
            return Ok(());
        }
        let target = MapTarget {
            field: Field::LinuxNetDevices,
            container: &mut linux_of(self.container).net_devices,
            reply: &mut reply_linux_of(self.reply).net_devices,
            marker_value: LinuxNetDevice::default,
        };
        merge_map(self.owners, self.id, self.plugin, changes, target)
    }
}

#[cfg(test)]
mod tests {
    use nri_api::{Container, Field, LinuxContainer, LinuxNetDevice};

    use crate::merge::testutil::*;

    fn linux(r: &crate::CreateResult) -> &nri_api::LinuxContainerAdjustment {
        r.adjustment().linux.as_ref().unwrap()
    }

    #[test]
    fn annotation_is_set_in_reply_and_request() {
        let r = run(vec![(
            "00-test",
            adjust(|a| {
                a.add_annotation("key", "value");
            }),
        )])
        .unwrap();
        assert_eq!(r.adjustment().annotations["key"], "value");
        assert_eq!(container(&r).annotations["key"], "value");
        assert_eq!(
            r.owners().key_owner(ID, Field::Annotations, "key"),
            Some("00-test")
        );
    }

    #[test]
    fn annotation_conflict() {
        let err = conflict(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_annotation("key", "00-bar");
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.add_annotation("key", "10-foo");
                }),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Annotations key"#
        );
    }

    #[test]
    fn annotation_self_conflict_across_calls() {
        let err = conflict(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_annotation("key", "1");
                }),
            ),
            (
                "00-bar",
                adjust(|a| {
                    a.add_annotation("key", "2");
                }),
            ),
        ]);
        assert_eq!(
            err,
            r#"plugins "00-bar" and "00-bar" both tried to set Annotations key"#
        );
    }

    #[test]
    fn annotation_remove_then_set_takes_ownership() {
        let r = run(vec![
            (
                "00-bar",
                adjust(|a| {
                    a.add_annotation("key", "00-bar");
                }),
            ),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_annotation("key").add_annotation("key", "10-foo");
                }),
            ),
        ])
        .unwrap();
        let ann = &r.adjustment().annotations;
        assert_eq!(ann.len(), 2);
        assert_eq!(ann["-key"], "");
        assert_eq!(ann["key"], "10-foo");
        assert_eq!(container(&r).annotations["key"], "10-foo");
        assert_eq!(
            r.owners().key_owner(ID, Field::Annotations, "key"),
            Some("10-foo")
        );

        // Ownership moved: a third plugin now conflicts with 10-foo.
        let mut r = r;
        let err = r
            .apply(
                "20-baz",
                adjust(|a| {
                    a.add_annotation("key", "20");
                }),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"plugins "20-baz" and "10-foo" both tried to set Annotations key"#
        );
    }

    #[test]
    fn pure_annotation_removal_reaches_reply_only() {
        let mut original = Container::default();
        original.annotations.insert("orig".into(), "x".into());
        let mut r = create_from(original);
        r.apply(
            "00-bar",
            adjust(|a| {
                a.add_annotation("key", "00-bar");
            }),
        )
        .unwrap();
        r.apply(
            "10-foo",
            adjust(|a| {
                a.remove_annotation("key").remove_annotation("orig");
            }),
        )
        .unwrap();
        let ann = &r.adjustment().annotations;
        assert_eq!(ann["-key"], "");
        assert_eq!(ann["-orig"], "");
        assert_eq!(ann["key"], "00-bar");
        // Neither ownership nor the request container change.
        assert_eq!(
            r.owners().key_owner(ID, Field::Annotations, "key"),
            Some("00-bar")
        );
        assert_eq!(r.owners().key_owner(ID, Field::Annotations, "orig"), None);
        assert_eq!(container(&r).annotations["orig"], "x");
        assert_eq!(container(&r).annotations["key"], "00-bar");
    }

    #[test]
    fn sysctl_set_conflict_and_takeover() {
        let set = |v: &'static str| {
            adjust(move |a| {
                a.set_linux_sysctl("net.ipv4.ip_forward", v);
            })
        };
        let err = conflict(vec![("00-bar", set("1")), ("10-foo", set("0"))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set Sysctl net.ipv4.ip_forward"#
        );

        let r = run(vec![
            ("00-bar", set("1")),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_linux_sysctl("net.ipv4.ip_forward")
                        .set_linux_sysctl("net.ipv4.ip_forward", "0");
                }),
            ),
        ])
        .unwrap();
        let sysctl = &linux(&r).sysctl;
        assert_eq!(sysctl["-net.ipv4.ip_forward"], "");
        assert_eq!(sysctl["net.ipv4.ip_forward"], "0");
        let c = container(&r).linux.as_ref().unwrap();
        assert_eq!(c.sysctl["net.ipv4.ip_forward"], "0");
    }

    #[test]
    fn pure_sysctl_removal_goes_to_sysctl_not_annotations() {
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.remove_linux_sysctl("kernel.x");
            }),
        )])
        .unwrap();
        assert_eq!(linux(&r).sysctl["-kernel.x"], "");
        assert!(r.adjustment().annotations.is_empty());
        assert!(r.owners().is_empty());
    }

    #[test]
    fn net_device_takeover_stores_empty_marker() {
        let add = |name: &'static str| {
            adjust(move |a| {
                a.add_linux_net_device("hostIf", LinuxNetDevice { name: name.into() });
            })
        };
        let err = conflict(vec![("00-bar", add("a")), ("10-foo", add("b"))]);
        assert_eq!(
            err,
            r#"plugins "10-foo" and "00-bar" both tried to set LinuxNetDevices hostIf"#
        );
        let r = run(vec![
            ("00-bar", add("barIf")),
            (
                "10-foo",
                adjust(|a| {
                    a.remove_linux_net_device("hostIf").add_linux_net_device(
                        "hostIf",
                        LinuxNetDevice {
                            name: "containerIf".into(),
                        },
                    );
                }),
            ),
        ])
        .unwrap();
        let devs = &linux(&r).net_devices;
        assert_eq!(devs["-hostIf"], LinuxNetDevice::default());
        assert_eq!(devs["hostIf"].name, "containerIf");
        let c = container(&r).linux.as_ref().unwrap();
        assert_eq!(c.net_devices["hostIf"].name, "containerIf");
    }

    #[test]
    fn pure_net_device_removal_keeps_request() {
        let mut original = Container {
            linux: Some(LinuxContainer::default()),
            ..Default::default()
        };
        if let Some(l) = original.linux.as_mut() {
            l.net_devices
                .insert("eth1".into(), LinuxNetDevice { name: "x".into() });
        }
        let mut r = create_from(original);
        r.apply(
            "00-a",
            adjust(|a| {
                a.remove_linux_net_device("eth1");
            }),
        )
        .unwrap();
        assert!(linux(&r).net_devices.contains_key("-eth1"));
        let c = container(&r).linux.as_ref().unwrap();
        assert!(c.net_devices.contains_key("eth1"));
    }

    #[test]
    fn marker_only_keys_are_handled() {
        // "-" removes the empty key; "--x" removes "-x".
        let r = run(vec![(
            "00-a",
            adjust(|a| {
                a.annotations.insert("-".into(), String::new());
                a.annotations.insert("--x".into(), String::new());
                a.annotations.insert(String::new(), "empty".into());
            }),
        )])
        .unwrap();
        let ann = &r.adjustment().annotations;
        assert_eq!(ann["-"], "");
        assert_eq!(ann["--x"], "");
        assert_eq!(ann[""], "empty");
        assert_eq!(
            r.owners().key_owner(ID, Field::Annotations, ""),
            Some("00-a")
        );
    }
}
