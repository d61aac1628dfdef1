//! Adjustments of `linux`: devices, cgroups path, seccomp, namespaces,
//! memory policy and RDT.

use nri_api::markers::is_marked_for_removal;
use nri_api::{LinuxDevice, LinuxMemoryPolicy, LinuxNamespace, LinuxRdt, LinuxSeccomp};
use serde_json::Value;

use crate::convert;
use crate::error::AdjustError;
use crate::json::{
    array_mut, drop_if_empty, elem_str, existing_array_mut, existing_obj_mut, obj_mut,
    set_or_remove, strings, Obj,
};

/// Namespace types known to the OCI runtime spec.
pub const NAMESPACE_TYPES: [&str; 8] = [
    "network", "pid", "mount", "ipc", "uts", "user", "cgroup", "time",
];

fn linux(root: &mut Obj) -> Result<&mut Obj, AdjustError> {
    obj_mut(root, "", "linux")
}

/// Index of the first element of `list` whose string member `key` equals
/// `value`.
fn position(
    list: &[Value],
    path: &str,
    key: &str,
    value: &str,
) -> Result<Option<usize>, AdjustError> {
    for (i, elem) in list.iter().enumerate() {
        if elem_str(elem, path, key)? == value {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Applies device adjustments: each device first removes the spec device
/// with the same path; unmarked devices are then added (replacing by path
/// or appended) together with a device cgroup rule allowing them. Rules
/// of removed devices are left in place, as in the reference.
pub(crate) fn adjust_devices(root: &mut Obj, devices: &[LinuxDevice]) -> Result<(), AdjustError> {
    if devices.is_empty() {
        return Ok(());
    }
    for d in devices {
        let (path, marked) = is_marked_for_removal(&d.path);
        if let Some(linux) = existing_obj_mut(root, "", "linux")? {
            if let Some(list) = existing_array_mut(linux, "linux", "devices")? {
                if let Some(i) = position(list, "linux.devices[]", "path", path)? {
                    list.remove(i);
                }
            }
        }
        if marked {
            continue;
        }
        let linux = linux(root)?;
        let list = array_mut(linux, "linux", "devices")?;
        let dev = convert::device(d);
        match position(list, "linux.devices[]", "path", &d.path)? {
            Some(i) => {
                if let Some(slot) = list.get_mut(i) {
                    *slot = dev;
                }
            }
            None => list.push(dev),
        }
        let resources = obj_mut(linux, "linux", "resources")?;
        array_mut(resources, "linux.resources", "devices")?.push(convert::device_allow_rule(d));
    }
    if let Some(linux) = existing_obj_mut(root, "", "linux")? {
        drop_if_empty(linux, "devices");
    }
    Ok(())
}

/// Sets `linux.cgroupsPath` when `path` is not empty.
pub(crate) fn adjust_cgroups_path(root: &mut Obj, path: &str) -> Result<(), AdjustError> {
    if !path.is_empty() {
        linux(root)?.insert("cgroupsPath".into(), path.into());
    }
    Ok(())
}

/// Replaces `linux.seccomp` with the given policy.
pub(crate) fn set_seccomp(root: &mut Obj, policy: &LinuxSeccomp) -> Result<(), AdjustError> {
    if policy.default_errno.is_some() {
        tracing::warn!("seccomp policy default_errno is not applied to the OCI spec");
    }
    linux(root)?.insert("seccomp".into(), convert::seccomp(policy));
    Ok(())
}

fn check_namespace(ns: &str) -> Result<(), AdjustError> {
    if NAMESPACE_TYPES.contains(&ns) {
        Ok(())
    } else {
        Err(AdjustError::UnrecognizedNamespace(ns.to_string()))
    }
}

/// Applies namespace adjustments: marked types remove the namespace of
/// that type, others add it or replace its path.
pub(crate) fn adjust_namespaces(
    root: &mut Obj,
    namespaces: &[LinuxNamespace],
) -> Result<(), AdjustError> {
    if namespaces.is_empty() {
        return Ok(());
    }
    for n in namespaces {
        let (ns, marked) = is_marked_for_removal(&n.r#type);
        check_namespace(ns)?;
        if marked {
            if let Some(linux) = existing_obj_mut(root, "", "linux")? {
                if let Some(list) = existing_array_mut(linux, "linux", "namespaces")? {
                    if let Some(i) = position(list, "linux.namespaces[]", "type", ns)? {
                        list.remove(i);
                    }
                }
            }
            continue;
        }
        let list = array_mut(linux(root)?, "linux", "namespaces")?;
        match position(list, "linux.namespaces[]", "type", ns)? {
            Some(i) => {
                if let Some(Value::Object(entry)) = list.get_mut(i) {
                    let path = (!n.path.is_empty()).then(|| Value::String(n.path.clone()));
                    set_or_remove(entry, "path", path);
                }
            }
            None => {
                let mut entry = Obj::new();
                entry.insert("type".into(), ns.into());
                if !n.path.is_empty() {
                    entry.insert("path".into(), n.path.clone().into());
                }
                list.push(Value::Object(entry));
            }
        }
    }
    if let Some(linux) = existing_obj_mut(root, "", "linux")? {
        drop_if_empty(linux, "namespaces");
    }
    Ok(())
}

/// Sets (or, for an unknown mode, clears) `linux.memoryPolicy`.
pub(crate) fn set_memory_policy(
    root: &mut Obj,
    policy: &LinuxMemoryPolicy,
) -> Result<(), AdjustError> {
    let value = convert::memory_policy(policy);
    if value.is_none() {
        tracing::warn!(
            mode = policy.mode,
            "unknown memory policy mode, clearing the memory policy"
        );
    }
    set_or_remove(linux(root)?, "memoryPolicy", value);
    Ok(())
}

/// Applies an RDT adjustment to `linux.intelRdt`: `remove` drops it, then
/// the CLOS id, schemata and monitoring flag are set when present.
pub(crate) fn adjust_rdt(root: &mut Obj, rdt: &LinuxRdt) -> Result<(), AdjustError> {
    let linux = linux(root)?;
    if rdt.remove {
        linux.remove("intelRdt");
    }
    if let Some(clos) = &rdt.clos_id {
        let value = (!clos.value.is_empty()).then(|| Value::String(clos.value.clone()));
        set_or_remove(obj_mut(linux, "linux", "intelRdt")?, "closID", value);
    }
    if let Some(schemata) = &rdt.schemata {
        let value = (!schemata.value.is_empty()).then(|| strings(&schemata.value));
        set_or_remove(obj_mut(linux, "linux", "intelRdt")?, "schemata", value);
    }
    if let Some(monitoring) = &rdt.enable_monitoring {
        let value = monitoring.value.then_some(Value::Bool(true));
        set_or_remove(
            obj_mut(linux, "linux", "intelRdt")?,
            "enableMonitoring",
            value,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::obj;
    use nri_api::{opt, MpolMode};
    use serde_json::json;

    fn dev(path: &str, t: &str, major: i64, minor: i64) -> LinuxDevice {
        LinuxDevice {
            path: path.into(),
            r#type: t.into(),
            major,
            minor,
            ..Default::default()
        }
    }

    #[test]
    fn devices_add_replace_remove_and_rules() {
        let mut root = obj(json!({"linux": {
            "devices": [{"path": "/dev/a", "type": "c", "major": 1, "minor": 1},
                        {"path": "/dev/b", "type": "c", "major": 1, "minor": 2}],
            "resources": {"devices": [{"allow": false, "access": "rwm"}]}
        }}));
        let adj = [
            dev("/dev/b", "b", 8, 0),
            dev("-/dev/a", "", 0, 0),
            dev("/dev/new", "c", 10, 200),
        ];
        adjust_devices(&mut root, &adj).unwrap();
        assert_eq!(
            root["linux"]["devices"],
            json!([
                {"path": "/dev/b", "type": "b", "major": 8, "minor": 0},
                {"path": "/dev/new", "type": "c", "major": 10, "minor": 200}
            ])
        );
        assert_eq!(
            root["linux"]["resources"]["devices"],
            json!([
                {"allow": false, "access": "rwm"},
                {"allow": true, "type": "b", "major": 8, "minor": 0, "access": "rwm"},
                {"allow": true, "type": "c", "major": 10, "minor": 200, "access": "rw"}
            ])
        );
    }

    #[test]
    fn removing_all_devices_drops_the_list_and_keeps_rules() {
        let mut root = obj(
            json!({"linux": {"devices": [{"path": "/dev/a", "type": "c", "major": 1, "minor": 1}],
                                            "resources": {"devices": [{"allow": true, "access": "rw"}]}}}),
        );
        adjust_devices(&mut root, &[dev("-/dev/a", "", 0, 0)]).unwrap();
        assert_eq!(
            Value::Object(root),
            json!({"linux": {"resources": {"devices": [{"allow": true, "access": "rw"}]}}})
        );
        let mut root = obj(json!({}));
        adjust_devices(&mut root, &[dev("-/dev/a", "", 0, 0)]).unwrap();
        assert!(root.is_empty());
    }

    #[test]
    fn namespaces() {
        let mut root = obj(json!({"linux": {"namespaces": [
            {"type": "pid"}, {"type": "network", "path": "/var/run/netns/x", "x-vendor": 1}, {"type": "ipc"}
        ]}}));
        let ns = |t: &str, p: &str| LinuxNamespace {
            r#type: t.into(),
            path: p.into(),
        };
        adjust_namespaces(
            &mut root,
            &[
                ns("network", ""),
                ns("-ipc", ""),
                ns("user", "/proc/1/ns/user"),
                ns("pid", "/p"),
            ],
        )
        .unwrap();
        assert_eq!(
            root["linux"]["namespaces"],
            json!([
                {"type": "pid", "path": "/p"},
                {"type": "network", "x-vendor": 1},
                {"type": "user", "path": "/proc/1/ns/user"}
            ])
        );
        let err = adjust_namespaces(&mut root, &[ns("-bogus", "")]).unwrap_err();
        assert_eq!(err.to_string(), r#"unrecognized namespace "bogus""#);
        let err = adjust_namespaces(&mut root, &[ns("net", "")]).unwrap_err();
        assert_eq!(err.to_string(), r#"unrecognized namespace "net""#);
    }

    #[test]
    fn cgroups_path_seccomp_memory_policy() {
        let mut root = obj(json!({}));
        adjust_cgroups_path(&mut root, "").unwrap();
        assert!(root.is_empty());
        adjust_cgroups_path(&mut root, "/kubepods/x").unwrap();
        assert_eq!(root["linux"]["cgroupsPath"], "/kubepods/x");
        root["linux"].as_object_mut().unwrap().insert(
            "seccomp".into(),
            json!({"defaultAction": "SCMP_ACT_KILL", "defaultErrnoRet": 1, "x": 1}),
        );
        let policy = LinuxSeccomp {
            default_action: "SCMP_ACT_ALLOW".into(),
            default_errno: opt(5u32),
            ..Default::default()
        };
        set_seccomp(&mut root, &policy).unwrap();
        assert_eq!(
            root["linux"]["seccomp"],
            json!({"defaultAction": "SCMP_ACT_ALLOW"})
        );
        let mp = LinuxMemoryPolicy {
            mode: MpolMode::MpolInterleave as i32,
            nodes: "0,1".into(),
            flags: vec![],
        };
        set_memory_policy(&mut root, &mp).unwrap();
        assert_eq!(
            root["linux"]["memoryPolicy"],
            json!({"mode": "MPOL_INTERLEAVE", "nodes": "0,1"})
        );
        set_memory_policy(&mut root, &LinuxMemoryPolicy { mode: 99, ..mp }).unwrap();
        assert!(root["linux"].get("memoryPolicy").is_none());
    }

    #[test]
    fn rdt() {
        let mut root = obj(json!({"linux": {"intelRdt": {"closID": "old", "enableCMT": true}}}));
        let rdt = LinuxRdt {
            clos_id: opt("gold"),
            schemata: Some(vec!["L3:0=f".to_string()].into()),
            enable_monitoring: opt(true),
            remove: false,
        };
        adjust_rdt(&mut root, &rdt).unwrap();
        assert_eq!(
            root["linux"]["intelRdt"],
            json!({"closID": "gold", "schemata": ["L3:0=f"], "enableMonitoring": true, "enableCMT": true})
        );
        let rdt = LinuxRdt {
            enable_monitoring: opt(false),
            schemata: Some(Vec::<String>::new().into()),
            ..Default::default()
        };
        adjust_rdt(&mut root, &rdt).unwrap();
        assert_eq!(
            root["linux"]["intelRdt"],
            json!({"closID": "gold", "enableCMT": true})
        );
        let rdt = LinuxRdt {
            remove: true,
            clos_id: opt("silver"),
            ..Default::default()
        };
        adjust_rdt(&mut root, &rdt).unwrap();
        assert_eq!(root["linux"]["intelRdt"], json!({"closID": "silver"}));
        let rdt = LinuxRdt {
            remove: true,
            ..Default::default()
        };
        adjust_rdt(&mut root, &rdt).unwrap();
        assert_eq!(root["linux"], json!({}));
    }
}
