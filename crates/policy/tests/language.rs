//! The policy language: each field class, each scope, allow against deny,
//! bounds and sets; unit cases and property tests.

use nri_api::{
    CdiDevice, Container, ContainerAdjustment, Field, FieldOwners, Hook, Hooks, KeyValue,
    LinuxContainerAdjustment, LinuxCpu, LinuxDevice, LinuxMemory, LinuxNamespace, LinuxResources,
    Mount, OptionalInt, OptionalInt64, OptionalString, OptionalUInt64, OwningPlugins, PodSandbox,
    PosixRlimit, ValidateContainerAdjustmentRequest,
};
use nri_policy::{Policy, PolicyValidator};
use proptest::prelude::*;

type Req = ValidateContainerAdjustmentRequest;

/// A request for container `web` in pod `payments/shop` whose adjustment is
/// `adjust`, with `owner` owning `field` (at `key` for compound fields).
fn req(adjust: ContainerAdjustment, field: Field, key: &str, owner: &str) -> Req {
    let mut owners = FieldOwners::default();
    if key.is_empty() {
        owners.simple.insert(field as i32, owner.into());
    } else {
        owners
            .compound
            .entry(field as i32)
            .or_default()
            .owners
            .insert(key.into(), owner.into());
    }
    Req {
        pod: Some(PodSandbox {
            id: "p0".into(),
            name: "shop".into(),
            namespace: "payments".into(),
            labels: [("team".to_string(), "pay".to_string())].into(),
            annotations: [("tier".to_string(), "gold".to_string())].into(),
            ..Default::default()
        }),
        container: Some(Container {
            id: "c0".into(),
            name: "web".into(),
            ..Default::default()
        }),
        adjust: Some(adjust),
        owners: Some(OwningPlugins {
            owners: [("c0".to_string(), owners)].into(),
        }),
        ..Default::default()
    }
}

fn linux(l: LinuxContainerAdjustment) -> ContainerAdjustment {
    ContainerAdjustment {
        linux: Some(l),
        ..Default::default()
    }
}

fn resources(r: LinuxResources) -> ContainerAdjustment {
    linux(LinuxContainerAdjustment {
        resources: Some(r),
        ..Default::default()
    })
}

