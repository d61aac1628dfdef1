//! Conversions of NRI protocol values into their OCI runtime-spec JSON form.
//!
//! Each function builds the JSON object the reference Go code would write
//! for the same value: the NRI field is converted as its `ToOCI` helper
//! does, and members that the OCI Go types mark `omitempty` are left out
//! when zero.
//!
//! ```
//! use nri_api::{opt, LinuxResources};
//! use serde_json::json;
//!
//! let mut res = LinuxResources::default();
//! res.memory_mut().limit = opt(1 << 20);
//! res.pids_mut().limit = -1; // unlimited
//! assert_eq!(
//!     nri_oci::convert::linux_resources(&res),
//!     json!({"memory": {"limit": 1 << 20}, "cpu": {}, "pids": {}})
//! );
//! ```

use nri_api::{
    Hook, IoPrioClass, LinuxCpu, LinuxDevice, LinuxDeviceCgroup, LinuxIoPriority, LinuxMemory,
    LinuxMemoryPolicy, LinuxNetDevice, LinuxResources, LinuxScheduler, LinuxSchedulerFlag,
    LinuxSchedulerPolicy, LinuxSeccomp, LinuxSeccompArg, LinuxSyscall, Mount, MpolFlag, MpolMode,
    PosixRlimit,
};
use serde_json::{Map, Value};

use crate::json::{put_nonzero, put_str, put_strings, strings, Obj};

/// `pids.limit` value meaning "no limit".
pub const UNLIMITED_PIDS_LIMIT: i64 = -1;

/// An OCI hook (`{path, args, env, timeout}`).
pub fn hook(h: &Hook) -> Value {
    let mut o = Obj::new();
    o.insert("path".into(), Value::String(h.path.clone()));
    put_strings(&mut o, "args", &h.args);
    put_strings(&mut o, "env", &h.env);
    if let Some(t) = &h.timeout {
        o.insert("timeout".into(), t.value.into());
    }
    Value::Object(o)
}

/// An OCI device node (`linux.devices[]`).
pub fn device(d: &LinuxDevice) -> Value {
    let mut o = Obj::new();
    o.insert("path".into(), Value::String(d.path.clone()));
    o.insert("type".into(), Value::String(d.r#type.clone()));
    o.insert("major".into(), d.major.into());
    o.insert("minor".into(), d.minor.into());
    if let Some(m) = &d.file_mode {
        o.insert("fileMode".into(), m.value.into());
    }
    if let Some(u) = &d.uid {
        o.insert("uid".into(), u.value.into());
    }
    if let Some(g) = &d.gid {
        o.insert("gid".into(), g.value.into());
    }
    Value::Object(o)
}

/// The access string of the device cgroup rule added for a device:
/// `rwm` for block devices, `rw` for all others.
pub fn device_access(d: &LinuxDevice) -> &'static str {
    if d.r#type == "b" {
        "rwm"
    } else {
        "rw"
    }
}

