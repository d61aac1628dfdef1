//! What plugins set: the owned fields of a container, each with its plugin
//! and its value in the merged adjustment.

use std::fmt::{self, Write as _};

use nri_api::{
    ContainerAdjustment, Field, LinuxContainerAdjustment, LinuxDevice, LinuxResources, Mount,
    PosixRlimit, ValidateContainerAdjustmentRequest,
};

/// One field (or one key of a compound field) that one plugin set.
#[derive(Debug, Clone)]
pub(crate) struct Item<'a> {
    pub field: Field,
    /// The plugin, qualified (`10-foo`).
    pub plugin: &'a str,
    /// The plugin removed the entry rather than setting it.
    pub removed: bool,
    /// The key within a compound field (empty for a simple field).
    pub key: &'a str,
    pub value: Value<'a>,
}

#[derive(Debug, Clone)]
pub(crate) enum Value<'a> {
    Unknown,
    Text(&'a str),
    Mount(&'a Mount),
    Device(&'a LinuxDevice),
    Hooks(Vec<&'a str>),
    Rlimit(&'a PosixRlimit),
    Number(i128),
    Args(&'a [String]),
}

/// Every field of the container that a plugin owns, in field order and, within
/// a field, in key order. Accumulated owners (`10-a,20-b` for OCI hooks) give
/// one item per plugin.
pub(crate) fn collect<'a>(req: &'a ValidateContainerAdjustmentRequest) -> Vec<Item<'a>> {
    let mut out = Vec::new();
    let id = req.container.as_ref().map_or("", |c| c.id.as_str());
    let Some(owners) = req.owners.as_ref().and_then(|o| o.owners.get(id)) else {
        return out;
    };
    let adjust = req.adjust.as_ref();
    for (field, owner) in &owners.simple {
        let Ok(field) = Field::try_from(*field) else {
            continue;
        };
        for one in owner.split(',').filter(|s| !s.is_empty()) {
            let (plugin, removed) = split_owner(one);
            out.push(Item {
                field,
                plugin,
                removed,
                key: "",
                value: simple_value(field, adjust),
            });
        }
    }
    for (field, keys) in &owners.compound {
        let Ok(field) = Field::try_from(*field) else {
            continue;
        };
        for (key, owner) in &keys.owners {
            let (plugin, removed) = split_owner(owner);
            let value = if removed {
                Value::Unknown
            } else {
                compound_value(field, key, adjust)
            };
            out.push(Item {
                field,
                plugin,
                removed,
                key,
                value,
            });
        }
    }
    out.sort_by_key(|i| i.field as i32);
    out
}

fn split_owner(owner: &str) -> (&str, bool) {
    match owner.strip_prefix('-') {
        Some(p) => (p, true),
        None => (owner, false),
    }
}

fn linux(a: Option<&ContainerAdjustment>) -> Option<&LinuxContainerAdjustment> {
    a?.linux.as_ref()
}

fn resources(a: Option<&ContainerAdjustment>) -> Option<&LinuxResources> {
    linux(a)?.resources.as_ref()
}

fn simple_value(field: Field, a: Option<&ContainerAdjustment>) -> Value<'_> {
    let res = resources(a);
    let mem = res.and_then(|r| r.memory.as_ref());
    let cpu = res.and_then(|r| r.cpu.as_ref());
    let num = |v: Option<i128>| v.map_or(Value::Unknown, Value::Number);
    match field {
        Field::OciHooks => {
            let Some(h) = a.and_then(|a| a.hooks.as_ref()) else {
                return Value::Hooks(Vec::new());
            };
            Value::Hooks(
                [
                    &h.prestart,
                    &h.create_runtime,
                    &h.create_container,
                    &h.start_container,
                    &h.poststart,
                    &h.poststop,
                ]
                .into_iter()
                .flatten()
                .map(|h| h.path.as_str())
                .collect(),
            )
        }
        Field::Args => a.map_or(Value::Unknown, |a| Value::Args(&a.args)),
        Field::MemLimit => num(mem.and_then(|m| m.limit.as_ref()).map(|v| v.value.into())),
        Field::MemReservation => num(mem
            .and_then(|m| m.reservation.as_ref())
            .map(|v| v.value.into())),
        Field::MemSwapLimit => num(mem.and_then(|m| m.swap.as_ref()).map(|v| v.value.into())),
        Field::MemKernelLimit => num(mem.and_then(|m| m.kernel.as_ref()).map(|v| v.value.into())),
        Field::MemTcpLimit => num(mem
            .and_then(|m| m.kernel_tcp.as_ref())
            .map(|v| v.value.into())),
        Field::MemSwappiness => num(mem
            .and_then(|m| m.swappiness.as_ref())
            .map(|v| v.value.into())),
        Field::CpuShares => num(cpu.and_then(|c| c.shares.as_ref()).map(|v| v.value.into())),
        Field::CpuQuota => num(cpu.and_then(|c| c.quota.as_ref()).map(|v| v.value.into())),
        Field::CpuPeriod => num(cpu.and_then(|c| c.period.as_ref()).map(|v| v.value.into())),
        Field::CpuRealtimeRuntime => num(cpu
            .and_then(|c| c.realtime_runtime.as_ref())
            .map(|v| v.value.into())),
        Field::CpuRealtimePeriod => num(cpu
            .and_then(|c| c.realtime_period.as_ref())
            .map(|v| v.value.into())),
        Field::CpuSetCpUs => cpu.map_or(Value::Unknown, |c| Value::Text(&c.cpus)),
        Field::CpuSetMems => cpu.map_or(Value::Unknown, |c| Value::Text(&c.mems)),
        Field::PidsLimit => num(res.and_then(|r| r.pids.as_ref()).map(|p| p.limit.into())),
        Field::BlockioClass => res
            .and_then(|r| r.blockio_class.as_ref())
            .map_or(Value::Unknown, |c| Value::Text(&c.value)),
        Field::RdtClass => res
            .and_then(|r| r.rdt_class.as_ref())
            .map_or(Value::Unknown, |c| Value::Text(&c.value)),
        Field::CgroupsPath => linux(a).map_or(Value::Unknown, |l| Value::Text(&l.cgroups_path)),
        Field::OomScoreAdj => num(linux(a)
            .and_then(|l| l.oom_score_adj.as_ref())
            .map(|v| v.value.into())),
        _ => Value::Unknown,
    }
}

fn compound_value<'a>(field: Field, key: &str, a: Option<&'a ContainerAdjustment>) -> Value<'a> {
    let Some(a) = a else {
        return Value::Unknown;
    };
    let found = match field {
        Field::Annotations => a.annotations.get(key).map(|v| Value::Text(v)),
        Field::Mounts => a
            .mounts
            .iter()
            .find(|m| m.destination == key)
            .map(Value::Mount),
        Field::Env => a
            .env
            .iter()
            .find(|e| e.key == key)
            .map(|e| Value::Text(&e.value)),
        Field::CdiDevices => a
            .cdi_devices
            .iter()
            .find(|d| d.name == key)
            .map(|d| Value::Text(&d.name)),
        Field::Rlimits => a
            .rlimits
            .iter()
            .find(|r| r.r#type == key)
            .map(Value::Rlimit),
        Field::Devices => linux(Some(a))
            .and_then(|l| l.devices.iter().find(|d| d.path == key))
            .map(Value::Device),
        Field::Namespace => linux(Some(a))
            .and_then(|l| l.namespaces.iter().find(|n| n.r#type == key))
            .map(|n| Value::Text(&n.path)),
        Field::Sysctl => linux(Some(a))
            .and_then(|l| l.sysctl.get(key))
            .map(|v| Value::Text(v)),
        Field::CgroupsUnified => resources(Some(a))
            .and_then(|r| r.unified.get(key))
            .map(|v| Value::Text(v)),
        Field::HugepageLimits => resources(Some(a))
            .and_then(|r| r.hugepage_limits.iter().find(|h| h.page_size == key))
            .map(|h| Value::Number(h.limit.into())),
        _ => None,
    };
    found.unwrap_or(Value::Unknown)
}

/// The policy's word for a field (the class a rule names it by).
pub(crate) fn class_name(field: Field) -> &'static str {
    match field {
        Field::Annotations => "annotations",
        Field::Mounts => "mounts",
        Field::OciHooks => "hooks",
        Field::Devices => "devices",
        Field::CdiDevices => "cdiDevices",
        Field::Env => "env",
        Field::Args => "args",
        Field::MemLimit => "resources.memory",
        Field::MemReservation => "resources.memoryReservation",
        Field::MemSwapLimit => "resources.memorySwap",
        Field::MemKernelLimit => "resources.memoryKernel",
        Field::MemTcpLimit => "resources.memoryKernelTcp",
        Field::MemSwappiness => "resources.memorySwappiness",
        Field::MemDisableOomKiller => "resources.disableOomKiller",
        Field::MemUseHierarchy => "resources.useHierarchy",
        Field::CpuShares => "resources.cpuShares",
        Field::CpuQuota => "resources.cpuQuota",
        Field::CpuPeriod => "resources.cpuPeriod",
        Field::CpuRealtimeRuntime => "resources.cpuRealtimeRuntime",
        Field::CpuRealtimePeriod => "resources.cpuRealtimePeriod",
        Field::CpuSetCpUs => "resources.cpus",
        Field::CpuSetMems => "resources.mems",
        Field::PidsLimit => "resources.pidsLimit",
        Field::HugepageLimits => "resources.hugepageLimits",
        Field::BlockioClass => "blockioClasses",
        Field::RdtClass => "rdtClasses",
        Field::CgroupsUnified => "unified",
        Field::CgroupsPath => "cgroupsPath",
        Field::OomScoreAdj => "oomScoreAdj",
        Field::Rlimits => "rlimits",
        Field::SeccompPolicy => "seccomp",
        Field::Namespace => "namespaces",
        Field::Sysctl => "sysctls",
        other => other.as_str_name(),
    }
}

/// The field of an NRI name (`IoPriority`) or of a policy class word
/// (`resources.memory`).
pub(crate) fn field_by_name(name: &str) -> Option<Field> {
    (1..=64)
        .filter_map(|n| Field::try_from(n).ok())
        .find(|f| f.as_str_name() == name || class_name(*f) == name)
}

impl fmt::Display for Item<'_> {
    /// `env "FOO" = "bar"`, `mounts "/data" (source "/", type "bind", rw)`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(class_name(self.field))?;
        if !self.key.is_empty() {
            write!(f, " {:?}", self.key)?;
        }
        if self.removed {
            return f.write_str(" (removed)");
        }
        match &self.value {
            Value::Unknown => Ok(()),
            Value::Text(t) if self.field == Field::CdiDevices => {
                let _ = t;
                Ok(())
            }
            Value::Text(t) => write!(f, " = {t:?}"),
            Value::Number(n) => write!(f, " = {n}"),
            Value::Mount(m) => write!(
                f,
                " (source {:?}, type {:?}, {}{})",
                m.source,
                m.r#type,
                if crate::eval::mount_is_ro(m) {
                    "ro"
                } else {
                    "rw"
                },
                propagation_suffix(m)
            ),
            Value::Device(d) => write!(f, " (type {:?}, {}:{})", d.r#type, d.major, d.minor),
            Value::Hooks(paths) => write!(f, " = {paths:?}"),
            Value::Rlimit(r) => write!(f, " (soft {}, hard {})", r.soft, r.hard),
            Value::Args(args) => write!(f, " = {args:?}"),
        }
    }
}

fn propagation_suffix(m: &Mount) -> String {
    let mut s = String::new();
    if let Some(p) = crate::eval::mount_propagation(m) {
        let _ = write!(s, ", {p}");
    }
    s
}

impl Item<'_> {
    /// The value as JSON, for the audit trail.
    pub(crate) fn value_json(&self) -> serde_json::Value {
        use serde_json::json;
        match &self.value {
            Value::Unknown => serde_json::Value::Null,
            Value::Text(t) => json!(t),
            Value::Number(n) => match i64::try_from(*n) {
                Ok(n) => json!(n),
                Err(_) => json!(n.to_string()),
            },
            Value::Mount(m) => json!({"source": m.source, "type": m.r#type, "options": m.options}),
            Value::Device(d) => json!({"type": d.r#type, "major": d.major, "minor": d.minor}),
            Value::Hooks(p) => json!(p),
            Value::Rlimit(r) => json!({"soft": r.soft, "hard": r.hard}),
            Value::Args(a) => json!(a),
        }
    }
}
