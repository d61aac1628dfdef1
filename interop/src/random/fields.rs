//! Random values for every field of a `ContainerAdjustment` and of a
//! `ContainerUpdate`, in the Go `encoding/json` form the reference plugin
//! reads (proto field names, wrappers as `{"value": N}`, enums as numbers).
//!
//! Keys come from small pools so that plugins of one case often touch the
//! same entries (conflicts, remove-then-set, ownership hand-over).

use serde_json::{json, Map, Value};

use super::prng::Prng;

/// Defines [`ADJUST_FIELDS`] and [`UPDATE_FIELDS`]: an adjustment can set
/// every resource field an update can, in the same order, with `pids`
/// among them and its own fields before and after.
macro_rules! field_lists {
    (
        adjust: [$($before:literal),*],
        resources: [$($res:literal),*],
        adjust_resources: [$($adjust_res:literal),*],
        more_resources: [$($more_res:literal),*],
        more_adjust: [$($after:literal),*] $(,)?
    ) => {
        /// Every adjustment field the generator can touch, by the name used in the
        /// coverage summary.
        pub const ADJUST_FIELDS: &[&str] = &[
            $($before,)* $($res,)* $($adjust_res,)* $($more_res,)* $($after,)*
        ];

        /// The resource fields a container update can carry (`pids` is added by
        /// the case generator under its own rule, see `case.rs`).
        pub const UPDATE_FIELDS: &[&str] = &[$($res,)* $($more_res,)*];
    };
}

field_lists! {
    adjust: [
        "annotations",
        "mounts",
        "env",
        "args",
        "hooks",
        "rlimits",
        "cdi_devices",
        "devices"
    ],
    resources: [
        "memory.limit",
        "memory.reservation",
        "memory.swap",
        "memory.kernel",
        "memory.kernel_tcp",
        "memory.swappiness",
        "memory.disable_oom_killer",
        "memory.use_hierarchy",
        "cpu.shares",
        "cpu.quota",
        "cpu.period",
        "cpu.realtime_runtime",
        "cpu.realtime_period",
        "cpu.cpus",
        "cpu.mems",
        "hugepage_limits"
    ],
    adjust_resources: ["pids"],
    more_resources: ["blockio_class", "rdt_class", "unified", "device_rules"],
    more_adjust: [
        "cgroups_path",
        "oom_score_adj",
        "io_priority",
        "seccomp_policy",
        "namespaces",
        "sysctl",
        "net_devices",
        "scheduler",
        "rdt",
        "memory_policy"
    ],
}

/// Map-valued adjustment fields (Go iterates them in random order), as
/// JSON paths inside the adjustment.
pub const MAP_FIELDS: &[&[&str]] = &[
    &["annotations"],
    &["linux", "sysctl"],
    &["linux", "net_devices"],
    &["linux", "resources", "unified"],
];

const ANNOTATION_KEYS: &[&str] = &["a", "b", "c"];
const ENV_KEYS: &[&str] = &["A", "B", "PATH"];
const MOUNTS: &[&str] = &["/m1", "/m2", "/m3"];
const DEVICES: &[&str] = &["/dev/d1", "/dev/d2", "/dev/d3"];
const CDI: &[&str] = &["vendor.com/dev=a", "vendor.com/dev=b", "other.org/x=0"];
const RLIMITS: &[&str] = &["RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"];
const PAGE_SIZES: &[&str] = &["2MB", "1GB"];
const UNIFIED: &[&str] = &["memory.high", "cpu.weight", "pids.max"];
const NAMESPACES: &[&str] = &["network", "ipc", "uts"];
const SYSCTL: &[&str] = &["net.ipv4.ip_forward", "kernel.shmmax", "net.core.somaxconn"];
const NETDEVS: &[&str] = &["eth0", "eth1", "hostdev0"];
const CLASSES: &[&str] = &["gold", "silver", "bronze"];