fn memory(limit: i64) -> Req {
    req(
        resources(LinuxResources {
            memory: Some(LinuxMemory {
                limit: Some(OptionalInt64 { value: limit }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        Field::MemLimit,
        "",
        "10-mem",
    )
}

fn cpus(list: &str) -> Req {
    req(
        resources(LinuxResources {
            cpu: Some(LinuxCpu {
                cpus: list.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        Field::CpuSetCpUs,
        "",
        "10-cpu",
    )
}

fn mount(dest: &str, source: &str, ty: &str, options: &[&str]) -> Req {
    req(
        ContainerAdjustment {
            mounts: vec![Mount {
                destination: dest.into(),
                source: source.into(),
                r#type: ty.into(),
                options: options.iter().map(|s| s.to_string()).collect(),
            }],
            ..Default::default()
        },
        Field::Mounts,
        dest,
        "20-storage",
    )
}

fn env(name: &str, owner: &str) -> Req {
    req(
        ContainerAdjustment {
            env: vec![KeyValue {
                key: name.into(),
                value: "v".into(),
            }],
            ..Default::default()
        },
        Field::Env,
        name,
        owner,
    )
}

/// The verdict of `policy` (text) on `r`: `Ok` or the refusal text.
fn verdict(policy: &str, r: &Req) -> Result<(), String> {
    let p = Policy::from_yaml_str(policy, "p.yaml").unwrap_or_else(|e| panic!("{e}\n{policy}"));
    PolicyValidator::new(p)
        .validate(r)
        .map_err(|e| e.to_string())
}

fn allowed(policy: &str, r: &Req) -> bool {
    verdict(policy, r).is_ok()
}

/// A default-deny policy with one rule allowing `spec` (a flow mapping).
fn only(spec: &str) -> String {
    format!("default: deny\nrules:\n  - name: r\n    allow: {spec}\n")
}

/// A default-allow policy with one rule denying `spec`.
fn never(spec: &str) -> String {
    format!("rules:\n  - name: r\n    deny: {spec}\n")
}

// ---- field classes ----

#[test]
fn annotations_by_key() {
    let r = req(
        ContainerAdjustment {
            annotations: [("acme.io/x".to_string(), "1".to_string())].into(),
            ..Default::default()
        },
        Field::Annotations,
        "acme.io/x",
        "10-a",
    );
    assert!(allowed(&only("{annotations: ['acme.io/*']}"), &r));
    assert!(!allowed(&only("{annotations: ['other.io/*']}"), &r));
    assert!(!allowed(&never("{annotations: ['acme.io/x']}"), &r));
}

#[test]
fn env_by_name() {
    assert!(allowed(&only("{env: ['ACME_*']}"), &env("ACME_X", "10-a")));
    assert!(!allowed(&only("{env: ['ACME_*']}"), &env("PATH", "10-a")));
    assert!(!allowed(
        &never("{env: [LD_PRELOAD]}"),
        &env("LD_PRELOAD", "10-a")
    ));
}

#[test]
fn mounts_by_source_prefix_type_access_and_propagation() {
    let data = mount("/data", "/var/lib/acme/d", "bind", &["rbind", "ro"]);
    let root_rw = mount("/host", "/", "bind", &["rbind", "rw"]);
    let sibling = mount("/data", "/var/lib/acmeevil", "bind", &["ro"]);
    let dotdot = mount("/data", "/var/lib/acme/../../../etc", "bind", &["ro"]);
    let p = only("{mounts: [{sources: [/var/lib/acme], types: [bind], access: ro}]}");
    assert!(allowed(&p, &data));
    assert!(!allowed(&p, &root_rw));
    assert!(!allowed(&p, &sibling));
    assert!(!allowed(&p, &dotdot));
    assert!(!allowed(
        &p,
        &mount("/data", "/var/lib/acme/d", "bind", &["rbind", "rw"])
    ));
    assert!(!allowed(
        &p,
        &mount("/data", "/var/lib/acme/d", "tmpfs", &["ro"])
    ));
    let props = only("{mounts: [{propagation: [rslave]}]}");
    assert!(allowed(&props, &mount("/d", "/x", "bind", &["rslave"])));
    assert!(!allowed(&props, &mount("/d", "/x", "bind", &["rshared"])));
    // No propagation option counts as rprivate.
    assert!(allowed(
        &only("{mounts: [{propagation: [rprivate]}]}"),
        &mount("/d", "/x", "bind", &[])
    ));
    let dests = only("{mounts: [{destinations: ['/data*']}]}");
    assert!(allowed(&dests, &data));
    assert!(!allowed(&dests, &root_rw));
    let deny_rw_root = never("{mounts: [{sources: [/], access: rw}]}");
    assert!(!allowed(&deny_rw_root, &root_rw));
    assert!(allowed(&deny_rw_root, &data));
}

#[test]
fn devices_and_cdi_devices() {
    let dev = req(
        linux(LinuxContainerAdjustment {
            devices: vec![LinuxDevice {
                path: "/dev/nvidia0".into(),
                r#type: "c".into(),
                major: 195,
                ..Default::default()
            }],
            ..Default::default()
        }),
        Field::Devices,
        "/dev/nvidia0",
        "10-gpu",
    );
    assert!(allowed(&only("{devices: ['/dev/nvidia*']}"), &dev));
    assert!(!allowed(&only("{devices: ['/dev/fuse']}"), &dev));
    let cdi = req(
        ContainerAdjustment {
            cdi_devices: vec![CdiDevice {
                name: "nvidia.com/gpu=0".into(),
            }],
            ..Default::default()
        },
        Field::CdiDevices,
        "nvidia.com/gpu=0",
        "10-gpu",
    );
    assert!(allowed(&only("{cdiDevices: ['nvidia.com/gpu=*']}"), &cdi));
    assert!(!allowed(&never("{cdiDevices: ['nvidia.com/*']}"), &cdi));
}

#[test]
fn hooks_every_path_must_be_allowed() {
    let hooks = |paths: &[&str]| {
        req(
            ContainerAdjustment {
                hooks: Some(Hooks {
                    prestart: paths
                        .iter()
                        .map(|p| Hook {
                            path: p.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Field::OciHooks,
            "",
            "10-h",
        )
    };
    let p = only("{hooks: ['/usr/libexec/acme/*']}");
    assert!(allowed(&p, &hooks(&["/usr/libexec/acme/a"])));
    assert!(!allowed(&p, &hooks(&["/usr/libexec/acme/a", "/tmp/x"])));
    assert!(!allowed(
        &never("{hooks: ['/tmp/*']}"),
        &hooks(&["/usr/libexec/acme/a", "/tmp/x"])
    ));
}

#[test]
fn seccomp_namespaces_sysctls() {
    let sec = req(
        linux(LinuxContainerAdjustment::default()),
        Field::SeccompPolicy,
        "",
        "10-s",
    );
    assert!(allowed(&only("{seccomp: true}"), &sec));
    assert!(!allowed(&only("{env: [X]}"), &sec));
    let ns = req(
        linux(LinuxContainerAdjustment {
            namespaces: vec![LinuxNamespace {
                r#type: "network".into(),
                path: "/var/run/netns/x".into(),
            }],
            ..Default::default()
        }),
        Field::Namespace,
        "network",
        "10-n",
    );
    assert!(allowed(&only("{namespaces: [network]}"), &ns));
    assert!(!allowed(&only("{namespaces: [pid]}"), &ns));
    let sys = req(
        linux(LinuxContainerAdjustment {
            sysctl: [("net.core.somaxconn".to_string(), "1024".to_string())].into(),
            ..Default::default()
        }),
        Field::Sysctl,
        "net.core.somaxconn",
        "10-n",
    );
    assert!(allowed(&only("{sysctls: ['net.*']}"), &sys));
    assert!(!allowed(&never("{sysctls: ['net.core.*']}"), &sys));
}

#[test]
fn rlimits_within_bounds() {
    let rl = |soft, hard| {
        req(
            ContainerAdjustment {
                rlimits: vec![PosixRlimit {
                    r#type: "RLIMIT_NOFILE".into(),
                    soft,
                    hard,
                }],
                ..Default::default()
            },
            Field::Rlimits,
            "RLIMIT_NOFILE",
            "10-u",
        )
    };
    let p = only("{rlimits: {RLIMIT_NOFILE: {max: 65536}}}");
    assert!(allowed(&p, &rl(1024, 65536)));
    assert!(!allowed(&p, &rl(1024, 65537)));
    assert!(!allowed(&only("{rlimits: {RLIMIT_NPROC: {}}}"), &rl(1, 1)));
    assert!(allowed(&only("{rlimits: {'RLIMIT_*': {}}}"), &rl(1, 1)));
    assert!(!allowed(
        &never("{rlimits: {RLIMIT_NOFILE: {min: 1000000}}}"),
        &rl(1024, 1048576)
    ));
}

#[test]
fn resources_bounds_and_sets() {
    let p = only("{resources: {memory: {min: 64Mi, max: 2Gi}}}");
    assert!(allowed(&p, &memory(1 << 30)));
    assert!(allowed(&p, &memory(2 << 30)));
    assert!(!allowed(&p, &memory((2 << 30) + 1)));
    assert!(!allowed(&p, &memory(1 << 20)));
    let shares = req(
        resources(LinuxResources {
            cpu: Some(LinuxCpu {
                shares: Some(OptionalUInt64 { value: 2048 }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        Field::CpuShares,
        "",
        "10-cpu",
    );
    assert!(allowed(
        &only("{resources: {cpuShares: {max: 4096}}}"),
        &shares
    ));
    assert!(!allowed(
        &only("{resources: {cpuShares: {max: 1024}}}"),
        &shares
    ));
    assert!(!allowed(&only("{resources: {memory: {}}}"), &shares));
    let sets = only("{resources: {cpus: {within: 0-7}}}");
    assert!(allowed(&sets, &cpus("0-3,6")));
    assert!(!allowed(&sets, &cpus("6-9")));
    assert!(!allowed(
        &never("{resources: {cpus: {within: '0'}}}"),
        &cpus("0-3")
    ));
    assert!(allowed(
        &never("{resources: {cpus: {within: '0'}}}"),
        &cpus("1-3")
    ));
}

#[test]
fn oom_args_classes_unified_cgroups_path_and_other_fields() {
    let oom = |v| {
        req(
            linux(LinuxContainerAdjustment {
                oom_score_adj: Some(OptionalInt { value: v }),
                ..Default::default()
            }),
            Field::OomScoreAdj,
            "",
            "10-o",
        )
    };
    assert!(allowed(
        &only("{oomScoreAdj: {min: -500, max: 1000}}"),
        &oom(-500)
    ));
    assert!(!allowed(
        &only("{oomScoreAdj: {min: -500, max: 1000}}"),
        &oom(-999)
    ));
    let args = req(
        ContainerAdjustment {
            args: vec!["/bin/sh".into()],
            ..Default::default()
        },
        Field::Args,
        "",
        "10-a",
    );
    assert!(allowed(&only("{args: true}"), &args));
    assert!(!allowed(&only("{args: false}"), &args));
    let class = |field, rdt: bool| {
        let c = Some(OptionalString {
            value: "gold".into(),
        });
        let r = if rdt {
            LinuxResources {
                rdt_class: c,
                ..Default::default()
            }
        } else {
            LinuxResources {
                blockio_class: c,
                ..Default::default()
            }
        };
        req(resources(r), field, "", "10-c")
    };
    assert!(allowed(
        &only("{rdtClasses: [gold]}"),
        &class(Field::RdtClass, true)
    ));
    assert!(!allowed(
        &only("{rdtClasses: [silver]}"),
        &class(Field::RdtClass, true)
    ));
    assert!(allowed(
        &only("{blockioClasses: ['g*']}"),
        &class(Field::BlockioClass, false)
    ));
    assert!(!allowed(
        &only("{rdtClasses: [gold]}"),
        &class(Field::BlockioClass, false)
    ));
    let unified = req(
        resources(LinuxResources {
            unified: [("memory.high".to_string(), "1G".to_string())].into(),
            ..Default::default()
        }),
        Field::CgroupsUnified,
        "memory.high",
        "10-u",
    );
    assert!(allowed(&only("{unified: ['memory.*']}"), &unified));
    assert!(!allowed(&only("{unified: ['cpu.*']}"), &unified));
    let path = req(
        linux(LinuxContainerAdjustment {
            cgroups_path: "/kubepods/acme/x".into(),
            ..Default::default()
        }),
        Field::CgroupsPath,
        "",
        "10-p",
    );
    assert!(allowed(&only("{cgroupsPath: ['/kubepods/*']}"), &path));
    assert!(!allowed(&only("{cgroupsPath: ['/system.slice/*']}"), &path));
    let io = req(
        linux(LinuxContainerAdjustment::default()),
        Field::IoPriority,
        "",
        "10-io",
    );
    assert!(allowed(&only("{fields: [IoPriority]}"), &io));
    assert!(!allowed(&only("{fields: [LinuxSched]}"), &io));
}

// ---- scopes ----

#[test]
fn plugin_scopes_by_name_glob_and_index() {
    let by = |scope: &str| {
        format!("default: deny\nrules:\n  - plugins: {scope}\n    allow: {{env: ['*']}}\n")
    };
    let r = env("X", "15-acme-cpu");
    assert!(allowed(&by("{names: [acme-cpu]}"), &r));
    assert!(allowed(&by("{names: [15-acme-cpu]}"), &r));
    assert!(!allowed(&by("{names: [acme]}"), &r));
    assert!(allowed(&by("{glob: 'acme-*'}"), &r));
    assert!(!allowed(&by("{glob: 'other-*'}"), &r));
    assert!(allowed(&by("{index: {min: 10, max: 19}}"), &r));
    assert!(!allowed(&by("{index: {min: 20}}"), &r));
    assert!(allowed(&by("{index: 15}"), &r));
    assert!(!allowed(&by("{glob: 'acme-*', index: {max: 9}}"), &r));
}

#[test]
fn workload_scopes() {
    let by = |scope: &str| {
        format!("default: deny\nrules:\n  - workload: {scope}\n    allow: {{env: ['*']}}\n")
    };
    let r = env("X", "10-a");
    assert!(allowed(&by("{namespaces: [payments]}"), &r));
    assert!(!allowed(&by("{namespaces: [kube-system]}"), &r));
    assert!(allowed(&by("{podLabels: {team: pay}}"), &r));
    assert!(!allowed(&by("{podLabels: {team: ops}}"), &r));
    assert!(!allowed(&by("{podLabels: {owner: '*'}}"), &r));
    assert!(allowed(&by("{podAnnotations: {tier: 'g*'}}"), &r));
    assert!(!allowed(&by("{podAnnotations: {tier: silver}}"), &r));
    assert!(allowed(&by("{containers: ['w*']}"), &r));
    assert!(!allowed(&by("{containers: [db]}"), &r));
    assert!(!allowed(
        &by("{namespaces: [payments], containers: [db]}"),
        &r
    ));
}

// ---- precedence ----

#[test]
fn deny_wins_over_allow_in_any_order() {
    let r = env("X", "10-a");
    let allow_then_deny =
        "rules:\n  - name: ok\n    allow: {env: [X]}\n  - name: no\n    deny: {env: [X]}\n";
    let deny_then_allow =
        "rules:\n  - name: no\n    deny: {env: [X]}\n  - name: ok\n    allow: {env: [X]}\n";
    let same_rule = "rules:\n  - name: both\n    allow: {env: [X]}\n    deny: {env: [X]}\n";
    assert_eq!(
        verdict(allow_then_deny, &r).unwrap_err(),
        "validation error: plugin \"10-a\" may not set env \"X\" = \"v\": denied by rule \"no\" (p.yaml:4)"
    );
    assert_eq!(
        verdict(deny_then_allow, &r).unwrap_err(),
        "validation error: plugin \"10-a\" may not set env \"X\" = \"v\": denied by rule \"no\" (p.yaml:2)"
    );
    assert!(verdict(same_rule, &r)
        .unwrap_err()
        .contains("rule \"both\" (p.yaml:2)"));
}

#[test]
fn out_of_scope_rules_do_not_decide() {
    let r = env("X", "10-a");
    // A deny for another plugin does not touch 10-a.
    assert!(allowed(
        "rules:\n  - plugins: {names: [b]}\n    deny: {env: ['*']}\n",
        &r
    ));
    // An allow for another namespace does not save it under default deny.
    assert!(!allowed(
        "default: deny\nrules:\n  - workload: {namespaces: [other]}\n    allow: {env: ['*']}\n",
        &r
    ));
}

#[test]
fn default_allow_and_deny() {
    let r = env("X", "10-a");
    assert!(allowed("rules: []\n", &r));
    assert_eq!(
        verdict("mode: enforce\ndefault: deny\n", &r).unwrap_err(),
        "validation error: plugin \"10-a\" may not set env \"X\" = \"v\": no rule allows it (default: deny, p.yaml:2)"
    );
}

#[test]
fn several_violations_are_counted_in_the_refusal() {
    let mut r = env("X", "10-a");
    r.adjust.as_mut().unwrap().env.push(KeyValue {
        key: "Y".into(),
        value: "w".into(),
    });
    r.owners
        .as_mut()
        .unwrap()
        .owners
        .get_mut("c0")
        .unwrap()
        .compound
        .get_mut(&(Field::Env as i32))
        .unwrap()
        .owners
        .insert("Y".into(), "20-b".into());
    let e = verdict("default: deny\n", &r).unwrap_err();
    assert!(
        e.ends_with("(default: deny, p.yaml:1) (and 1 more violation)"),
        "{e}"
    );
}

#[test]
fn audit_mode_decides_counts_and_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let text = format!(
        "mode: audit\ndefault: deny\nauditFile: {}\nrules:\n  - name: ok\n    allow: {{env: [A]}}\n",
        audit.display()
    );
    let v = PolicyValidator::new(Policy::from_yaml_str(&text, "p.yaml").unwrap());
    assert!(v.validate(&env("B", "10-a")).is_ok());
    assert!(v.validate(&env("A", "10-a")).is_ok());
    assert!(!v.decide(&env("B", "10-a")).allowed());
    let m = v.metrics();
    assert_eq!(m.decisions("audit", "would_refuse"), 1);
    assert_eq!(m.decisions("audit", "allowed"), 1);
    assert_eq!(m.violations("audit", "10-a", "env", "default"), 1);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["verdict"], "would_refuse");
    assert_eq!(lines[0]["set"][0]["plugin"], "10-a");
    assert_eq!(lines[0]["set"][0]["key"], "B");
    assert_eq!(lines[0]["set"][0]["value"], "v");
    assert_eq!(lines[0]["violations"][0]["at"], "p.yaml:2");
    assert_eq!(lines[1]["verdict"], "allowed");
}

#[test]
fn removals_are_judged_by_key() {
    let mut r = env("X", "-10-a");
    r.adjust.as_mut().unwrap().env.clear();
    let e = verdict("default: deny\n", &r).unwrap_err();
    assert!(e.contains("may not set env \"X\" (removed)"), "{e}");
    assert!(allowed(&only("{env: [X]}"), &r));
}

// ---- loading ----

#[test]
fn bad_files_are_refused_with_line_and_column_and_the_old_policy_stays() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, "default: deny\nrules:\n  - allow: {env: [A]}\n").unwrap();
    let v = PolicyValidator::load(&file).unwrap();
    assert!(v.validate(&env("A", "10-a")).is_ok());
    assert!(v.validate(&env("B", "10-a")).is_err());
    for (bad, at) in [
        ("rules:\n  - allow:\n      envs: [A]\n", ":3:7: "),
        (
            "rules:\n  - allow: {resources: {memory: {max: lots}}}\n",
            ":2:",
        ),
        ("mode: strict\n", ":1:7: "),
        ("rules:\n  - plugins: {index: {min: 20, max: 10}}\n", ":2:"),
        (
            "rules:\n  - allow: {mounts: [{sources: [relative/path]}]}\n",
            ":2:",
        ),
        ("rules: [\n", ":"),
    ] {
        std::fs::write(&file, bad).unwrap();
        let err = v.reload_file(&file).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}{at}", file.display())),
            "{bad:?}: {err}"
        );
        // Still the first policy.
        assert!(v.validate(&env("A", "10-a")).is_ok());
        assert!(v.validate(&env("B", "10-a")).is_err());
    }
    assert_eq!(v.metrics().reloads("error"), 6);
    std::fs::write(&file, "rules: []\n").unwrap();
    v.reload_file(&file).unwrap();
    assert!(v.validate(&env("B", "10-a")).is_ok());
}

// ---- properties ----

proptest! {
    /// A value is allowed by `{min, max}` exactly when it lies within them.
    #[test]
    fn bounds_allow_exactly_the_range(lo in -1000i64..1000, span in 0i64..1000, v in -3000i64..3000) {
        let hi = lo + span;
        let p = only(&format!("{{resources: {{memory: {{min: {lo}, max: {hi}}}}}}}"));
        prop_assert_eq!(allowed(&p, &memory(v)), lo <= v && v <= hi);
        let d = never(&format!("{{resources: {{memory: {{min: {lo}, max: {hi}}}}}}}"));
        prop_assert_eq!(allowed(&d, &memory(v)), !(lo <= v && v <= hi));
    }

    /// A cpuset is allowed by `within` exactly when it is a subset.
    #[test]
    fn cpusets_allowed_exactly_when_within(allow in proptest::collection::btree_set(0u32..16, 0..8),
                                           want in proptest::collection::btree_set(0u32..16, 1..6)) {
        let list = |s: &std::collections::BTreeSet<u32>| s.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
        let p = only(&format!("{{resources: {{cpus: {{within: '{}'}}}}}}", list(&allow)));
        prop_assert_eq!(allowed(&p, &cpus(&list(&want))), want.is_subset(&allow));
    }

    /// Deny wins: whatever allows there are, a matching deny refuses.
    #[test]
    fn a_matching_deny_always_wins(allows in 0usize..4, deny_at in 0usize..4, default_deny in any::<bool>()) {
        let mut text = format!("default: {}\nrules:\n", if default_deny { "deny" } else { "allow" });
        for i in 0..4 {
            if i == deny_at {
                text.push_str("  - name: no\n    deny: {env: [X]}\n");
            }
            if i < allows {
                text.push_str(&format!("  - name: ok{i}\n    allow: {{env: ['*']}}\n"));
            }
        }
        let e = verdict(&text, &env("X", "10-a")).unwrap_err();
        prop_assert!(e.contains("denied by rule \"no\""), "{}", e);
        // Without the deny's field, an allow decides; without allows, the default.
        let other = verdict(&text, &env("Y", "10-a"));
        prop_assert_eq!(other.is_ok(), allows > 0 || !default_deny);
    }

    /// A plugin index range covers exactly the indices within it.
    #[test]
    fn index_ranges(min in 0u32..50, span in 0u32..50, idx in 0u32..100) {
        let max = min + span;
        let text = format!("default: deny\nrules:\n  - plugins: {{index: {{min: {min}, max: {max}}}}}\n    allow: {{env: ['*']}}\n");
        let r = env("X", &format!("{idx:02}-p"));
        prop_assert_eq!(allowed(&text, &r), min <= idx && idx <= max);
    }

    /// Mount sources are covered by whole path components only.
    #[test]
    fn source_prefixes_by_component(suffix in "[a-z]{0,4}", sep in prop::bool::ANY) {
        let source = if sep { format!("/var/lib/acme/{suffix}") } else { format!("/var/lib/acme{suffix}") };
        let covered = sep || suffix.is_empty();
        let p = only("{mounts: [{sources: [/var/lib/acme]}]}");
        prop_assert_eq!(allowed(&p, &mount("/d", &source, "bind", &[])), covered);
    }
}