/// The device cgroup rule (`linux.resources.devices[]`) allowing a device.
pub fn device_allow_rule(d: &LinuxDevice) -> Value {
    let mut o = Obj::new();
    o.insert("allow".into(), Value::Bool(true));
    put_str(&mut o, "type", &d.r#type);
    o.insert("major".into(), d.major.into());
    o.insert("minor".into(), d.minor.into());
    o.insert("access".into(), device_access(d).into());
    Value::Object(o)
}

/// A device cgroup rule (`linux.resources.devices[]`).
pub fn device_cgroup(d: &LinuxDeviceCgroup) -> Value {
    let mut o = Obj::new();
    o.insert("allow".into(), Value::Bool(d.allow));
    put_str(&mut o, "type", &d.r#type);
    if let Some(m) = &d.major {
        o.insert("major".into(), m.value.into());
    }
    if let Some(m) = &d.minor {
        o.insert("minor".into(), m.value.into());
    }
    put_str(&mut o, "access", &d.access);
    Value::Object(o)
}

/// An OCI mount (`mounts[]`), options copied in order.
pub fn mount(m: &Mount) -> Value {
    let mut o = Obj::new();
    o.insert("destination".into(), Value::String(m.destination.clone()));
    put_str(&mut o, "type", &m.r#type);
    put_str(&mut o, "source", &m.source);
    put_strings(&mut o, "options", &m.options);
    Value::Object(o)
}

/// A POSIX resource limit (`process.rlimits[]`).
pub fn rlimit(r: &PosixRlimit) -> Value {
    let mut o = Obj::new();
    o.insert("type".into(), Value::String(r.r#type.clone()));
    o.insert("hard".into(), r.hard.into());
    o.insert("soft".into(), r.soft.into());
    Value::Object(o)
}

/// A network device (`linux.netDevices[host]`).
pub fn net_device(d: &LinuxNetDevice) -> Value {
    let mut o = Obj::new();
    put_str(&mut o, "name", &d.name);
    Value::Object(o)
}

/// The OCI name of an I/O priority class: the protobuf enum name, `""`
/// for `IOPRIO_CLASS_NONE` and for values this version does not know.
pub fn io_priority_class(class: i32) -> &'static str {
    match IoPrioClass::try_from(class) {
        Ok(IoPrioClass::IoprioClassNone) | Err(_) => "",
        Ok(c) => c.as_str_name(),
    }
}

/// `process.ioPriority`, or `None` (no I/O priority) when the class is
/// `IOPRIO_CLASS_NONE` or unknown.
pub fn io_priority(p: &LinuxIoPriority) -> Option<Value> {
    let class = io_priority_class(p.class);
    if class.is_empty() {
        return None;
    }
    let mut o = Obj::new();
    o.insert("class".into(), class.into());
    o.insert("priority".into(), p.priority.into());
    Some(Value::Object(o))
}

/// `process.scheduler`, or `None` (no scheduler settings) for
/// `SCHED_NONE`. Unknown policies and flags become empty strings.
pub fn scheduler(s: &LinuxScheduler) -> Option<Value> {
    let policy = match LinuxSchedulerPolicy::try_from(s.policy) {
        Ok(LinuxSchedulerPolicy::SchedNone) => return None,
        Ok(p) => p.as_str_name(),
        Err(_) => "",
    };
    let mut o = Obj::new();
    o.insert("policy".into(), policy.into());
    put_nonzero(&mut o, "nice", s.nice);
    put_nonzero(&mut o, "priority", s.priority);
    if !s.flags.is_empty() {
        let flags = s
            .flags
            .iter()
            .map(|f| {
                LinuxSchedulerFlag::try_from(*f)
                    .map(|f| f.as_str_name())
                    .unwrap_or("")
            })
            .map(Value::from)
            .collect();
        o.insert("flags".into(), Value::Array(flags));
    }
    put_nonzero(&mut o, "runtime", s.runtime);
    put_nonzero(&mut o, "deadline", s.deadline);
    put_nonzero(&mut o, "period", s.period);
    Some(Value::Object(o))
}

/// `linux.memoryPolicy`, or `None` when the mode is unknown (its OCI name
/// would be empty).
pub fn memory_policy(m: &LinuxMemoryPolicy) -> Option<Value> {
    let mode = MpolMode::try_from(m.mode).ok()?.as_str_name();
    let mut o = Obj::new();
    o.insert("mode".into(), mode.into());
    o.insert("nodes".into(), Value::String(m.nodes.clone()));
    if !m.flags.is_empty() {
        let flags = m
            .flags
            .iter()
            .map(|f| {
                MpolFlag::try_from(*f)
                    .map(|f| f.as_str_name())
                    .unwrap_or("")
            })
            .map(Value::from)
            .collect();
        o.insert("flags".into(), Value::Array(flags));
    }
    Some(Value::Object(o))
}

/// `linux.seccomp` for a seccomp policy.
///
/// As in the reference, `default_errno` is not carried over, and a rule
/// without system call names is written with `"names": null`.
pub fn seccomp(s: &LinuxSeccomp) -> Value {
    let mut o = Obj::new();
    o.insert(
        "defaultAction".into(),
        Value::String(s.default_action.clone()),
    );
    put_strings(&mut o, "architectures", &s.architectures);
    put_strings(&mut o, "flags", &s.flags);
    put_str(&mut o, "listenerPath", &s.listener_path);
    put_str(&mut o, "listenerMetadata", &s.listener_metadata);
    if !s.syscalls.is_empty() {
        let rules = s.syscalls.iter().map(syscall).collect();
        o.insert("syscalls".into(), Value::Array(rules));
    }
    Value::Object(o)
}

fn syscall(s: &LinuxSyscall) -> Value {
    let mut o = Obj::new();
    let names = if s.names.is_empty() {
        Value::Null
    } else {
        strings(&s.names)
    };
    o.insert("names".into(), names);
    o.insert("action".into(), Value::String(s.action.clone()));
    if let Some(e) = &s.errno_ret {
        o.insert("errnoRet".into(), e.value.into());
    }
    if !s.args.is_empty() {
        o.insert(
            "args".into(),
            Value::Array(s.args.iter().map(seccomp_arg).collect()),
        );
    }
    Value::Object(o)
}

fn seccomp_arg(a: &LinuxSeccompArg) -> Value {
    let mut o = Obj::new();
    o.insert("index".into(), a.index.into());
    o.insert("value".into(), a.value.into());
    put_nonzero(&mut o, "valueTwo", a.value_two);
    o.insert("op".into(), Value::String(a.op.clone()));
    Value::Object(o)
}

fn memory(m: &LinuxMemory) -> Value {
    let mut o = Obj::new();
    let ints = [
        ("limit", &m.limit),
        ("reservation", &m.reservation),
        ("swap", &m.swap),
        ("kernel", &m.kernel),
        ("kernelTCP", &m.kernel_tcp),
    ];
    for (key, v) in ints {
        if let Some(v) = v {
            o.insert(key.into(), v.value.into());
        }
    }
    if let Some(v) = &m.swappiness {
        o.insert("swappiness".into(), v.value.into());
    }
    if let Some(v) = &m.disable_oom_killer {
        o.insert("disableOOMKiller".into(), v.value.into());
    }
    if let Some(v) = &m.use_hierarchy {
        o.insert("useHierarchy".into(), v.value.into());
    }
    Value::Object(o)
}

fn cpu(c: &LinuxCpu) -> Value {
    let mut o = Obj::new();
    if let Some(v) = &c.shares {
        o.insert("shares".into(), v.value.into());
    }
    if let Some(v) = &c.quota {
        o.insert("quota".into(), v.value.into());
    }
    if let Some(v) = &c.period {
        o.insert("period".into(), v.value.into());
    }
    if let Some(v) = &c.realtime_runtime {
        o.insert("realtimeRuntime".into(), v.value.into());
    }
    if let Some(v) = &c.realtime_period {
        o.insert("realtimePeriod".into(), v.value.into());
    }
    put_str(&mut o, "cpus", &c.cpus);
    put_str(&mut o, "mems", &c.mems);
    Value::Object(o)
}

/// The full OCI form of NRI Linux resources (`linux.resources`), as the
/// reference `LinuxResources.ToOCI` builds it: every memory and CPU field
/// that is set (`memory` and `cpu` are always present), hugepage limits,
/// unified settings, device rules and pids (`-1`: present without a
/// limit). Block I/O and RDT classes have no OCI form and are left out.
///
/// Use this to replace a spec's resources wholesale; [`Generator`] applies
/// adjustments and updates field by field instead.
///
/// [`Generator`]: crate::Generator
pub fn linux_resources(r: &LinuxResources) -> Value {
    let mut o = Obj::new();
    let mem = r.memory.as_ref().map(memory);
    o.insert(
        "memory".into(),
        mem.unwrap_or_else(|| Value::Object(Map::new())),
    );
    let c = r.cpu.as_ref().map(cpu);
    o.insert("cpu".into(), c.unwrap_or_else(|| Value::Object(Map::new())));
    if !r.hugepage_limits.is_empty() {
        let list = r
            .hugepage_limits
            .iter()
            .map(|h| hugepage_limit(&h.page_size, h.limit))
            .collect();
        o.insert("hugepageLimits".into(), Value::Array(list));
    }
    if !r.unified.is_empty() {
        let map = r
            .unified
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        o.insert("unified".into(), Value::Object(map));
    }
    if !r.devices.is_empty() {
        let list = r.devices.iter().map(device_cgroup).collect();
        o.insert("devices".into(), Value::Array(list));
    }
    if let Some(p) = &r.pids {
        let mut pids = Obj::new();
        if p.limit > UNLIMITED_PIDS_LIMIT {
            pids.insert("limit".into(), p.limit.into());
        }
        o.insert("pids".into(), Value::Object(pids));
    }
    Value::Object(o)
}

/// A hugepage limit (`linux.resources.hugepageLimits[]`).
pub fn hugepage_limit(page_size: &str, limit: u64) -> Value {
    let mut o = Obj::new();
    o.insert("pageSize".into(), Value::String(page_size.to_string()));
    o.insert("limit".into(), limit.into());
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{opt, HugepageLimit, OptionalInt, OptionalUInt32};
    use serde_json::json;

    #[test]
    fn hook_omits_empty_members() {
        let h = Hook {
            path: "/bin/hook".into(),
            ..Default::default()
        };
        assert_eq!(hook(&h), json!({"path": "/bin/hook"}));
        let h = Hook {
            path: "/bin/hook".into(),
            args: vec!["hook".into(), "x".into()],
            env: vec!["A=1".into()],
            timeout: Some(OptionalInt { value: 0 }),
        };
        assert_eq!(
            hook(&h),
            json!({"path": "/bin/hook", "args": ["hook", "x"], "env": ["A=1"], "timeout": 0})
        );
    }

    #[test]
    fn device_and_its_rule() {
        let d = LinuxDevice {
            path: "/dev/sda".into(),
            r#type: "b".into(),
            major: 8,
            minor: 0,
            file_mode: opt(0o660u32),
            uid: None,
            gid: Some(OptionalUInt32 { value: 0 }),
        };
        assert_eq!(
            device(&d),
            json!({"path": "/dev/sda", "type": "b", "major": 8, "minor": 0, "fileMode": 0o660, "gid": 0})
        );
        assert_eq!(
            device_allow_rule(&d),
            json!({"allow": true, "type": "b", "major": 8, "minor": 0, "access": "rwm"})
        );
        let c = LinuxDevice {
            path: "/dev/x".into(),
            r#type: "c".into(),
            ..Default::default()
        };
        assert_eq!(device_access(&c), "rw");
        let u = LinuxDevice::default();
        assert_eq!(
            device_allow_rule(&u),
            json!({"allow": true, "major": 0, "minor": 0, "access": "rw"})
        );
    }

    #[test]
    fn io_priority_none_and_unknown_clear() {
        let p = LinuxIoPriority {
            class: IoPrioClass::IoprioClassRt as i32,
            priority: 3,
        };
        assert_eq!(
            io_priority(&p),
            Some(json!({"class": "IOPRIO_CLASS_RT", "priority": 3}))
        );
        assert_eq!(io_priority(&LinuxIoPriority::default()), None);
        let unknown = LinuxIoPriority {
            class: 42,
            priority: 1,
        };
        assert_eq!(io_priority(&unknown), None);
    }

    #[test]
    fn scheduler_names_and_omissions() {
        let s = LinuxScheduler {
            policy: LinuxSchedulerPolicy::SchedDeadline as i32,
            nice: 0,
            priority: 5,
            flags: vec![
                LinuxSchedulerFlag::SchedFlagResetOnFork as i32,
                LinuxSchedulerFlag::SchedFlagDlOverrun as i32,
                99,
            ],
            runtime: 10,
            deadline: 0,
            period: 30,
        };
        assert_eq!(
            scheduler(&s),
            Some(json!({
                "policy": "SCHED_DEADLINE",
                "priority": 5,
                "flags": ["SCHED_FLAG_RESET_ON_FORK", "SCHED_FLAG_DL_OVERRUN", ""],
                "runtime": 10,
                "period": 30
            }))
        );
        assert_eq!(scheduler(&LinuxScheduler::default()), None);
        let unknown = LinuxScheduler {
            policy: 77,
            ..Default::default()
        };
        assert_eq!(scheduler(&unknown), Some(json!({"policy": ""})));
    }

    #[test]
    fn memory_policy_names() {
        let m = LinuxMemoryPolicy {
            mode: MpolMode::MpolBind as i32,
            nodes: "0-1".into(),
            flags: vec![MpolFlag::MpolFStaticNodes as i32],
        };
        assert_eq!(
            memory_policy(&m),
            Some(json!({"mode": "MPOL_BIND", "nodes": "0-1", "flags": ["MPOL_F_STATIC_NODES"]}))
        );
        let d = LinuxMemoryPolicy::default();
        assert_eq!(
            memory_policy(&d),
            Some(json!({"mode": "MPOL_DEFAULT", "nodes": ""}))
        );
        let unknown = LinuxMemoryPolicy {
            mode: 100,
            ..Default::default()
        };
        assert_eq!(memory_policy(&unknown), None);
    }

    #[test]
    fn seccomp_drops_default_errno_and_writes_null_names() {
        let s = LinuxSeccomp {
            default_action: "SCMP_ACT_ERRNO".into(),
            default_errno: opt(1u32),
            architectures: vec!["SCMP_ARCH_X86_64".into()],
            flags: vec![],
            listener_path: "/run/l.sock".into(),
            listener_metadata: String::new(),
            syscalls: vec![
                LinuxSyscall {
                    names: vec!["read".into()],
                    action: "SCMP_ACT_ALLOW".into(),
                    errno_ret: opt(0u32),
                    args: vec![LinuxSeccompArg {
                        index: 0,
                        value: 1,
                        value_two: 0,
                        op: "SCMP_CMP_EQ".into(),
                    }],
                },
                LinuxSyscall {
                    action: "SCMP_ACT_KILL".into(),
                    ..Default::default()
                },
            ],
        };
        assert_eq!(
            seccomp(&s),
            json!({
                "defaultAction": "SCMP_ACT_ERRNO",
                "architectures": ["SCMP_ARCH_X86_64"],
                "listenerPath": "/run/l.sock",
                "syscalls": [
                    {"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 0,
                     "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]},
                    {"names": null, "action": "SCMP_ACT_KILL"}
                ]
            })
        );
    }

    #[test]
    fn full_resources_conversion() {
        let mut r = LinuxResources::default();
        r.memory_mut().limit = opt(100i64);
        r.memory_mut().swappiness = opt(10u64);
        r.memory_mut().disable_oom_killer = opt(false);
        r.cpu_mut().shares = opt(1024u64);
        r.cpu_mut().cpus = "0-3".into();
        r.hugepage_limits.push(HugepageLimit {
            page_size: "2MB".into(),
            limit: 4,
        });
        r.unified.insert("memory.high".into(), "max".into());
        r.devices.push(LinuxDeviceCgroup {
            allow: false,
            access: "rwm".into(),
            ..Default::default()
        });
        r.pids_mut().limit = 0;
        r.blockio_class = opt("gold");
        assert_eq!(
            linux_resources(&r),
            json!({
                "memory": {"limit": 100, "swappiness": 10, "disableOOMKiller": false},
                "cpu": {"shares": 1024, "cpus": "0-3"},
                "hugepageLimits": [{"pageSize": "2MB", "limit": 4}],
                "unified": {"memory.high": "max"},
                "devices": [{"allow": false, "access": "rwm"}],
                "pids": {"limit": 0}
            })
        );
        assert_eq!(
            linux_resources(&LinuxResources::default()),
            json!({"memory": {}, "cpu": {}})
        );
    }

    #[test]
    fn small_objects() {
        let m = Mount {
            destination: "/data".into(),
            r#type: String::new(),
            source: "/host".into(),
            options: vec!["rbind".into()],
        };
        assert_eq!(
            mount(&m),
            json!({"destination": "/data", "source": "/host", "options": ["rbind"]})
        );
        let r = PosixRlimit {
            r#type: "RLIMIT_NOFILE".into(),
            hard: 0,
            soft: 0,
        };
        assert_eq!(
            rlimit(&r),
            json!({"type": "RLIMIT_NOFILE", "hard": 0, "soft": 0})
        );
        assert_eq!(net_device(&LinuxNetDevice::default()), json!({}));
        assert_eq!(
            net_device(&LinuxNetDevice {
                name: "eth1".into()
            }),
            json!({"name": "eth1"})
        );
    }
}