/// Sets `path` inside `obj` (creating objects on the way) to `v`.
pub fn put(obj: &mut Value, path: &[&str], v: Value) {
    let mut cur = obj;
    for (i, key) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else { return };
        if i + 1 == path.len() {
            map.insert((*key).to_owned(), v);
            return;
        }
        cur = map
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Appends `v` to the list at `path` (created when absent).
pub fn push(obj: &mut Value, path: &[&str], v: Value) {
    let mut list = match get(obj, path) {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    list.push(v);
    put(obj, path, Value::Array(list));
}

/// The value at `path`, if any.
pub fn get<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |cur, key| cur.get(*key))
}

/// The value at `path`, mutably.
pub fn get_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(obj, |cur, key| cur.get_mut(*key))
}

fn put_entry(obj: &mut Value, path: &[&str], key: &str, v: Value) {
    let mut full: Vec<&str> = path.to_vec();
    full.push(key);
    put(obj, &full, v);
}

fn wrap(v: impl Into<Value>) -> Value {
    json!({ "value": v.into() })
}

fn small(p: &mut Prng, choices: &[i64]) -> i64 {
    *p.pick(choices)
}

/// How a keyed entry is touched: set, removed, or removed then set again by
/// the same plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOp {
    Set,
    Remove,
    RemoveThenSet,
}

fn key_op(p: &mut Prng) -> KeyOp {
    match p.below(10) {
        0..=5 => KeyOp::Set,
        6..=7 => KeyOp::Remove,
        _ => KeyOp::RemoveThenSet,
    }
}

