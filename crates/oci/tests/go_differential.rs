//! Differential test: the same adjustments and updates applied by this
//! crate and by the reference Go generator
//! (`github.com/containerd/nri/pkg/runtime-tools/generate`, v0.12.5) must
//! give the same spec (or the same error, and the same partially adjusted
//! spec).
//!
//! The Go side is `tests/go` (built with `go build -mod=readonly`). Only
//! the documented decisions of the README are normalized, per case.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use nri_api::gofmt::quote;
use nri_api::{
    opt, CdiDevice, ContainerAdjustment, ContainerUpdate, Hook, Hooks, HugepageLimit, KeyValue,
    LinuxContainerAdjustment, LinuxContainerUpdate, LinuxCpu, LinuxDevice, LinuxDeviceCgroup,
    LinuxIoPriority, LinuxMemory, LinuxMemoryPolicy, LinuxNamespace, LinuxNetDevice, LinuxPids,
    LinuxRdt, LinuxResources, LinuxScheduler, LinuxSeccomp, LinuxSeccompArg, LinuxSyscall, Mount,
    OptionalInt, OptionalRepeatedString, PosixRlimit,
};
use nri_oci::{AdjustError, BoxError, Generator};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// The Go reference program.

fn go_reference() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BIN.get_or_init(build_go_reference) {
        Ok(p) => p.clone(),
        Err(msg) => panic!("{msg}"),
    }
}

