//! Annotation keys, their precedence, and the annotated values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::goyaml::{decode, Shape};
use crate::InjectError;

/// One kind of annotation: its key prefix and the legacy prefix still accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnotationKind {
    /// What the annotation holds, for messages (`"device"`, `"mount"`, ...).
    pub what: &'static str,
    /// Current key prefix, e.g. `devices.noderesource.dev`.
    pub key: &'static str,
    /// Legacy key prefix, e.g. `devices.nri.io`; empty when there is none.
    pub old_key: &'static str,
}

/// Device nodes.
pub const DEVICES: AnnotationKind = AnnotationKind {
    what: "device",
    key: "devices.noderesource.dev",
    old_key: "devices.nri.io",
};
/// Mounts.
pub const MOUNTS: AnnotationKind = AnnotationKind {
    what: "mount",
    key: "mounts.noderesource.dev",
    old_key: "mounts.nri.io",
};
/// CDI devices.
pub const CDI_DEVICES: AnnotationKind = AnnotationKind {
    what: "CDI device",
    key: "cdi-devices.noderesource.dev",
    old_key: "cdi-devices.nri.io",
};
/// I/O priority.
pub const IO_PRIORITY: AnnotationKind = AnnotationKind {
    what: "I/O priority",
    key: "io-priority.noderesource.dev",
    old_key: "io-priority.nri.io",
};
/// Network devices.
pub const NET_DEVICES: AnnotationKind = AnnotationKind {
    what: "net device",
    key: "network-devices.noderesource.dev",
    old_key: "network-devices.nri.io",
};
/// Scheduling attributes.
pub const SCHEDULER: AnnotationKind = AnnotationKind {
    what: "scheduler",
    key: "scheduling-policy.noderesource.dev",
    old_key: "scheduling-policy.nri.io",
};
/// Sysctl settings (no legacy key).
pub const SYSCTL: AnnotationKind = AnnotationKind {
    what: "sysctl",
    key: "sysctl.noderesource.dev",
    old_key: "",
};
/// Memory policy.
pub const MEMORY_POLICY: AnnotationKind = AnnotationKind {
    what: "memory policy",
    key: "memory-policy.noderesource.dev",
    old_key: "memory-policy.nri.io",
};

/// The annotation of `kind` that applies to container `ctr`, most specific first:
/// `<key>/container.<ctr>`, `<old>/container.<ctr>`, `<key>/pod`, `<old>/pod`,
/// `<key>`, `<old>`.
///
/// ```
/// use std::collections::BTreeMap;
/// use nri_plugin_device_injector::annotations::{lookup, DEVICES};
///
/// let mut annotations = BTreeMap::new();
/// annotations.insert("devices.nri.io/container.c0".to_string(), "old".to_string());
/// annotations.insert("devices.noderesource.dev/pod".to_string(), "pod".to_string());
/// assert_eq!(lookup(&annotations, DEVICES, "c0"), Some("old"));
/// assert_eq!(lookup(&annotations, DEVICES, "c1"), Some("pod"));
/// ```
pub fn lookup<'a>(
    annotations: &'a BTreeMap<String, String>,
    kind: AnnotationKind,
    ctr: &str,
) -> Option<&'a str> {
    let candidates = [
        (kind.key, Some(ctr)),
        (kind.old_key, Some(ctr)),
        (kind.key, None),
        (kind.old_key, None),
    ];
    for (prefix, ctr) in candidates {
        if prefix.is_empty() {
            continue;
        }
        let key = match ctr {
            Some(name) => format!("{prefix}/container.{name}"),
            None => format!("{prefix}/pod"),
        };
        if let Some(value) = annotations.get(&key) {
            return Some(value);
        }
    }
    [kind.key, kind.old_key]
        .into_iter()
        .filter(|k| !k.is_empty())
        .find_map(|k| annotations.get(k).map(String::as_str))
}

/// An annotated device node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Device {
    /// Path in the container.
    pub path: String,
    /// `c` or `b` (or `p`, `u`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Major number.
    pub major: i64,
    /// Minor number.
    pub minor: i64,
    /// Permission bits; 0 leaves the runtime default.
    pub file_mode: u32,
    /// Owner; 0 leaves the runtime default.
    pub uid: u32,
    /// Group; 0 leaves the runtime default.
    pub gid: u32,
}