/// Adds one random value of field `name` to the adjustment `adj`. `tag`
/// makes values of different plugins distinguishable.
pub fn adjust_field(p: &mut Prng, adj: &mut Value, name: &str, tag: &str) {
    let res = ["linux", "resources"];
    match name {
        "annotations" => map_field(p, adj, &["annotations"], ANNOTATION_KEYS, |_, _| {
            json!(format!("v-{tag}"))
        }),
        "sysctl" => map_field(p, adj, &["linux", "sysctl"], SYSCTL, |p, _| {
            json!(p.range(0, 3).to_string())
        }),
        "net_devices" => map_field(
            p,
            adj,
            &["linux", "net_devices"],
            NETDEVS,
            |p, _| json!({ "name": format!("net{}", p.below(3)) }),
        ),
        "unified" => map_field(
            p,
            adj,
            &["linux", "resources", "unified"],
            UNIFIED,
            |p, _| json!(format!("{}", p.range(1, 4) * 100)),
        ),
        "mounts" => {
            for _ in 0..p.range(1, 2) {
                let dest = *p.pick(MOUNTS);
                let op = key_op(p);
                if op != KeyOp::Set {
                    let before = adj.clone();
                    push(
                        adj,
                        &["mounts"],
                        json!({ "destination": format!("-{dest}") }),
                    );
                    // Go lists the pure removals of one reply in map order:
                    // at most one per plugin keeps its output deterministic.
                    if pure_mount_removals(adj) > 1 {
                        *adj = before;
                        continue;
                    }
                }
                if op != KeyOp::Remove {
                    let mut m = json!({
                        "destination": dest,
                        "type": "bind",
                        "source": format!("/src/{tag}"),
                    });
                    if p.chance(60) {
                        put(
                            &mut m,
                            &["options"],
                            json!(["rbind", *p.pick(&["ro", "rw"])]),
                        );
                    }
                    push(adj, &["mounts"], m);
                }
            }
        }
        "env" => {
            for _ in 0..p.range(1, 2) {
                let key = *p.pick(ENV_KEYS);
                let op = key_op(p);
                if op != KeyOp::Set {
                    push(adj, &["env"], json!({ "key": format!("-{key}") }));
                }
                if op != KeyOp::Remove {
                    push(adj, &["env"], json!({ "key": key, "value": tag }));
                }
            }
        }
        "args" => {
            let mut args = Vec::new();
            if p.chance(40) {
                args.push(json!(""));
            }
            args.push(json!(*p.pick(&["sh", "sleep", "/bin/run"])));
            for _ in 0..p.below(3) {
                args.push(json!(format!("--{tag}")));
            }
            put(adj, &["args"], Value::Array(args));
        }
        "hooks" => {
            let kind = *p.pick(&[
                "prestart",
                "poststart",
                "poststop",
                "create_runtime",
                "create_container",
                "start_container",
            ]);
            let mut hook = json!({ "path": format!("/hooks/{tag}") });
            if p.chance(50) {
                put(&mut hook, &["args"], json!(["hook", kind]));
            }
            if p.chance(30) {
                put(&mut hook, &["env"], json!(["HOOK=1"]));
            }
            if p.chance(30) {
                put(&mut hook, &["timeout"], wrap(p.range(1, 30)));
            }
            push(adj, &["hooks", kind], hook);
        }
        "rlimits" => {
            for _ in 0..p.range(1, 2) {
                let hard = p.range(1, 4) * 1024;
                push(
                    adj,
                    &["rlimits"],
                    json!({ "type": *p.pick(RLIMITS), "hard": hard, "soft": hard / 2 }),
                );
            }
        }
        "cdi_devices" => {
            for _ in 0..p.range(1, 2) {
                push(adj, &["CDI_devices"], json!({ "name": *p.pick(CDI) }));
            }
        }
        "devices" => {
            for _ in 0..p.range(1, 2) {
                let path = *p.pick(DEVICES);
                let op = key_op(p);
                if op != KeyOp::Set {
                    push(
                        adj,
                        &["linux", "devices"],
                        json!({ "path": format!("-{path}") }),
                    );
                }
                if op != KeyOp::Remove {
                    let mut d = json!({
                        "path": path, "type": *p.pick(&["c", "b"]),
                        "major": p.range(1, 250), "minor": p.range(0, 9),
                    });
                    if p.chance(50) {
                        put(&mut d, &["file_mode"], wrap(*p.pick(&[0o666, 0o600])));
                    }
                    if p.chance(30) {
                        put(&mut d, &["uid"], wrap(p.range(0, 1000)));
                        put(&mut d, &["gid"], wrap(p.range(0, 1000)));
                    }
                    push(adj, &["linux", "devices"], d);
                }
            }
        }
        "cgroups_path" => put(
            adj,
            &["linux", "cgroups_path"],
            json!(format!("/kubepods/{tag}/{}", p.below(3))),
        ),
        "oom_score_adj" => put(
            adj,
            &["linux", "oom_score_adj"],
            wrap(small(p, &[-999, -1, 0, 500, 1000])),
        ),
        "io_priority" => put(
            adj,
            &["linux", "io_priority"],
            json!({ "class": p.range(0, 3), "priority": p.range(0, 7) }),
        ),
        "seccomp_policy" => {
            let mut s = json!({ "default_action": *p.pick(&["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"]) });
            if p.chance(50) {
                put(&mut s, &["architectures"], json!(["SCMP_ARCH_X86_64"]));
            }
            if p.chance(30) {
                put(&mut s, &["default_errno"], wrap(1));
            }
            if p.chance(60) {
                put(
                    &mut s,
                    &["syscalls"],
                    json!([{ "names": [*p.pick(&["mount", "ptrace", "bpf"])], "action": "SCMP_ACT_ERRNO" }]),
                );
            }
            put(adj, &["linux", "seccomp_policy"], s);
        }
        "namespaces" => {
            for _ in 0..p.range(1, 2) {
                let ty = *p.pick(NAMESPACES);
                let ns = if p.chance(30) {
                    json!({ "type": format!("-{ty}") })
                } else {
                    json!({ "type": ty, "path": format!("/proc/1/ns/{ty}") })
                };
                push(adj, &["linux", "namespaces"], ns);
            }
        }
        "scheduler" => {
            let mut s = json!({ "policy": p.range(0, 6), "nice": small(p, &[-5, 0, 10]) });
            if p.chance(40) {
                put(&mut s, &["priority"], json!(p.range(1, 99)));
            }
            if p.chance(30) {
                put(&mut s, &["flags"], json!([p.range(0, 3)]));
            }
            if p.chance(30) {
                put(&mut s, &["runtime"], json!(p.range(1, 9) * 1000));
                put(&mut s, &["deadline"], json!(p.range(10, 19) * 1000));
                put(&mut s, &["period"], json!(p.range(20, 29) * 1000));
            }
            put(adj, &["linux", "scheduler"], s);
        }
        "rdt" => {
            let mut r = json!({});
            if p.chance(35) {
                put(&mut r, &["remove"], json!(true));
            }
            if p.chance(50) {
                put(&mut r, &["clos_id"], wrap(*p.pick(CLASSES)));
            }
            if p.chance(40) {
                put(&mut r, &["schemata"], wrap(json!(["L3:0=f", "MB:0=50"])));
            }
            if p.chance(30) {
                put(&mut r, &["enable_monitoring"], wrap(p.chance(50)));
            }
            put(adj, &["linux", "rdt"], r);
        }
        "memory_policy" => {
            let mut m = json!({ "mode": p.range(0, 5), "nodes": *p.pick(&["0", "0-1"]) });
            if p.chance(40) {
                put(&mut m, &["flags"], json!([p.range(0, 2)]));
            }
            put(adj, &["linux", "memory_policy"], m);
        }
        other => resource_field(p, adj, &res, other),
    }
}

