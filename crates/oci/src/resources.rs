//! Adjustments of `linux.resources`.

use nri_api::LinuxResources;
use serde_json::Value;

use crate::convert::{self, UNLIMITED_PIDS_LIMIT};
use crate::error::AdjustError;
use crate::json::{array_mut, elem_str, obj_mut, Obj};

/// Applies NRI resources to `linux.resources`, field by field:
///
/// * CPU: shares, quota, period, realtime runtime and period when present;
///   cpus and mems when not empty.
/// * Memory: only a non-zero limit is applied, and it sets both `limit`
///   and `swap` (the other memory fields are not applied).
/// * Hugepage limits: replaced by page size, or appended.
/// * Unified: each key set.
/// * Pids: present makes sure `pids` exists; a limit above `-1` is set
///   (`-1` means unlimited and leaves an existing limit alone).
/// * Device cgroup rules: appended.
///
/// `linux` is created even when nothing else is set.
pub(crate) fn adjust_resources(root: &mut Obj, r: &LinuxResources) -> Result<(), AdjustError> {
    let linux = obj_mut(root, "", "linux")?;
    if let Some(cpu) = &r.cpu {
        let mut sets: Vec<(&str, Value)> = Vec::new();
        if let Some(v) = &cpu.period {
            sets.push(("period", v.value.into()));
        }
        if let Some(v) = &cpu.quota {
            sets.push(("quota", v.value.into()));
        }
        if let Some(v) = &cpu.shares {
            sets.push(("shares", v.value.into()));
        }
        if !cpu.cpus.is_empty() {
            sets.push(("cpus", cpu.cpus.clone().into()));
        }
        if !cpu.mems.is_empty() {
            sets.push(("mems", cpu.mems.clone().into()));
        }
        if let Some(v) = &cpu.realtime_runtime {
            sets.push(("realtimeRuntime", v.value.into()));
        }
        if let Some(v) = &cpu.realtime_period {
            sets.push(("realtimePeriod", v.value.into()));
        }
        if !sets.is_empty() {
            let res = obj_mut(linux, "linux", "resources")?;
            let cpu_obj = obj_mut(res, "linux.resources", "cpu")?;
            for (k, v) in sets {
                cpu_obj.insert(k.into(), v);
            }
        }
    }
    if let Some(mem) = &r.memory {
        let limit = mem.limit.as_ref().map_or(0, |l| l.value);
        if limit != 0 {
            let res = obj_mut(linux, "linux", "resources")?;
            let mem_obj = obj_mut(res, "linux.resources", "memory")?;
            mem_obj.insert("limit".into(), limit.into());
            mem_obj.insert("swap".into(), limit.into());
        }
        let unapplied = [
            ("reservation", mem.reservation.is_some()),
            ("swap", mem.swap.is_some()),
            ("kernel", mem.kernel.is_some()),
            ("kernel_tcp", mem.kernel_tcp.is_some()),
            ("swappiness", mem.swappiness.is_some()),
            ("disable_oom_killer", mem.disable_oom_killer.is_some()),
            ("use_hierarchy", mem.use_hierarchy.is_some()),
        ];
        for (field, set) in unapplied {
            if set {
                tracing::warn!(field, "memory setting is not applied to the OCI spec");
            }
        }
    }
    for h in &r.hugepage_limits {
        let res = obj_mut(linux, "linux", "resources")?;
        let list = array_mut(res, "linux.resources", "hugepageLimits")?;
        let mut found = false;
        for entry in list.iter_mut() {
            if elem_str(entry, "linux.resources.hugepageLimits[]", "pageSize")? == h.page_size {
                if let Value::Object(o) = entry {
                    o.insert("limit".into(), h.limit.into());
                }
                found = true;
                break;
            }
        }
        if !found {
            list.push(convert::hugepage_limit(&h.page_size, h.limit));
        }
    }
    if !r.unified.is_empty() {
        let res = obj_mut(linux, "linux", "resources")?;
        let unified = obj_mut(res, "linux.resources", "unified")?;
        for (k, v) in &r.unified {
            unified.insert(k.clone(), Value::String(v.clone()));
        }
    }
    if let Some(pids) = &r.pids {
        let res = obj_mut(linux, "linux", "resources")?;
        let pids_obj = obj_mut(res, "linux.resources", "pids")?;
        if pids.limit > UNLIMITED_PIDS_LIMIT {
            pids_obj.insert("limit".into(), pids.limit.into());
        } else if pids_obj.get("limit").is_some_and(|l| !l.is_null()) {
            tracing::warn!(
                limit = pids.limit,
                "unlimited pids requested, but the spec's existing pids limit is kept"
            );
        }
    }
    if !r.devices.is_empty() {
        let res = obj_mut(linux, "linux", "resources")?;
        let list = array_mut(res, "linux.resources", "devices")?;
        list.extend(r.devices.iter().map(convert::device_cgroup));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::obj;
    use nri_api::{opt, HugepageLimit, LinuxDeviceCgroup};
    use serde_json::json;

    #[test]
    fn empty_resources_only_create_linux() {
        let mut root = obj(json!({}));
        adjust_resources(&mut root, &LinuxResources::default()).unwrap();
        assert_eq!(Value::Object(root), json!({"linux": {}}));
    }

    #[test]
    fn cpu_fields() {
        let mut root = obj(json!({"linux": {"resources": {"cpu": {"shares": 2, "burst": 7}}}}));
        let mut r = LinuxResources::default();
        let cpu = r.cpu_mut();
        cpu.shares = opt(1024u64);
        cpu.quota = opt(-1i64);
        cpu.period = opt(100000u64);
        cpu.realtime_runtime = opt(0i64);
        cpu.realtime_period = opt(0u64);
        cpu.cpus = "0-1".into();
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(
            root["linux"]["resources"]["cpu"],
            json!({"shares": 1024, "quota": -1, "period": 100000, "realtimeRuntime": 0,
                   "realtimePeriod": 0, "cpus": "0-1", "burst": 7})
        );
        // An empty CPU message changes nothing (and creates nothing).
        let mut root = obj(json!({"linux": {}}));
        let mut r = LinuxResources::default();
        r.cpu_mut();
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(root["linux"], json!({}));
    }

    #[test]
    fn memory_limit_sets_swap_and_nothing_else_applies() {
        let mut root = obj(json!({"linux": {"resources": {"memory": {"reservation": 5}}}}));
        let mut r = LinuxResources::default();
        r.memory_mut().limit = opt(4096i64);
        r.memory_mut().reservation = opt(1024i64);
        r.memory_mut().swap = opt(8192i64);
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(
            root["linux"]["resources"]["memory"],
            json!({"limit": 4096, "swap": 4096, "reservation": 5})
        );
        let mut r = LinuxResources::default();
        r.memory_mut().limit = opt(0i64);
        let mut root = obj(json!({}));
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(Value::Object(root), json!({"linux": {}}));
    }

    #[test]
    fn hugepages_unified_devices() {
        let mut root = obj(json!({"linux": {"resources": {
            "hugepageLimits": [{"pageSize": "2MB", "limit": 1}],
            "unified": {"a": "1"}
        }}}));
        let mut r = LinuxResources {
            hugepage_limits: vec![
                HugepageLimit {
                    page_size: "1GB".into(),
                    limit: 2,
                },
                HugepageLimit {
                    page_size: "2MB".into(),
                    limit: 3,
                },
            ],
            ..Default::default()
        };
        r.unified.insert("b".into(), "2".into());
        r.unified.insert("a".into(), "10".into());
        r.devices.push(LinuxDeviceCgroup {
            allow: true,
            r#type: "c".into(),
            major: opt(1i64),
            minor: None,
            access: "r".into(),
        });
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(
            root["linux"]["resources"],
            json!({
                "hugepageLimits": [{"pageSize": "2MB", "limit": 3}, {"pageSize": "1GB", "limit": 2}],
                "unified": {"a": "10", "b": "2"},
                "devices": [{"allow": true, "type": "c", "major": 1, "access": "r"}]
            })
        );
    }

    #[test]
    fn pids_limits() {
        let mut r = LinuxResources::default();
        r.pids_mut().limit = -1;
        let mut root = obj(json!({}));
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(root["linux"]["resources"]["pids"], json!({}));
        r.pids_mut().limit = 0;
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(root["linux"]["resources"]["pids"], json!({"limit": 0}));
        r.pids_mut().limit = 100;
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(root["linux"]["resources"]["pids"], json!({"limit": 100}));
        // -1 does not lift an existing limit (reference behaviour).
        r.pids_mut().limit = -1;
        adjust_resources(&mut root, &r).unwrap();
        assert_eq!(root["linux"]["resources"]["pids"], json!({"limit": 100}));
    }
}