static DEVICE_SHAPE: Shape = Shape::Struct(&[
    ("path", Shape::Str),
    ("type", Shape::Str),
    ("major", Shape::Scalar),
    ("minor", Shape::Scalar),
    ("file_mode", Shape::Scalar),
    ("uid", Shape::Scalar),
    ("gid", Shape::Scalar),
]);

/// An annotated mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Mount {
    /// Host path (or mount source).
    pub source: String,
    /// Path in the container.
    pub destination: String,
    /// Mount type, e.g. `bind`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Mount options.
    pub options: Vec<String>,
}

static MOUNT_SHAPE: Shape = Shape::Struct(&[
    ("source", Shape::Str),
    ("destination", Shape::Str),
    ("type", Shape::Str),
    ("options", Shape::List(&Shape::Str)),
]);

/// An annotated I/O priority.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct IoPriority {
    /// `IOPRIO_CLASS_NONE`, `IOPRIO_CLASS_RT`, `IOPRIO_CLASS_BE` or `IOPRIO_CLASS_IDLE`.
    pub class: String,
    /// Priority within the class.
    pub priority: i32,
}

static IO_PRIORITY_SHAPE: Shape =
    Shape::Struct(&[("class", Shape::Str), ("priority", Shape::Scalar)]);

/// An annotated network device: a host interface and its name in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct NetDevice {
    /// Host interface name.
    #[serde(rename = "hostIf")]
    pub host_if: String,
    /// Interface name in the container.
    pub name: String,
}

static NET_DEVICE_SHAPE: Shape = Shape::Struct(&[("hostIf", Shape::Str), ("name", Shape::Str)]);

/// Annotated scheduling attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Scheduler {
    /// Policy name, e.g. `SCHED_FIFO`.
    pub policy: String,
    /// Nice value.
    pub nice: i32,
    /// Static priority.
    pub priority: i32,
    /// Flag names, e.g. `SCHED_FLAG_RESET_ON_FORK`.
    pub flags: Vec<String>,
    /// SCHED_DEADLINE runtime (ns).
    pub runtime: u64,
    /// SCHED_DEADLINE deadline (ns).
    pub deadline: u64,
    /// SCHED_DEADLINE period (ns).
    pub period: u64,
}

static SCHEDULER_SHAPE: Shape = Shape::Struct(&[
    ("policy", Shape::Str),
    ("nice", Shape::Scalar),
    ("priority", Shape::Scalar),
    ("flags", Shape::List(&Shape::Str)),
    ("runtime", Shape::Scalar),
    ("deadline", Shape::Scalar),
    ("period", Shape::Scalar),
]);

/// An annotated memory policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct MemoryPolicy {
    /// Mode name, e.g. `MPOL_INTERLEAVE`.
    pub mode: String,
    /// NUMA nodes, e.g. `"0-1,3"`.
    pub nodes: String,
    /// Flag names, e.g. `MPOL_F_STATIC_NODES`.
    pub flags: Vec<String>,
}

static MEMORY_POLICY_SHAPE: Shape = Shape::Struct(&[
    ("mode", Shape::Str),
    ("nodes", Shape::Str),
    ("flags", Shape::List(&Shape::Str)),
]);

static DEVICES_SHAPE: Shape = Shape::List(&DEVICE_SHAPE);
static MOUNTS_SHAPE: Shape = Shape::List(&MOUNT_SHAPE);
static CDI_SHAPE: Shape = Shape::List(&Shape::Str);
static NET_DEVICES_SHAPE: Shape = Shape::List(&NET_DEVICE_SHAPE);
static SYSCTL_SHAPE: Shape = Shape::Map(&Shape::Str);

/// Everything annotated for one container. `None`/empty: not annotated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotated {
    /// Device nodes to add.
    pub devices: Vec<Device>,
    /// CDI device names to add.
    pub cdi_devices: Vec<String>,
    /// Mounts to add.
    pub mounts: Vec<Mount>,
    /// I/O priority to set.
    pub io_priority: Option<IoPriority>,
    /// Scheduling attributes to set.
    pub scheduler: Option<Scheduler>,
    /// Network devices to move in.
    pub net_devices: Vec<NetDevice>,
    /// Sysctls to set.
    pub sysctl: BTreeMap<String, String>,
    /// Memory policy to set.
    pub memory_policy: Option<MemoryPolicy>,
}