/// How many mounts `adj` removes without adding them again (the reference
/// appends these to its reply in random order).
pub fn pure_mount_removals(adj: &Value) -> usize {
    let Some(Value::Array(mounts)) = get(adj, &["mounts"]) else {
        return 0;
    };
    let dest = |m: &Value| m["destination"].as_str().unwrap_or_default().to_owned();
    let removed: std::collections::BTreeSet<String> = mounts
        .iter()
        .filter_map(|m| dest(m).strip_prefix('-').map(str::to_owned))
        .collect();
    removed
        .iter()
        .filter(|d| !mounts.iter().any(|m| dest(m) == **d))
        .count()
}

/// Adds a random value of resource field `name` under `base` (a
/// `LinuxResources` object path).
pub fn resource_field(p: &mut Prng, obj: &mut Value, base: &[&str], name: &str) {
    let at = |tail: &[&'static str]| -> Vec<&str> {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(tail);
        v
    };
    let mib = |p: &mut Prng| p.range(1, 8) * 64 * 1024 * 1024;
    match name {
        "memory.limit" => put(obj, &at(&["memory", "limit"]), wrap(mib(p))),
        "memory.reservation" => put(obj, &at(&["memory", "reservation"]), wrap(mib(p))),
        "memory.swap" => put(obj, &at(&["memory", "swap"]), wrap(mib(p))),
        "memory.kernel" => put(obj, &at(&["memory", "kernel"]), wrap(mib(p))),
        "memory.kernel_tcp" => put(obj, &at(&["memory", "kernel_tcp"]), wrap(mib(p))),
        "memory.swappiness" => put(obj, &at(&["memory", "swappiness"]), wrap(p.range(0, 100))),
        "memory.disable_oom_killer" => put(
            obj,
            &at(&["memory", "disable_oom_killer"]),
            wrap(p.chance(50)),
        ),
        "memory.use_hierarchy" => put(obj, &at(&["memory", "use_hierarchy"]), wrap(p.chance(50))),
        "cpu.shares" => put(obj, &at(&["cpu", "shares"]), wrap(p.range(1, 8) * 256)),
        "cpu.quota" => put(
            obj,
            &at(&["cpu", "quota"]),
            wrap(small(p, &[-1, 50000, 100000])),
        ),
        "cpu.period" => put(
            obj,
            &at(&["cpu", "period"]),
            wrap(small(p, &[100000, 200000])),
        ),
        "cpu.realtime_runtime" => put(
            obj,
            &at(&["cpu", "realtime_runtime"]),
            wrap(p.range(1, 9) * 1000),
        ),
        "cpu.realtime_period" => put(
            obj,
            &at(&["cpu", "realtime_period"]),
            wrap(p.range(1, 9) * 10000),
        ),
        "cpu.cpus" => put(
            obj,
            &at(&["cpu", "cpus"]),
            json!(*p.pick(&["0", "0-1", "2-3"])),
        ),
        "cpu.mems" => put(obj, &at(&["cpu", "mems"]), json!(*p.pick(&["0", "0-1"]))),
        "hugepage_limits" => {
            for _ in 0..p.range(1, 2) {
                push(
                    obj,
                    &at(&["hugepage_limits"]),
                    json!({ "page_size": *p.pick(PAGE_SIZES), "limit": mib(p) }),
                );
            }
        }
        "pids" => put(obj, &at(&["pids"]), json!({ "limit": p.range(1, 9) * 100 })),
        "blockio_class" => put(obj, &at(&["blockio_class"]), wrap(*p.pick(CLASSES))),
        "rdt_class" => put(obj, &at(&["rdt_class"]), wrap(*p.pick(CLASSES))),
        "unified" => {
            // One key per update: with two, which one Go names in a
            // conflict would depend on its map order.
            let key = *p.pick(UNIFIED);
            let value = json!(format!("{}", p.range(1, 4) * 100));
            put(obj, &at(&["unified"]), json!({ key: value }));
        }
        "device_rules" => {
            let mut d = json!({ "allow": p.chance(50), "type": *p.pick(&["c", "b", "a"]), "access": *p.pick(&["rwm", "r"]) });
            if p.chance(60) {
                put(&mut d, &["major"], wrap(p.range(1, 250)));
                put(&mut d, &["minor"], wrap(p.range(0, 9)));
            }
            push(obj, &at(&["devices"]), d);
        }
        _ => {}
    }
}