fn build_go_reference() -> Result<PathBuf, String> {
    let go = std::env::var_os("NRI_INTEROP_GO").unwrap_or_else(|| "go".into());
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let tmp = out_dir.join(format!("nri-oci-reference.{}", std::process::id()));
    let out = Command::new(&go)
        .current_dir(&module)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOWORK", "off")
        .arg("build")
        .arg("-o")
        .arg(&tmp)
        .arg(".")
        .output()
        .map_err(|e| {
            format!(
                "the nri-oci differential test needs the Go toolchain (1.24 or newer), but `{}` \
                 could not be run: {e}. Install Go and put it on PATH, or point NRI_INTEROP_GO \
                 at the go binary.",
                go.to_string_lossy()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "go build in {} failed ({}):\n{}{}",
            module.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let bin = out_dir.join("nri-oci-reference");
    std::fs::rename(&tmp, &bin).map_err(|e| format!("rename {}: {e}", tmp.display()))?;
    Ok(bin)
}

#[derive(Clone, Default)]
struct Options {
    blockio_classes: Option<BTreeMap<String, Value>>,
    rdt_classes: Option<BTreeMap<String, Value>>,
    max_memory: i64,
    cdi: bool,
    annotation_filter: bool,
}

impl Options {
    fn to_json(&self) -> Value {
        json!({
            "blockio_classes": self.blockio_classes,
            "rdt_classes": self.rdt_classes,
            "max_memory": self.max_memory,
            "cdi": self.cdi,
            "annotation_filter": self.annotation_filter,
        })
    }
}

#[derive(Clone)]
struct Case {
    name: String,
    spec: Value,
    adjust: Option<ContainerAdjustment>,
    updates: Vec<ContainerUpdate>,
    options: Options,
}

impl Case {
    fn new(name: &str, spec: Value, adjust: ContainerAdjustment) -> Self {
        Case {
            name: name.into(),
            spec,
            adjust: Some(adjust),
            updates: Vec::new(),
            options: Options::default(),
        }
    }
}

struct GoResult {
    base: Value,
    spec: Value,
    error: String,
}

fn run_go(cases: &[Case]) -> Vec<GoResult> {
    let input = json!({
        "cases": cases.iter().map(|c| json!({
            "name": c.name,
            "spec": c.spec,
            "adjust": c.adjust,
            "updates": c.updates,
            "options": c.options.to_json(),
        })).collect::<Vec<_>>()
    });
    let mut child = Command::new(go_reference())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Go reference");
    let payload = serde_json::to_vec(&input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&payload));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "Go reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = parsed["results"].as_array().unwrap();
    assert_eq!(results.len(), cases.len());
    results
        .iter()
        .map(|r| GoResult {
            base: r["base"].clone(),
            spec: r["spec"].clone(),
            error: r["error"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The same case with this crate.

fn run_rust(case: &Case) -> (Value, String) {
    let mut spec = case.spec.clone();
    let opts = case.options.clone();
    let result = {
        let mut g = Generator::new(&mut spec);
        if let Some(classes) = opts.blockio_classes.clone() {
            g = g.with_blockio_resolver(move |class| {
                classes.get(class).cloned().ok_or_else(|| {
                    BoxError::from(format!("unknown block I/O class {}", quote(class)))
                })
            });
        }
        if let Some(classes) = opts.rdt_classes.clone() {
            g = g.with_rdt_resolver(move |class| {
                classes
                    .get(class)
                    .cloned()
                    .ok_or_else(|| BoxError::from(format!("unknown RDT class {}", quote(class))))
            });
        }
        if opts.max_memory > 0 {
            let max = opts.max_memory;
            g = g.with_resource_checker(move |res| {
                match res.pointer("/memory/limit").and_then(Value::as_i64) {
                    Some(l) if l > max => Err(format!("memory limit {l} exceeds {max}").into()),
                    _ => Ok(()),
                }
            });
        }
        if opts.cdi {
            g = g.with_cdi_injector(|spec, names| {
                if let Some(bad) = names.iter().find(|n| n.starts_with("fail/")) {
                    return Err(format!("unresolvable CDI devices {bad}").into());
                }
                let annotations = spec
                    .as_object_mut()
                    .unwrap()
                    .entry("annotations")
                    .or_insert_with(|| json!({}));
                annotations["cdi.test/devices"] = Value::String(names.join(","));
                Ok(())
            });
        }
        if opts.annotation_filter {
            g = g.with_annotation_filter(|a| {
                let mut out = BTreeMap::new();
                for (k, v) in a {
                    let key = k.strip_prefix('-').unwrap_or(k);
                    if key.starts_with("bad.") {
                        return Err(format!("annotation {} not allowed", quote(key)).into());
                    }
                    if !key.starts_with("drop.") {
                        out.insert(k.clone(), v.clone());
                    }
                }
                Ok(out)
            });
        }
        apply_all(&mut g, case)
    };
    let error = result.err().map(|e| e.to_string()).unwrap_or_default();
    (spec, error)
}

fn apply_all(g: &mut Generator<'_>, case: &Case) -> Result<(), AdjustError> {
    if let Some(adjust) = &case.adjust {
        g.adjust(adjust)?;
    }
    for u in &case.updates {
        g.apply_update(u)?;
    }
    Ok(())
}

/// Runs all cases on both sides and compares; `normalize` may adjust the
/// Go result of a case for a documented decision. Returns the Go errors
/// per case (empty for success).
fn compare(cases: &[Case], normalize: impl Fn(&Case, &mut Value, &mut String)) -> Vec<String> {
    let go = run_go(cases);
    let mut failures = Vec::new();
    let mut errors = Vec::new();
    for (case, mut go) in cases.iter().zip(go) {
        errors.push(go.error.clone());
        assert_eq!(
            go.base, case.spec,
            "case {}: the input spec is not in Go's canonical form",
            case.name
        );
        let (rust_spec, rust_err) = run_rust(case);
        normalize(case, &mut go.spec, &mut go.error);
        if rust_spec != go.spec || rust_err != go.error {
            failures.push(format!(
                "case {}\n adjust: {}\n updates: {}\n go error:   {:?}\n rust error: {:?}\n go spec:   {}\n rust spec: {}\n",
                case.name,
                serde_json::to_string(&case.adjust).unwrap(),
                serde_json::to_string(&case.updates).unwrap(),
                go.error,
                rust_err,
                go.spec,
                rust_spec
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    errors
}

fn base_spec() -> Value {
    serde_json::from_str(include_str!("fixtures/go-base-spec.json")).unwrap()
}

fn classes() -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let mut blockio = BTreeMap::new();
    blockio.insert("gold".to_string(), json!({"weight": 900}));
    blockio.insert(
        "slow".to_string(),
        json!({"throttleWriteBpsDevice": [{"major": 8, "minor": 0, "rate": 1000}]}),
    );
    let mut rdt = BTreeMap::new();
    rdt.insert(
        "gold".to_string(),
        json!({"closID": "gold", "schemata": ["L3:0=f0"]}),
    );
    rdt.insert("mon".to_string(), json!({"enableMonitoring": true}));
    (blockio, rdt)
}

// ---------------------------------------------------------------------------
// Hand-written cases.

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: v.into(),
    }
}

fn mount(dest: &str, src: &str, opts: &[&str]) -> Mount {
    Mount {
        destination: dest.into(),
        r#type: "bind".into(),
        source: src.into(),
        options: opts.iter().map(|s| s.to_string()).collect(),
    }
}

fn linux_adj(f: impl FnOnce(&mut LinuxContainerAdjustment)) -> ContainerAdjustment {
    let mut a = ContainerAdjustment::default();
    f(a.linux.get_or_insert_with(Default::default));
    a
}

#[test]
fn hand_written_cases_match_go() {
    let base = base_spec();
    let (blockio, rdt) = classes();
    let mut cases = vec![
        Case::new("empty", base.clone(), ContainerAdjustment::default()),
        Case::new("empty linux", base.clone(), linux_adj(|_| {})),
        Case::new(
            "minimal spec, empty",
            json!({"ociVersion": "1.0.0"}),
            ContainerAdjustment::default(),
        ),
    ];
    let mut a = ContainerAdjustment::default();
    a.add_env("HOME", "/home/x")
        .remove_env("A")
        .add_env("NEW", "1")
        .add_env("NEW", "2")
        .remove_env("NOPE")
        .set_args(&["/bin/sh", "-c", "true"])
        .add_annotation("c", "3")
        .remove_annotation("a")
        .add_rlimit("RLIMIT_NOFILE", 4096, 2048)
        .add_hooks(&Hooks {
            prestart: vec![Hook {
                path: "/p".into(),
                ..Default::default()
            }],
            poststart: vec![Hook {
                path: "/ps".into(),
                args: vec!["ps".into()],
                env: vec!["X=1".into()],
                timeout: Some(OptionalInt { value: 3 }),
            }],
            create_runtime: vec![Hook {
                path: "/cr".into(),
                ..Default::default()
            }],
            create_container: vec![Hook {
                path: "/cc".into(),
                ..Default::default()
            }],
            start_container: vec![Hook {
                path: "/sc".into(),
                ..Default::default()
            }],
            poststop: vec![Hook {
                path: "/pst".into(),
                ..Default::default()
            }],
        });
    cases.push(Case::new("process fields", base.clone(), a));

    cases.push(Case::new(
        "devices",
        base.clone(),
        linux_adj(|l| {
            l.devices = vec![
                LinuxDevice {
                    path: "-/dev/null".into(),
                    ..Default::default()
                },
                LinuxDevice {
                    path: "/dev/sda".into(),
                    r#type: "b".into(),
                    major: 8,
                    minor: 16,
                    file_mode: opt(0o660u32),
                    uid: opt(0u32),
                    gid: opt(6u32),
                },
                LinuxDevice {
                    path: "/dev/fuse".into(),
                    r#type: "c".into(),
                    major: 10,
                    minor: 229,
                    ..Default::default()
                },
                LinuxDevice {
                    path: "/dev/odd".into(),
                    ..Default::default()
                },
            ];
        }),
    ));

    cases.push(Case::new(
        "linux scalars",
        base.clone(),
        linux_adj(|l| {
            l.cgroups_path = "/custom".into();
            l.oom_score_adj = opt(-998i64);
            l.io_priority = Some(LinuxIoPriority {
                class: 1,
                priority: 0,
            });
            l.scheduler = Some(LinuxScheduler {
                policy: 7,
                nice: -3,
                priority: 0,
                flags: vec![0, 2, 6],
                runtime: 100,
                deadline: 200,
                period: 300,
            });
            l.memory_policy = Some(LinuxMemoryPolicy {
                mode: 6,
                nodes: "0-1".into(),
                flags: vec![1, 2],
            });
        }),
    ));
    cases.push(Case::new(
        "clearing io priority, scheduler, memory policy",
        base.clone(),
        linux_adj(|l| {
            l.io_priority = Some(LinuxIoPriority::default());
            l.scheduler = Some(LinuxScheduler::default());
            l.memory_policy = Some(LinuxMemoryPolicy {
                mode: 42,
                ..Default::default()
            });
        }),
    ));
    cases.push(Case::new(
        "seccomp",
        base.clone(),
        linux_adj(|l| {
            l.seccomp_policy = Some(LinuxSeccomp {
                default_action: "SCMP_ACT_LOG".into(),
                default_errno: opt(38u32),
                architectures: vec!["SCMP_ARCH_AARCH64".into()],
                flags: vec!["SECCOMP_FILTER_FLAG_LOG".into()],
                listener_path: "/run/seccomp.sock".into(),
                listener_metadata: "meta".into(),
                syscalls: vec![
                    LinuxSyscall {
                        names: vec!["ptrace".into()],
                        action: "SCMP_ACT_ERRNO".into(),
                        errno_ret: opt(1u32),
                        args: vec![LinuxSeccompArg {
                            index: 1,
                            value: 2,
                            value_two: 3,
                            op: "SCMP_CMP_MASKED_EQ".into(),
                        }],
                    },
                    LinuxSyscall {
                        action: "SCMP_ACT_KILL".into(),
                        ..Default::default()
                    },
                ],
            });
        }),
    ));
    cases.push(Case::new(
        "namespaces",
        base.clone(),
        linux_adj(|l| {
            l.namespaces = vec![
                LinuxNamespace {
                    r#type: "-ipc".into(),
                    path: String::new(),
                },
                LinuxNamespace {
                    r#type: "network".into(),
                    path: String::new(),
                },
                LinuxNamespace {
                    r#type: "user".into(),
                    path: "/proc/7/ns/user".into(),
                },
                LinuxNamespace {
                    r#type: "-time".into(),
                    path: String::new(),
                },
            ];
        }),
    ));
    cases.push(Case::new(
        "unknown namespace",
        base.clone(),
        linux_adj(|l| {
            l.cgroups_path = "/set-before-the-error".into();
            l.namespaces = vec![
                LinuxNamespace {
                    r#type: "cgroup".into(),
                    path: String::new(),
                },
                LinuxNamespace {
                    r#type: "-netns".into(),
                    path: String::new(),
                },
            ];
            l.sysctl.insert("never.applied".into(), "1".into());
        }),
    ));
    cases.push(Case::new(
        "sysctl and net devices",
        base.clone(),
        linux_adj(|l| {
            l.sysctl
                .insert("-net.ipv4.ip_forward".into(), String::new());
            l.sysctl.insert("net.core.somaxconn".into(), "1024".into());
            l.net_devices
                .insert("-eth1".into(), LinuxNetDevice::default());
            l.net_devices.insert(
                "eth2".into(),
                LinuxNetDevice {
                    name: "net2".into(),
                },
            );
            l.net_devices
                .insert("eth3".into(), LinuxNetDevice::default());
        }),
    ));
    cases.push(Case::new(
        "remove the only net device",
        base.clone(),
        linux_adj(|l| {
            l.net_devices
                .insert("-eth1".into(), LinuxNetDevice::default());
            l.sysctl
                .insert("-net.ipv4.ip_forward".into(), String::new());
            l.sysctl
                .insert("-kernel.shm_rmid_forced".into(), String::new());
        }),
    ));
    cases.push(Case::new(
        "resources",
        base.clone(),
        linux_adj(|l| {
            l.resources = Some(LinuxResources {
                memory: Some(LinuxMemory {
                    limit: opt(1i64 << 30),
                    reservation: opt(1i64),
                    swap: opt(2i64),
                    kernel: opt(3i64),
                    kernel_tcp: opt(4i64),
                    swappiness: opt(5u64),
                    disable_oom_killer: opt(true),
                    use_hierarchy: opt(true),
                }),
                cpu: Some(LinuxCpu {
                    shares: opt(2u64),
                    quota: opt(-1i64),
                    period: opt(0u64),
                    realtime_runtime: opt(5i64),
                    realtime_period: opt(6u64),
                    cpus: "1".into(),
                    mems: String::new(),
                }),
                hugepage_limits: vec![
                    HugepageLimit {
                        page_size: "2MB".into(),
                        limit: 0,
                    },
                    HugepageLimit {
                        page_size: "1GB".into(),
                        limit: 1 << 30,
                    },
                ],
                unified: [
                    ("memory.high".to_string(), "1G".to_string()),
                    ("cpu.idle".to_string(), "1".to_string()),
                ]
                .into_iter()
                .collect(),
                devices: vec![LinuxDeviceCgroup {
                    allow: true,
                    r#type: "c".into(),
                    major: opt(5i64),
                    minor: None,
                    access: "rw".into(),
                }],
                pids: Some(LinuxPids { limit: 0 }),
                ..Default::default()
            });
        }),
    ));
    for (name, limit) in [
        ("pids unlimited over a limit", -1),
        ("pids -5", -5),
        ("pids 42", 42),
    ] {
        cases.push(Case::new(
            name,
            base.clone(),
            linux_adj(|l| {
                l.resources = Some(LinuxResources {
                    pids: Some(LinuxPids { limit }),
                    ..Default::default()
                })
            }),
        ));
    }
    let mut spec_no_pids = base.clone();
    spec_no_pids["linux"]["resources"]
        .as_object_mut()
        .unwrap()
        .remove("pids");
    cases.push(Case::new(
        "pids unlimited, no pids before",
        spec_no_pids,
        linux_adj(|l| {
            l.resources = Some(LinuxResources {
                pids: Some(LinuxPids { limit: -1 }),
                ..Default::default()
            })
        }),
    ));
    cases.push(Case::new(
        "memory limit zero is ignored",
        base.clone(),
        linux_adj(|l| {
            l.resources = Some(LinuxResources {
                memory: Some(LinuxMemory {
                    limit: opt(0i64),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }),
    ));

    // Classes and checkers.
    for (name, blockio_class, rdt_class, with_resolvers) in [
        ("classes resolved", "gold", "gold", true),
        ("classes cleared", "", "", true),
        ("classes without resolvers", "gold", "gold", false),
        ("unknown block I/O class", "platinum", "gold", true),
        ("unknown RDT class", "slow", "platinum", true),
    ] {
        let mut c = Case::new(
            name,
            base.clone(),
            linux_adj(|l| {
                l.resources = Some(LinuxResources {
                    blockio_class: opt(blockio_class),
                    rdt_class: opt(rdt_class),
                    ..Default::default()
                });
            }),
        );
        if with_resolvers {
            c.options.blockio_classes = Some(blockio.clone());
            c.options.rdt_classes = Some(rdt.clone());
        }
        cases.push(c);
    }
    let mut c = Case::new(
        "resource checker rejects",
        base.clone(),
        linux_adj(|l| {
            l.resources = Some(LinuxResources {
                memory: Some(LinuxMemory {
                    limit: opt(2000i64),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }),
    );
    c.options.max_memory = 1000;
    cases.push(c);
    let mut c = Case::new(
        "resource checker accepts",
        base.clone(),
        linux_adj(|l| {
            l.resources = Some(LinuxResources {
                memory: Some(LinuxMemory {
                    limit: opt(999i64),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }),
    );
    c.options.max_memory = 1000;
    cases.push(c);

    // RDT.
    for (name, rdt_adj) in [
        (
            "rdt set",
            LinuxRdt {
                clos_id: opt("c1"),
                schemata: Some(OptionalRepeatedString {
                    value: vec!["MB:0=50".into()],
                }),
                enable_monitoring: opt(false),
                remove: false,
            },
        ),
        (
            "rdt remove",
            LinuxRdt {
                remove: true,
                ..Default::default()
            },
        ),
        (
            "rdt remove and set",
            LinuxRdt {
                remove: true,
                enable_monitoring: opt(true),
                ..Default::default()
            },
        ),
        (
            "rdt empty values",
            LinuxRdt {
                clos_id: opt(""),
                schemata: Some(OptionalRepeatedString::default()),
                ..Default::default()
            },
        ),
    ] {
        cases.push(Case::new(
            name,
            base.clone(),
            linux_adj(|l| l.rdt = Some(rdt_adj)),
        ));
    }

    // CDI and annotation filter.
    let mut a = ContainerAdjustment::default();
    a.add_cdi_device(CdiDevice {
        name: "vendor.com/gpu=0".into(),
    })
    .add_cdi_device(CdiDevice {
        name: "vendor.com/gpu=1".into(),
    })
    .add_env("AFTER_CDI", "1");
    let mut c = Case::new("cdi injected", base.clone(), a.clone());
    c.options.cdi = true;
    cases.push(c);
    cases.push(Case::new("cdi without injector", base.clone(), a.clone()));
    a.add_cdi_device(CdiDevice {
        name: "fail/x=y".into(),
    });
    let mut c = Case::new("cdi failure", base.clone(), a);
    c.options.cdi = true;
    cases.push(c);
    let mut a = ContainerAdjustment::default();
    a.add_annotation("keep", "1")
        .add_annotation("drop.me", "2")
        .remove_annotation("drop.b");
    let mut c = Case::new("annotation filter", base.clone(), a.clone());
    c.options.annotation_filter = true;
    cases.push(c);
    a.add_annotation("bad.key", "x");
    let mut c = Case::new("annotation filter rejects", base.clone(), a);
    c.options.annotation_filter = true;
    cases.push(c);

    // Mounts.
    let mut a = ContainerAdjustment::default();
    a.add_mount(mount("/data", "/srv/other", &["rbind", "ro"]))
        .remove_mount("/dev/mqueue")
        .add_mount(mount("/a/b/c/d", "/x", &[]))
        .add_mount(mount("/z", "/y", &["rprivate"]))
        .add_mount(mount("relative/path", "/y", &[]))
        .add_mount(mount("/var//lib/../log/", "/y", &[]))
        .remove_mount("/nonexistent");
    cases.push(Case::new("mounts", base.clone(), a));
    let mut a = ContainerAdjustment::default();
    a.add_mount(mount("/shared", "/", &["rbind", "rshared"]));
    cases.push(Case::new("mount rshared", base.clone(), a));
    let mut a = ContainerAdjustment::default();
    a.add_mount(mount("/slave", "/proc", &["rslave"]));
    cases.push(Case::new("mount rslave", base.clone(), a));
    let mut a = ContainerAdjustment::default();
    a.add_mount(mount("/nowhere", "relative-source", &["rslave"]));
    cases.push(Case::new(
        "mount propagation of a relative source",
        base.clone(),
        a,
    ));
    let mut a = ContainerAdjustment::default();
    for m in [
        "/proc",
        "/dev",
        "/dev/pts",
        "/dev/shm",
        "/dev/mqueue",
        "/sys",
        "/sys/fs/cgroup",
        "/etc/hosts",
        "/etc/resolv.conf",
        "/data",
    ] {
        a.remove_mount(m);
    }
    cases.push(Case::new("remove all mounts", base.clone(), a));
    let mut spec_dups = base.clone();
    spec_dups["mounts"] = json!([
        {"destination": "/x", "source": "first"},
        {"destination": "/a/b"},
        {"destination": "/x", "source": "second"},
        {"destination": "/"}
    ]);
    let mut a = ContainerAdjustment::default();
    a.remove_mount("/none");
    cases.push(Case::new(
        "duplicate destinations, few mounts",
        spec_dups,
        a,
    ));

    // Updates.
    let mut u1 = ContainerUpdate::for_container("c1");
    u1.set_linux_cpu_shares(77)
        .set_linux_cpuset_cpus("2-3")
        .set_linux_memory_limit(12345)
        .set_linux_memory_reservation(1)
        .set_linux_pid_limits(-1)
        .add_linux_hugepage_limit("2MB", 4)
        .add_linux_unified("io.max", "8:0 rbps=1");
    let mut u2 = ContainerUpdate::for_container("c1");
    u2.set_linux_blockio_class("slow")
        .set_linux_rdt_class("mon")
        .set_linux_cpu_quota(1);
    let mut c = Case::new("updates", base.clone(), ContainerAdjustment::default());
    c.updates = vec![u1, u2, ContainerUpdate::for_container("c1")];
    c.options.blockio_classes = Some(blockio.clone());
    c.options.rdt_classes = Some(rdt.clone());
    cases.push(c);
    let mut u = ContainerUpdate::for_container("c1");
    u.set_linux_memory_limit(5000);
    let mut c = Case::new(
        "update rejected by the checker",
        base.clone(),
        ContainerAdjustment::default(),
    );
    c.updates = vec![u];
    c.options.max_memory = 1000;
    cases.push(c);

    let errors = compare(&cases, |_, _, _| {});
    // The error cases above really failed, and the others really succeeded.
    for (case, err) in cases.iter().zip(&errors) {
        let should_fail = [
            "unknown namespace",
            "unknown block I/O class",
            "unknown RDT class",
            "resource checker rejects",
            "cdi failure",
            "annotation filter rejects",
            "mount propagation of a relative source",
            "update rejected by the checker",
        ]
        .contains(&case.name.as_str());
        let propagation = case.name.starts_with("mount r");
        assert!(
            propagation || should_fail != err.is_empty(),
            "case {}: unexpected outcome {err:?}",
            case.name
        );
    }
}

/// Decision: objects the generator must create hold only the members set;
/// Go's struct encoding also writes `process.user` and `process.cwd`.
/// Decision: seccomp, rlimits and `rslave` mounts on a spec without
/// `linux`/`process` create them where the reference panics.
#[test]
fn specs_without_process_or_linux() {
    let bare = json!({"ociVersion": "1.2.0"});
    let mut env = ContainerAdjustment::default();
    env.add_env("A", "1").remove_env("B");
    let mut rlimit = ContainerAdjustment::default();
    rlimit.add_rlimit("RLIMIT_CORE", 0, 0);
    let seccomp = linux_adj(|l| {
        l.seccomp_policy = Some(LinuxSeccomp {
            default_action: "SCMP_ACT_ALLOW".into(),
            ..Default::default()
        })
    });
    let mut everything_linux = linux_adj(|l| {
        l.sysctl.insert("-x".into(), String::new());
        l.namespaces.push(LinuxNamespace {
            r#type: "-pid".into(),
            path: String::new(),
        });
        l.devices.push(LinuxDevice {
            path: "-/dev/x".into(),
            ..Default::default()
        });
        l.oom_score_adj = opt(1i64);
        l.resources = Some(LinuxResources::default());
    });
    everything_linux.remove_env("B");
    let cases = vec![
        Case::new("env on a bare spec", bare.clone(), env),
        Case::new(
            "removals and empty resources on a bare spec",
            bare.clone(),
            everything_linux,
        ),
        Case::new("rlimits on a bare spec", bare.clone(), rlimit),
        Case::new("seccomp on a bare spec", bare.clone(), seccomp),
    ];
    compare(&cases, |case, go_spec, go_err| {
        if go_err.starts_with("panic:") {
            // The reference dereferences a missing process/linux.
            let (rust_spec, rust_err) = run_rust(case);
            assert_eq!(rust_err, "", "case {}", case.name);
            *go_spec = rust_spec;
            go_err.clear();
            return;
        }
        if let Some(p) = go_spec.get_mut("process").and_then(Value::as_object_mut) {
            if p.get("user") == Some(&json!({"uid": 0, "gid": 0})) {
                p.remove("user");
            }
            if p.get("cwd") == Some(&json!("")) {
                p.remove("cwd");
            }
        }
    });
}

/// Decision [11]: with both `-k` and `k` in a map the reference result
/// depends on Go's map order; ours always ends with `k` set.
#[test]
fn removal_and_addition_of_the_same_key() {
    let mut a = linux_adj(|l| {
        l.sysctl
            .insert("-net.ipv4.ip_forward".into(), String::new());
        l.sysctl.insert("net.ipv4.ip_forward".into(), "0".into());
        l.net_devices
            .insert("-eth1".into(), LinuxNetDevice::default());
        l.net_devices.insert(
            "eth1".into(),
            LinuxNetDevice {
                name: "renamed".into(),
            },
        );
    });
    a.remove_annotation("a").add_annotation("a", "new");
    let cases = vec![Case::new("remove and add", base_spec(), a)];
    let (rust_spec, _) = run_rust(&cases[0]);
    assert_eq!(rust_spec["annotations"]["a"], "new");
    assert_eq!(rust_spec["linux"]["sysctl"]["net.ipv4.ip_forward"], "0");
    assert_eq!(
        rust_spec["linux"]["netDevices"]["eth1"],
        json!({"name": "renamed"})
    );
    compare(&cases, |_, go_spec, _| {
        // Go either removed or set each key; both outcomes are accepted,
        // then the entry is set to our deterministic result.
        for (path, key, value) in [
            ("/annotations", "a", json!("new")),
            ("/linux/sysctl", "net.ipv4.ip_forward", json!("0")),
            ("/linux/netDevices", "eth1", json!({"name": "renamed"})),
        ] {
            // A map left empty by the removal is omitted by Go.
            let mut map = &mut *go_spec;
            for part in path.split('/').skip(1) {
                map = map
                    .as_object_mut()
                    .expect("object on the way")
                    .entry(part)
                    .or_insert_with(|| json!({}));
            }
            let map = map.as_object_mut().expect("map");
            let got = map.get(key).cloned();
            assert!(
                got.is_none() || got == Some(value.clone()),
                "{path}/{key}: {got:?}"
            );
            map.insert(key.to_string(), value);
        }
    });
}

// ---------------------------------------------------------------------------
// Random adjustments.

/// SplitMix64: a tiny deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn word(&mut self) -> String {
        let words = ["x", "val", "1", "", "a=b", "with space", "ünï", "0-3"];
        self.pick(&words).to_string()
    }
}

/// Keys for a map adjustment: each key at most once, marked or not.
fn map_entries(rng: &mut Rng, pool: &[&str], max: u64) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for _ in 0..rng.below(max + 1) {
        let key = *rng.pick(pool);
        if out.contains_key(key) || out.contains_key(&format!("-{key}")) {
            continue;
        }
        if rng.chance(35) {
            out.insert(format!("-{key}"), String::new());
        } else {
            out.insert(key.to_string(), rng.word());
        }
    }
    out
}

fn random_resources(rng: &mut Rng, for_update: bool) -> LinuxResources {
    let mut r = LinuxResources::default();
    if rng.chance(50) {
        let mut c = LinuxCpu::default();
        if rng.chance(50) {
            c.shares = opt(rng.below(4096));
        }
        if rng.chance(40) {
            c.quota = opt(rng.int(-1, 200_000));
        }
        if rng.chance(40) {
            c.period = opt(rng.below(200_000));
        }
        if rng.chance(20) {
            c.realtime_runtime = opt(rng.int(0, 1000));
        }
        if rng.chance(20) {
            c.realtime_period = opt(rng.below(1000));
        }
        if rng.chance(40) {
            c.cpus = rng.pick(&["", "0", "1-3", "0,2"]).to_string();
        }
        if rng.chance(30) {
            c.mems = rng.pick(&["", "0", "0-1"]).to_string();
        }
        r.cpu = Some(c);
    }
    if rng.chance(50) {
        let mut m = LinuxMemory::default();
        if rng.chance(70) {
            m.limit = opt(*rng.pick(&[0i64, 1 << 20, 1 << 30, 123_456_789]));
        }
        if rng.chance(30) {
            m.reservation = opt(rng.int(0, 1 << 20));
        }
        if rng.chance(30) {
            m.swap = opt(rng.int(-1, 1 << 20));
        }
        if rng.chance(20) {
            m.swappiness = opt(rng.below(100));
        }
        if rng.chance(20) {
            m.disable_oom_killer = opt(rng.chance(50));
        }
        r.memory = Some(m);
    }
    for _ in 0..rng.below(3) {
        r.hugepage_limits.push(HugepageLimit {
            page_size: rng.pick(&["2MB", "1GB", "64KB"]).to_string(),
            limit: rng.below(1 << 31),
        });
    }
    for _ in 0..rng.below(3) {
        r.unified.insert(
            rng.pick(&["memory.high", "io.weight", "cpu.idle"])
                .to_string(),
            rng.word(),
        );
    }
    if rng.chance(40) {
        r.pids = Some(LinuxPids {
            limit: *rng.pick(&[-1i64, 0, 1, 100, 4096, -2]),
        });
    }
    if !for_update {
        for _ in 0..rng.below(3) {
            r.devices.push(LinuxDeviceCgroup {
                allow: rng.chance(50),
                r#type: rng.pick(&["", "a", "b", "c"]).to_string(),
                major: if rng.chance(60) {
                    opt(rng.int(-1, 300))
                } else {
                    None
                },
                minor: if rng.chance(60) {
                    opt(rng.int(-1, 300))
                } else {
                    None
                },
                access: rng.pick(&["", "r", "rw", "rwm"]).to_string(),
            });
        }
    }
    if rng.chance(30) {
        r.blockio_class = opt(*rng.pick(&["", "gold", "slow", "missing"]));
    }
    if rng.chance(30) {
        r.rdt_class = opt(*rng.pick(&["", "gold", "mon", "missing"]));
    }
    r
}

fn random_adjustment(rng: &mut Rng, options: &Options) -> ContainerAdjustment {
    let mut a = ContainerAdjustment::default();
    let annotation_keys = [
        "a",
        "b",
        "c",
        "io.kubernetes.cri.container-type",
        "drop.a",
        "bad.k",
        "new",
    ];
    let annotation_pool: Vec<&str> = annotation_keys
        .iter()
        .copied()
        .filter(|k| options.annotation_filter || !k.starts_with("bad."))
        .filter(|k| !k.starts_with("bad.") || rng.chance(30))
        .collect();
    a.annotations = map_entries(rng, &annotation_pool, 3);
    for _ in 0..rng.below(5) {
        let key = rng
            .pick(&["PATH", "HOME", "A", "B", "LANG", "NEW", ""])
            .to_string();
        let key = if rng.chance(30) {
            format!("-{key}")
        } else {
            key
        };
        a.env.push(kv(&key, &rng.word()));
    }
    if rng.chance(20) {
        a.args = (0..rng.below(3)).map(|_| rng.word()).collect();
    }
    if rng.chance(25) {
        let mut h = Hooks::default();
        let hook = |rng: &mut Rng| Hook {
            path: format!("/hooks/{}", rng.below(10)),
            args: (0..rng.below(3)).map(|_| rng.word()).collect(),
            env: (0..rng.below(2)).map(|_| "K=v".to_string()).collect(),
            timeout: if rng.chance(50) {
                Some(OptionalInt {
                    value: rng.int(0, 30),
                })
            } else {
                None
            },
        };
        for list in [
            &mut h.prestart,
            &mut h.poststart,
            &mut h.poststop,
            &mut h.create_runtime,
            &mut h.create_container,
            &mut h.start_container,
        ] {
            for _ in 0..rng.below(2) {
                list.push(hook(rng));
            }
        }
        a.hooks = Some(h);
    }
    if options.cdi && rng.chance(40) {
        for _ in 0..rng.below(3) + 1 {
            let name = rng
                .pick(&["vendor.com/gpu=0", "vendor.com/gpu=all", "fail/dev=1"])
                .to_string();
            a.cdi_devices.push(CdiDevice { name });
        }
    }
    for _ in 0..rng.below(4) {
        let m = Mount {
            destination: rng
                .pick(&[
                    "/data",
                    "/proc",
                    "/dev/shm",
                    "/etc/hosts",
                    "/new",
                    "/new/sub/dir",
                    "/z",
                    "/a",
                    "/dev/x",
                ])
                .to_string(),
            r#type: rng.pick(&["bind", "tmpfs", ""]).to_string(),
            source: rng.pick(&["/srv", "/tmp", "", "tmpfs"]).to_string(),
            options: (0..rng.below(3))
                .map(|_| {
                    rng.pick(&["rbind", "ro", "rw", "nosuid", "rprivate"])
                        .to_string()
                })
                .collect(),
        };
        if rng.chance(30) {
            a.remove_mount(&m.destination);
        } else {
            a.mounts.push(m);
        }
    }
    // Propagation options only on the last mount: the reference carries
    // them over to later mounts (decision [13]).
    if rng.chance(15) {
        if let Some(last) = a.mounts.last_mut() {
            if !last.destination.starts_with('-') {
                last.options
                    .push(rng.pick(&["rshared", "rslave"]).to_string());
                last.source = rng.pick(&["/", "/proc", "/tmp/x", "rel"]).to_string();
            }
        }
    }
    for _ in 0..rng.below(3) {
        a.rlimits.push(PosixRlimit {
            r#type: rng
                .pick(&["RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_NPROC"])
                .to_string(),
            hard: rng.below(1 << 20),
            soft: rng.below(1 << 20),
        });
    }
    if rng.chance(80) {
        let mut l = LinuxContainerAdjustment::default();
        for _ in 0..rng.below(4) {
            let path = rng
                .pick(&[
                    "/dev/null",
                    "/dev/sda",
                    "/dev/fuse",
                    "/dev/kvm",
                    "/dev/net/tun",
                ])
                .to_string();
            let path = if rng.chance(30) {
                format!("-{path}")
            } else {
                path
            };
            l.devices.push(LinuxDevice {
                path,
                r#type: rng.pick(&["c", "b", "u", "p", ""]).to_string(),
                major: rng.int(0, 300),
                minor: rng.int(0, 300),
                file_mode: if rng.chance(50) {
                    opt(*rng.pick(&[0o666u32, 0o600, 0o20000000666, 0]))
                } else {
                    None
                },
                uid: if rng.chance(40) {
                    opt(rng.below(2000) as u32)
                } else {
                    None
                },
                gid: if rng.chance(40) {
                    opt(rng.below(2000) as u32)
                } else {
                    None
                },
            });
        }
        if rng.chance(20) {
            l.cgroups_path = rng.pick(&["/a", "system.slice:x:y"]).to_string();
        }
        if rng.chance(25) {
            l.oom_score_adj = opt(rng.int(-1000, 1000));
        }
        if rng.chance(25) {
            l.io_priority = Some(LinuxIoPriority {
                class: rng.int(0, 4) as i32,
                priority: rng.int(0, 7) as i32,
            });
        }
        if rng.chance(25) {
            l.scheduler = Some(LinuxScheduler {
                policy: rng.int(0, 8) as i32,
                nice: rng.int(-20, 19) as i32,
                priority: rng.int(0, 99) as i32,
                flags: (0..rng.below(3)).map(|_| rng.int(0, 7) as i32).collect(),
                runtime: rng.below(3) * 1000,
                deadline: rng.below(3) * 1000,
                period: rng.below(3) * 1000,
            });
        }
        if rng.chance(20) {
            l.seccomp_policy = Some(LinuxSeccomp {
                default_action: rng
                    .pick(&["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", ""])
                    .to_string(),
                default_errno: if rng.chance(50) { opt(1u32) } else { None },
                architectures: (0..rng.below(2))
                    .map(|_| "SCMP_ARCH_X86_64".to_string())
                    .collect(),
                flags: (0..rng.below(2))
                    .map(|_| "SECCOMP_FILTER_FLAG_TSYNC".to_string())
                    .collect(),
                listener_path: rng.pick(&["", "/run/l"]).to_string(),
                listener_metadata: rng.pick(&["", "m"]).to_string(),
                syscalls: (0..rng.below(3))
                    .map(|_| LinuxSyscall {
                        names: (0..rng.below(3))
                            .map(|_| rng.pick(&["read", "mount", "bpf"]).to_string())
                            .collect(),
                        action: rng.pick(&["SCMP_ACT_KILL", "SCMP_ACT_ERRNO"]).to_string(),
                        errno_ret: if rng.chance(50) {
                            opt(rng.below(100) as u32)
                        } else {
                            None
                        },
                        args: (0..rng.below(2))
                            .map(|_| LinuxSeccompArg {
                                index: rng.below(6) as u32,
                                value: rng.below(10),
                                value_two: rng.below(2),
                                op: "SCMP_CMP_EQ".into(),
                            })
                            .collect(),
                    })
                    .collect(),
            });
        }
        for _ in 0..rng.below(4) {
            let t = rng
                .pick(&[
                    "pid", "network", "ipc", "uts", "mount", "user", "cgroup", "time", "bogus",
                ])
                .to_string();
            if t == "bogus" && !rng.chance(20) {
                continue;
            }
            let t = if rng.chance(35) { format!("-{t}") } else { t };
            l.namespaces.push(LinuxNamespace {
                r#type: t,
                path: rng.pick(&["", "/proc/1/ns/x"]).to_string(),
            });
        }
        l.sysctl = map_entries(
            rng,
            &[
                "net.ipv4.ip_forward",
                "kernel.shm_rmid_forced",
                "net.core.somaxconn",
            ],
            3,
        );
        for (k, _) in map_entries(rng, &["eth0", "eth1", "eth2"], 2) {
            l.net_devices.insert(
                k,
                LinuxNetDevice {
                    name: rng.pick(&["", "net9"]).to_string(),
                },
            );
        }
        if rng.chance(20) {
            l.memory_policy = Some(LinuxMemoryPolicy {
                mode: rng.int(0, 7) as i32,
                nodes: rng.pick(&["", "0", "0-1"]).to_string(),
                flags: (0..rng.below(3)).map(|_| rng.int(0, 3) as i32).collect(),
            });
        }
        if rng.chance(60) {
            l.resources = Some(random_resources(rng, false));
        }
        if rng.chance(20) {
            l.rdt = Some(LinuxRdt {
                clos_id: if rng.chance(50) {
                    opt(*rng.pick(&["", "c1", "c2"]))
                } else {
                    None
                },
                schemata: if rng.chance(40) {
                    Some(OptionalRepeatedString {
                        value: (0..rng.below(3)).map(|i| format!("L3:{i}=f")).collect(),
                    })
                } else {
                    None
                },
                enable_monitoring: if rng.chance(40) {
                    opt(rng.chance(50))
                } else {
                    None
                },
                remove: rng.chance(30),
            });
        }
        a.linux = Some(l);
    }
    a
}

fn random_case(i: u64, rng: &mut Rng, base: &Value) -> Case {
    let (blockio, rdt) = classes();
    let options = Options {
        blockio_classes: rng.chance(60).then(|| blockio.clone()),
        rdt_classes: rng.chance(60).then(|| rdt.clone()),
        max_memory: if rng.chance(15) { 1 << 29 } else { 0 },
        cdi: rng.chance(40),
        annotation_filter: rng.chance(25),
    };
    let adjust = random_adjustment(rng, &options);
    let updates = (0..rng.below(3))
        .map(|_| ContainerUpdate {
            container_id: "ctr".into(),
            linux: rng.chance(90).then(|| LinuxContainerUpdate {
                resources: Some(random_resources(rng, true)),
            }),
            ignore_failure: false,
        })
        .collect();
    Case {
        name: format!("random #{i}"),
        spec: base.clone(),
        adjust: Some(adjust),
        updates,
        options,
    }
}

#[test]
fn random_adjustments_match_go() {
    let base = base_spec();
    let mut rng = Rng(0x6e72_692d_6f63_6921);
    let cases: Vec<Case> = (0..400).map(|i| random_case(i, &mut rng, &base)).collect();
    let errors = compare(&cases, |_, _, _| {});
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for e in &errors {
        let kind = e.split(':').next().unwrap_or_default().to_string();
        *kinds.entry(kind).or_default() += 1;
    }
    eprintln!("outcomes of {} random cases: {kinds:?}", cases.len());
    // Most cases must get through every step, or the comparison is shallow.
    let ok = errors.iter().filter(|e| e.is_empty()).count();
    assert!(
        ok * 10 >= cases.len() * 6,
        "only {ok} of {} random cases succeeded: {kinds:?}",
        cases.len()
    );
}