impl Annotated {
    /// Reads the annotations of a pod for its container `ctr`. The first malformed
    /// annotation (in the order of the Go plugin) is an error.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use nri_plugin_device_injector::annotations::Annotated;
    ///
    /// let mut pod = BTreeMap::new();
    /// pod.insert(
    ///     "devices.noderesource.dev/container.c0".to_string(),
    ///     "- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3".to_string(),
    /// );
    /// let a = Annotated::parse(&pod, "c0").unwrap();
    /// assert_eq!(a.devices[0].path, "/dev/nri-null");
    /// assert!(Annotated::parse(&pod, "c1").unwrap().devices.is_empty());
    /// ```
    pub fn parse(annotations: &BTreeMap<String, String>, ctr: &str) -> Result<Self, InjectError> {
        Ok(Annotated {
            devices: parse_value(annotations, DEVICES, ctr, &DEVICES_SHAPE)?.unwrap_or_default(),
            cdi_devices: parse_value(annotations, CDI_DEVICES, ctr, &CDI_SHAPE)?
                .unwrap_or_default(),
            mounts: parse_value(annotations, MOUNTS, ctr, &MOUNTS_SHAPE)?.unwrap_or_default(),
            io_priority: parse_value(annotations, IO_PRIORITY, ctr, &IO_PRIORITY_SHAPE)?,
            scheduler: parse_value(annotations, SCHEDULER, ctr, &SCHEDULER_SHAPE)?,
            net_devices: parse_value(annotations, NET_DEVICES, ctr, &NET_DEVICES_SHAPE)?
                .unwrap_or_default(),
            sysctl: parse_value(annotations, SYSCTL, ctr, &SYSCTL_SHAPE)?.unwrap_or_default(),
            memory_policy: parse_value(annotations, MEMORY_POLICY, ctr, &MEMORY_POLICY_SHAPE)?,
        })
    }
}

