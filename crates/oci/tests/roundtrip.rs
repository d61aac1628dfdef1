//! A maximal config.json — every OCI field, other platforms' sections,
//! vendor extensions, values newer than this crate — goes through the
//! generator; whatever an adjustment does not touch must come out equal.

use std::collections::BTreeMap;

use nri_api::{
    opt, ContainerAdjustment, ContainerUpdate, Hook, Hooks, LinuxDevice, LinuxNamespace, LinuxRdt,
    Mount,
};
use nri_oci::Generator;
use serde_json::{json, Value};

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/maximal-config.json")).unwrap()
}

/// Every leaf (scalar, empty array, empty object) by JSON pointer.
fn leaves(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, child) in o {
                let k = k.replace('~', "~0").replace('/', "~1");
                leaves(child, &format!("{prefix}/{k}"), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, child) in a.iter().enumerate() {
                leaves(child, &format!("{prefix}/{i}"), out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// Asserts that the two specs agree on every leaf outside `touched`.
fn assert_untouched_equal(before: &Value, after: &Value, touched: &[&str]) {
    let under = |p: &str| {
        touched
            .iter()
            .any(|t| p == *t || p.starts_with(&format!("{t}/")))
    };
    let mut a = BTreeMap::new();
    let mut b = BTreeMap::new();
    leaves(before, "", &mut a);
    leaves(after, "", &mut b);
    let a: BTreeMap<_, _> = a.into_iter().filter(|(p, _)| !under(p)).collect();
    let b: BTreeMap<_, _> = b.into_iter().filter(|(p, _)| !under(p)).collect();
    for (p, v) in &a {
        assert_eq!(b.get(p), Some(v), "leaf {p} changed");
    }
    for p in b.keys() {
        assert!(a.contains_key(p), "leaf {p} appeared");
    }
}

#[test]
fn empty_adjustment_and_update_change_nothing() {
    let original = fixture();
    let mut spec = original.clone();
    let mut g = Generator::new(&mut spec);
    g.adjust(&ContainerAdjustment::default()).unwrap();
    g.apply_update(&ContainerUpdate::for_container("x"))
        .unwrap();
    let mut adjust = ContainerAdjustment::default();
    adjust.linux_mut();
    g.adjust(&adjust).unwrap();
    drop(g);
    assert_eq!(spec, original);
    // And the text form survives a round trip too.
    let text = serde_json::to_string_pretty(&spec).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), original);
}

#[test]
fn real_adjustment_keeps_everything_it_does_not_touch() {
    let original = fixture();
    let mut spec = original.clone();
    let mut adjust = ContainerAdjustment::default();
    adjust
        .add_env("NEW", "1")
        .add_annotation("com.example.key3", "value3")
        .set_linux_memory_limit(1 << 30)
        .set_linux_oom_score_adj(Some(-500))
        .add_rlimit("RLIMIT_CORE", 0, 0)
        .set_linux_sysctl("kernel.msgmax", "8192")
        .set_linux_rdt_clos_id("besteffort")
        .add_or_replace_namespace(LinuxNamespace {
            r#type: "network".into(),
            path: "/var/run/netns/n1".into(),
        })
        .add_device(LinuxDevice {
            path: "/dev/kvm".into(),
            r#type: "c".into(),
            major: 10,
            minor: 232,
            ..Default::default()
        })
        .add_hooks(&Hooks {
            prestart: vec![Hook {
                path: "/usr/bin/extra".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .add_mount(Mount {
            destination: "/data".into(),
            r#type: "bind".into(),
            source: "/volumes/other".into(),
            options: vec!["rbind".into(), "ro".into()],
        });
    Generator::new(&mut spec)
        .without_mount_propagation_check()
        .adjust(&adjust)
        .unwrap();

    assert_untouched_equal(
        &original,
        &spec,
        &[
            "/process/env",
            "/process/rlimits/1",
            "/process/oomScoreAdj",
            "/annotations/com.example.key3",
            "/linux/resources/memory/limit",
            "/linux/resources/memory/swap",
            "/linux/sysctl/kernel.msgmax",
            "/linux/intelRdt/closID",
            "/linux/namespaces/1/path",
            "/linux/devices/2",
            "/linux/resources/devices/2",
            "/hooks/prestart/1",
            "/mounts",
        ],
    );

    // The touched fields hold what the adjustment asked for.
    assert_eq!(
        spec["process"]["env"],
        json!(["PATH=/bin", "KEEP=1", "TERM=xterm", "NEW=1"])
    );
    assert_eq!(spec["process"]["oomScoreAdj"], -500);
    assert_eq!(
        spec["process"]["rlimits"][1],
        json!({"type": "RLIMIT_CORE", "hard": 0, "soft": 0})
    );
    assert_eq!(spec["linux"]["resources"]["memory"]["swap"], 1 << 30);
    assert_eq!(
        spec["linux"]["namespaces"][1],
        json!({"type": "network", "path": "/var/run/netns/n1"})
    );
    assert_eq!(
        spec["linux"]["resources"]["devices"][2],
        json!({"allow": true, "type": "c", "major": 10, "minor": 232, "access": "rw"})
    );
    assert_eq!(spec["linux"]["intelRdt"]["enableCMT"], true);
    assert_eq!(spec["linux"]["resources"]["pids"], json!({}));
    assert_eq!(
        spec["process"]["scheduler"]["flags"],
        json!([
            "SCHED_FLAG_RESET_ON_FORK",
            "SCHED_FLAG_DL_OVERRUN",
            "SCHED_FLAG_FUTURE"
        ])
    );

    // Mounts: sorted; every mount but the replaced one is unchanged.
    let mounts = spec["mounts"].as_array().unwrap();
    let dests: Vec<&str> = mounts
        .iter()
        .map(|m| m["destination"].as_str().unwrap())
        .collect();
    assert_eq!(
        dests,
        ["C:\\folder", "/data", "/dev", "/proc", "/sys/fs/cgroup"]
    );
    for m in original["mounts"].as_array().unwrap() {
        if m["destination"] != "/data" {
            assert!(mounts.contains(m), "mount {m} changed");
        }
    }
    assert_eq!(
        mounts[1],
        json!({"destination": "/data", "type": "bind", "source": "/volumes/other", "options": ["rbind", "ro"]})
    );
}

#[test]
fn updates_keep_everything_they_do_not_touch() {
    let original = fixture();
    let mut spec = original.clone();
    let mut update = ContainerUpdate::for_container("ctr");
    update
        .set_linux_cpu_shares(2)
        .set_linux_pid_limits(-1)
        .add_linux_unified("memory.max", "1G");
    Generator::new(&mut spec).apply_update(&update).unwrap();
    assert_untouched_equal(
        &original,
        &spec,
        &[
            "/linux/resources/cpu/shares",
            "/linux/resources/unified/memory.max",
        ],
    );
    assert_eq!(spec["linux"]["resources"]["cpu"]["shares"], 2);
    assert_eq!(spec["linux"]["resources"]["pids"], json!({}));
}

#[test]
fn rdt_and_removals_keep_unknown_members() {
    let original = fixture();
    let mut spec = original.clone();
    let mut adjust = ContainerAdjustment::default();
    adjust.linux_mut().rdt = Some(LinuxRdt {
        schemata: Some(vec!["L3:0=f".to_string()].into()),
        enable_monitoring: opt(false),
        ..Default::default()
    });
    adjust
        .remove_annotation("com.example.key1")
        .remove_linux_net_device("ens4")
        .remove_namespace("future-ns");
    Generator::new(&mut spec).adjust(&adjust).unwrap_err();
    // "future-ns" is not a namespace type: the adjustment stops there, but
    // what was applied before left the rest alone.
    assert_untouched_equal(&original, &spec, &["/annotations/com.example.key1"]);

    let mut spec = original.clone();
    adjust.linux_mut().namespaces.clear();
    Generator::new(&mut spec).adjust(&adjust).unwrap();
    assert_untouched_equal(
        &original,
        &spec,
        &[
            "/annotations/com.example.key1",
            "/linux/netDevices/ens4",
            "/linux/intelRdt/schemata",
            "/linux/intelRdt/enableMonitoring",
        ],
    );
    assert_eq!(
        spec["linux"]["intelRdt"],
        json!({"closID": "guaranteed_group", "l3CacheSchema": "L3:0=7f0;1=1f", "memBwSchema": "MB:0=20;1=70",
               "schemata": ["L3:0=f"], "enableCMT": true, "enableMBM": true})
    );
}

#[test]
fn non_object_specs_and_bad_members_are_errors() {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_env("A", "1");
    let mut spec = json!([1, 2]);
    let err = Generator::new(&mut spec).adjust(&adjust).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid OCI Spec: the spec is not an object"
    );
    let mut spec = json!({"process": {"env": "A=1"}});
    let err = Generator::new(&mut spec).adjust(&adjust).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid OCI Spec: process.env is not an array"
    );
    let mut spec = json!({"linux": []});
    let err = Generator::new(&mut spec)
        .adjust(ContainerAdjustment::default().set_linux_cgroups_path("/x"))
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid OCI Spec: linux is not an object");
}
