//! String-keyed map adjustments (annotations, sysctl, network devices) and
//! hooks.

use std::collections::BTreeMap;

use nri_api::markers::is_marked_for_removal;
use nri_api::{Hook, Hooks, LinuxNetDevice};
use serde_json::Value;

use crate::convert;
use crate::error::AdjustError;
use crate::json::{array_mut, drop_if_empty, existing_obj_mut, obj_mut, Obj};

/// Applies a map of `key: value` / `-key` entries to the string map member
/// `key` of `parent`: all removals first, then all additions, each in key
/// order. The map is created only for additions and dropped when left
/// empty.
pub(crate) fn adjust_string_map(
    parent: &mut Obj,
    path: &str,
    key: &str,
    entries: &BTreeMap<String, String>,
) -> Result<(), AdjustError> {
    if entries.is_empty() {
        return Ok(());
    }
    if let Some(map) = existing_obj_mut(parent, path, key)? {
        for k in entries.keys() {
            if let (name, true) = is_marked_for_removal(k) {
                map.remove(name);
            }
        }
    }
    let mut additions = entries
        .iter()
        .filter(|(k, _)| !is_marked_for_removal(k).1)
        .peekable();
    if additions.peek().is_some() {
        let map = obj_mut(parent, path, key)?;
        for (k, v) in additions {
            map.insert(k.clone(), Value::String(v.clone()));
        }
    }
    drop_if_empty(parent, key);
    Ok(())
}

/// Applies sysctl adjustments to `linux.sysctl`; `linux` is created only
/// for additions.
pub(crate) fn adjust_sysctl(
    root: &mut Obj,
    sysctl: &BTreeMap<String, String>,
) -> Result<(), AdjustError> {
    let adds = sysctl.keys().any(|k| !is_marked_for_removal(k).1);
    let linux = if adds {
        Some(obj_mut(root, "", "linux")?)
    } else {
        existing_obj_mut(root, "", "linux")?
    };
    match linux {
        Some(linux) => adjust_string_map(linux, "linux", "sysctl", sysctl),
        None => Ok(()),
    }
}

/// Applies network device adjustments to `linux.netDevices` (removals
/// first, then additions). Any entry makes sure `linux` exists.
pub(crate) fn adjust_net_devices(
    root: &mut Obj,
    devices: &BTreeMap<String, LinuxNetDevice>,
) -> Result<(), AdjustError> {
    if devices.is_empty() {
        return Ok(());
    }
    let linux = obj_mut(root, "", "linux")?;
    let map = obj_mut(linux, "linux", "netDevices")?;
    for host in devices.keys() {
        if let (name, true) = is_marked_for_removal(host) {
            map.remove(name);
        }
    }
    for (host, dev) in devices {
        if !is_marked_for_removal(host).1 {
            map.insert(host.clone(), convert::net_device(dev));
        }
    }
    drop_if_empty(linux, "netDevices");
    Ok(())
}

/// Appends hooks to the spec's hooks, category by category.
pub(crate) fn adjust_hooks(root: &mut Obj, hooks: &Hooks) -> Result<(), AdjustError> {
    let categories: [(&str, &Vec<Hook>); 6] = [
        ("prestart", &hooks.prestart),
        ("poststart", &hooks.poststart),
        ("poststop", &hooks.poststop),
        ("createRuntime", &hooks.create_runtime),
        ("createContainer", &hooks.create_container),
        ("startContainer", &hooks.start_container),
    ];
    for (name, list) in categories {
        if list.is_empty() {
            continue;
        }
        let spec_hooks = obj_mut(root, "", "hooks")?;
        let target = array_mut(spec_hooks, "hooks", name)?;
        target.extend(list.iter().map(convert::hook));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::obj;
    use serde_json::json;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn removals_then_additions() {
        let mut root = obj(json!({"annotations": {"a": "1", "b": "2"}}));
        let adj = map(&[("-a", ""), ("a", "new"), ("-b", ""), ("c", "3")]);
        adjust_string_map(&mut root, "", "annotations", &adj).unwrap();
        // "-a" and "a" together: the addition wins, deterministically.
        assert_eq!(
            Value::Object(root),
            json!({"annotations": {"a": "new", "c": "3"}})
        );
    }

    #[test]
    fn removal_only_never_creates_and_empty_map_is_dropped() {
        let mut root = obj(json!({}));
        adjust_string_map(&mut root, "", "annotations", &map(&[("-x", "")])).unwrap();
        assert!(root.is_empty());
        let mut root = obj(json!({"annotations": {"x": "1"}}));
        adjust_string_map(&mut root, "", "annotations", &map(&[("-x", "")])).unwrap();
        assert!(root.is_empty());
    }

    #[test]
    fn empty_adjustment_leaves_even_empty_maps() {
        let mut root = obj(json!({"annotations": {}}));
        adjust_string_map(&mut root, "", "annotations", &BTreeMap::new()).unwrap();
        assert_eq!(Value::Object(root), json!({"annotations": {}}));
    }

    #[test]
    fn sysctl_removals_do_not_create_linux() {
        let mut root = obj(json!({}));
        adjust_sysctl(&mut root, &map(&[("-net.x", "")])).unwrap();
        assert!(root.is_empty());
        adjust_sysctl(&mut root, &map(&[("-net.x", ""), ("net.y", "1")])).unwrap();
        assert_eq!(
            Value::Object(root),
            json!({"linux": {"sysctl": {"net.y": "1"}}})
        );
    }

    #[test]
    fn net_devices_create_linux_even_for_removals() {
        let mut root = obj(json!({}));
        let mut devs = BTreeMap::new();
        devs.insert("-eth9".to_string(), LinuxNetDevice::default());
        adjust_net_devices(&mut root, &devs).unwrap();
        assert_eq!(Value::Object(root.clone()), json!({"linux": {}}));
        devs.insert(
            "eth0".to_string(),
            LinuxNetDevice {
                name: "ctr0".into(),
            },
        );
        adjust_net_devices(&mut root, &devs).unwrap();
        assert_eq!(
            Value::Object(root),
            json!({"linux": {"netDevices": {"eth0": {"name": "ctr0"}}}})
        );
    }

    #[test]
    fn hooks_are_appended_per_category() {
        let mut root = obj(json!({"hooks": {"prestart": [{"path": "/old"}], "x-vendor": true}}));
        let hook = |p: &str| Hook {
            path: p.into(),
            ..Default::default()
        };
        let hooks = Hooks {
            prestart: vec![hook("/p")],
            create_runtime: vec![hook("/cr1"), hook("/cr2")],
            start_container: vec![hook("/sc")],
            ..Default::default()
        };
        adjust_hooks(&mut root, &hooks).unwrap();
        assert_eq!(
            Value::Object(root),
            json!({"hooks": {
                "prestart": [{"path": "/old"}, {"path": "/p"}],
                "createRuntime": [{"path": "/cr1"}, {"path": "/cr2"}],
                "startContainer": [{"path": "/sc"}],
                "x-vendor": true
            }})
        );
        let mut root = obj(json!({}));
        adjust_hooks(&mut root, &Hooks::default()).unwrap();
        assert!(root.is_empty());
    }
}