/// Decodes the annotation of `kind` for `ctr`, if there is one.
fn parse_value<T>(
    annotations: &BTreeMap<String, String>,
    kind: AnnotationKind,
    ctr: &str,
    shape: &Shape,
) -> Result<Option<T>, InjectError>
where
    T: serde::de::DeserializeOwned + Default,
{
    let Some(value) = lookup(annotations, kind, ctr) else {
        return Ok(None);
    };
    decode(value, shape)
        .map(Some)
        .map_err(|reason| InjectError::Annotation {
            what: kind.what,
            value: value.to_string(),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_interop::plugin_tests::annotations;

    const NULL_DEV: &str = "- path: /dev/test-null\n  type: c\n  major: 1\n  minor: 3";
    const ZERO_DEV: &str = "- path: /dev/test-zero\n  type: c\n  major: 1\n  minor: 5";

    fn device_paths(a: &BTreeMap<String, String>, ctr: &str) -> Vec<String> {
        Annotated::parse(a, ctr)
            .unwrap()
            .devices
            .into_iter()
            .map(|d| d.path)
            .collect()
    }

    #[test]
    fn precedence_of_keys() {
        let order = [
            "devices.noderesource.dev/container.ctr0",
            "devices.nri.io/container.ctr0",
            "devices.noderesource.dev/pod",
            "devices.nri.io/pod",
            "devices.noderesource.dev",
            "devices.nri.io",
        ];
        // With keys i..n present, key i wins.
        for winner in 0..order.len() {
            let mut a = BTreeMap::new();
            for (i, key) in order.iter().enumerate().skip(winner) {
                let path = format!("- path: /dev/k{i}");
                a.insert(key.to_string(), path);
            }
            assert_eq!(
                device_paths(&a, "ctr0"),
                [format!("/dev/k{winner}")],
                "{a:?}"
            );
        }
    }

    #[test]
    fn container_keys_do_not_leak_to_other_containers() {
        let a = annotations(&[("devices.noderesource.dev/container.ctr1", NULL_DEV)]);
        assert!(device_paths(&a, "ctr0").is_empty());
        assert_eq!(device_paths(&a, "ctr1"), ["/dev/test-null"]);
    }

    #[test]
    fn new_key_preferred_for_equal_specificity() {
        let a = annotations(&[
            ("devices.noderesource.dev/container.ctr0", NULL_DEV),
            ("devices.nri.io/container.ctr0", ZERO_DEV),
        ]);
        assert_eq!(device_paths(&a, "ctr0"), ["/dev/test-null"]);
    }

    #[test]
    fn sysctl_has_no_legacy_key() {
        let a = annotations(&[("sysctl.nri.io/pod", "a: b")]);
        assert!(Annotated::parse(&a, "c").unwrap().sysctl.is_empty());
        let a = annotations(&[("sysctl.noderesource.dev", "net.core.somaxconn: 256")]);
        let sysctl = Annotated::parse(&a, "c").unwrap().sysctl;
        assert_eq!(sysctl["net.core.somaxconn"], "256");
    }

    #[test]
    fn all_kinds_parse() {
        let a = annotations(&[
            (
                "devices.noderesource.dev/pod",
                "- {path: /dev/d, type: b, major: 8, minor: 1, file_mode: 0640, uid: 1, gid: 2}",
            ),
            (
                "cdi-devices.nri.io/container.c",
                "- vendor.com/dev=a\n- vendor.com/dev=b",
            ),
            (
                "mounts.noderesource.dev/container.c",
                "- source: /home\n  destination: /h\n  type: bind\n  options: [bind, ro]",
            ),
            (
                "io-priority.noderesource.dev",
                "class: IOPRIO_CLASS_RT\npriority: 3",
            ),
            (
                "scheduling-policy.nri.io/pod",
                "policy: SCHED_FIFO\npriority: 5\nflags: [SCHED_FLAG_RESET_ON_FORK]",
            ),
            (
                "network-devices.noderesource.dev/container.c",
                "- hostIf: ens2.100\n  Name: netdev0",
            ),
            (
                "memory-policy.noderesource.dev/container.c",
                "mode: MPOL_INTERLEAVE\nnodes: \"0,1\"\nflags: [MPOL_F_STATIC_NODES]",
            ),
        ]);
        let got = Annotated::parse(&a, "c").unwrap();
        assert_eq!(
            got.devices,
            [Device {
                path: "/dev/d".into(),
                kind: "b".into(),
                major: 8,
                minor: 1,
                file_mode: 0o640,
                uid: 1,
                gid: 2
            }]
        );
        assert_eq!(got.cdi_devices, ["vendor.com/dev=a", "vendor.com/dev=b"]);
        assert_eq!(got.mounts[0].options, ["bind", "ro"]);
        assert_eq!(got.mounts[0].kind, "bind");
        assert_eq!(
            got.io_priority,
            Some(IoPriority {
                class: "IOPRIO_CLASS_RT".into(),
                priority: 3
            })
        );
        let sched = got.scheduler.unwrap();
        assert_eq!((sched.policy.as_str(), sched.priority), ("SCHED_FIFO", 5));
        assert_eq!(
            got.net_devices,
            [NetDevice {
                host_if: "ens2.100".into(),
                name: "netdev0".into()
            }]
        );
        let pol = got.memory_policy.unwrap();
        assert_eq!(
            (pol.mode.as_str(), pol.nodes.as_str()),
            ("MPOL_INTERLEAVE", "0,1")
        );
    }

    #[test]
    fn malformed_annotation_is_an_error_naming_it() {
        let a = annotations(&[("mounts.noderesource.dev/pod", "source: /x")]);
        let err = Annotated::parse(&a, "c").unwrap_err().to_string();
        assert!(
            err.starts_with("invalid mount annotation \"source: /x\": "),
            "{err}"
        );
    }

    /// A device annotation as `sigs.k8s.io/yaml` v1.5.0 decodes it into the Go
    /// plugin's `device` struct (same field types and JSON tags): `Ok` with
    /// `(path, type, major, minor, file_mode, uid, gid)`, or `Err` when Go's
    /// decoding refused it, with the end of our error. Recorded by running that
    /// decoding in Go.
    type GoResult = Result<(&'static str, &'static str, i64, i64, u32, u32, u32), &'static str>;

    const GO_DEVICE_VECTORS: &[(&str, GoResult)] = &[
        (
            "{path: /d, file_mode: !!str 0644}",
            Err(r#"field file_mode: invalid type: string "0644", expected a number"#),
        ),
        // Plain numbers follow YAML 1.1.
        (
            "{path: /d, major: 1, minor: 2, file_mode: 0644, uid: 5, gid: 5}",
            Ok(("/d", "", 1, 2, 0o644, 5, 5)),
        ),
        (
            "{path: /d, file_mode: 0o644}",
            Ok(("/d", "", 0, 0, 420, 0, 0)),
        ),
        (
            "{path: /d, file_mode: 0x1A4}",
            Ok(("/d", "", 0, 0, 420, 0, 0)),
        ),
        (
            "{path: /d, major: 1_0, minor: 0b101}",
            Ok(("/d", "", 10, 5, 0, 0, 0)),
        ),
        (
            "{path: /d, major: 0x1F, minor: 0o17}",
            Ok(("/d", "", 31, 15, 0, 0, 0)),
        ),
        ("{path: /d, major: 1e3}", Ok(("/d", "", 1000, 0, 0, 0, 0))),
        ("{path: /d, major: -0b11}", Ok(("/d", "", -3, 0, 0, 0, 0))),
        ("{path: /d, major: 09}", Ok(("/d", "", 9, 0, 0, 0, 0))),
        (
            "{path: /d, file_mode: 0644.0}",
            Ok(("/d", "", 0, 0, 644, 0, 0)),
        ),
        (
            r#"{path: /d, file_mode: !!int "0644"}"#,
            Ok(("/d", "", 0, 0, 420, 0, 0)),
        ),
        (
            "{path: /d, file_mode: 0644, major: ~, minor: null}",
            Ok(("/d", "", 0, 0, 420, 0, 0)),
        ),
        // Plain numbers given for strings are their decimal text.
        ("{path: 0644, type: 010}", Ok(("420", "8", 0, 0, 0, 0, 0))),
        (
            r#"{path: "0644", type: "c"}"#,
            Ok(("0644", "c", 0, 0, 0, 0, 0)),
        ),
        // Other type and range errors.
        (
            "{path: /d, major: yes}",
            Err("invalid type: boolean `true`, expected i64"),
        ),
        (
            "{path: /d, major: .5}",
            Err("invalid type: floating point `0.5`, expected i64"),
        ),
        (
            "{path: /d, uid: -1}",
            Err("invalid value: integer `-1`, expected u32"),
        ),
        (
            "{path: /d, file_mode: 0777777777777}",
            Err("invalid value: integer `68719476735`, expected u32"),
        ),
    ];

    /// Quoted numbers are strings, which Go refuses for every numeric field:
    /// `(field, value as written, its text)`.
    const GO_REFUSES_QUOTED: &[(&str, &str, &str)] = &[
        ("major", r#""1""#, "1"),
        ("minor", r#""2""#, "2"),
        ("file_mode", r#""0644""#, "0644"),
        ("uid", r#""5""#, "5"),
        ("gid", r#""5""#, "5"),
        ("major", "'1'", "1"),
        ("file_mode", "'0644'", "0644"),
        ("file_mode", r#""0o644""#, "0o644"),
        ("major", r#""1_0""#, "1_0"),
        ("major", r#""0b101""#, "0b101"),
        ("major", r#""0x1F""#, "0x1F"),
        ("major", r#""1e3""#, "1e3"),
        ("major", r#""-1""#, "-1"),
    ];

    #[test]
    fn quoted_device_numbers_are_refused_as_in_the_go_plugin() {
        for (field, written, text) in GO_REFUSES_QUOTED {
            let value = format!("- {{path: /d, {field}: {written}}}");
            let a = annotations(&[("devices.noderesource.dev/pod", value.as_str())]);
            let err = Annotated::parse(&a, "c").unwrap_err().to_string();
            let want = format!("field {field}: invalid type: string {text:?}, expected a number");
            assert!(err.ends_with(&want), "{value}: {err}");
        }
    }

    #[test]
    fn device_numbers_decode_as_in_the_go_plugin() {
        for (yaml, want) in GO_DEVICE_VECTORS {
            let value = format!("- {yaml}");
            let a = annotations(&[("devices.noderesource.dev/pod", value.as_str())]);
            let got = Annotated::parse(&a, "c");
            match (want, got) {
                (Ok((path, kind, major, minor, file_mode, uid, gid)), Ok(got)) => {
                    let want = Device {
                        path: path.to_string(),
                        kind: kind.to_string(),
                        major: *major,
                        minor: *minor,
                        file_mode: *file_mode,
                        uid: *uid,
                        gid: *gid,
                    };
                    assert_eq!(got.devices, [want], "{yaml}");
                }
                (Err(reason), Err(err)) => {
                    let err = err.to_string();
                    assert!(
                        err.starts_with("invalid device annotation") && err.ends_with(reason),
                        "{yaml}: {err}"
                    );
                }
                (want, got) => panic!("{yaml}: Go gives {want:?}, we give {got:?}"),
            }
        }
    }
}