/// Touches 1–2 keys of a map field: set, remove (`-key`) or remove then
/// set by the same plugin.
fn map_field(
    p: &mut Prng,
    adj: &mut Value,
    path: &[&str],
    keys: &[&str],
    mut value: impl FnMut(&mut Prng, &str) -> Value,
) {
    for _ in 0..p.range(1, 2) {
        let key = *p.pick(keys);
        let op = key_op(p);
        if op != KeyOp::Set {
            // A removed net device is sent as an empty device.
            let removal = if path.last() == Some(&"net_devices") {
                json!({})
            } else {
                json!("")
            };
            put_entry(adj, path, &format!("-{key}"), removal);
        }
        if op != KeyOp::Remove {
            let v = value(p, key);
            put_entry(adj, path, key, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_and_push_build_nested_objects() {
        let mut v = json!({});
        put(&mut v, &["linux", "resources", "memory", "limit"], wrap(5));
        push(&mut v, &["linux", "devices"], json!({ "path": "/dev/x" }));
        push(&mut v, &["linux", "devices"], json!({ "path": "/dev/y" }));
        assert_eq!(
            v,
            json!({"linux": {"resources": {"memory": {"limit": {"value": 5}}},
                             "devices": [{"path": "/dev/x"}, {"path": "/dev/y"}]}})
        );
        assert_eq!(
            get(&v, &["linux", "devices"]).map(|d| d.as_array().map(Vec::len)),
            Some(Some(2))
        );
    }

    #[test]
    fn every_field_produces_a_value() {
        let mut p = Prng::new(3);
        for name in ADJUST_FIELDS {
            let mut adj = json!({});
            adjust_field(&mut p, &mut adj, name, "t");
            assert_ne!(adj, json!({}), "{name}");
        }
        for name in UPDATE_FIELDS {
            let mut u = json!({});
            resource_field(&mut p, &mut u, &["linux", "resources"], name);
            assert_ne!(u, json!({}), "{name}");
        }
    }

    #[test]
    fn at_most_one_pure_mount_removal_per_adjustment() {
        let mut p = Prng::new(11);
        for _ in 0..500 {
            let mut adj = json!({});
            // The field may be drawn several times for one adjustment.
            for _ in 0..3 {
                adjust_field(&mut p, &mut adj, "mounts", "t");
            }
            assert!(pure_mount_removals(&adj) <= 1, "{adj}");
        }
        let two = json!({"mounts": [{"destination": "-/a"}, {"destination": "-/b"},
                                    {"destination": "-/c"}, {"destination": "/c"}]});
        assert_eq!(pure_mount_removals(&two), 2);
    }
}
