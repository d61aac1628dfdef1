//! Compatibility with the reference Go types.
//!
//! The fixtures under `tests/fixtures/` were written by `fixtures/gen` with
//! the reference Go package: `*.json` by Go's `encoding/json`, `*.pb.hex` by
//! deterministic protobuf marshalling. These tests check that our types read
//! both forms into the same value, encode to the same protobuf bytes, write
//! the same JSON, and that our adjustment builders produce exactly what the
//! Go helpers produce.

use nri_api::{
    opt, ConfigureResponse, ContainerAdjustment, Hook, Hooks, IoPrioClass, LinuxDevice,
    LinuxIoPriority, LinuxNamespace, LinuxNetDevice, LinuxScheduler, LinuxSchedulerFlag,
    LinuxSchedulerPolicy, LinuxSeccomp, LinuxSeccompArg, LinuxSyscall, Mount, MpolFlag, MpolMode,
    RegisterPluginRequest, ValidateContainerAdjustmentRequest,
};
use prost::Message;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn hex_decode(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Go writes a nil message (e.g. a removed net device) as `null`; we write an
/// empty message. Both decode to the same value; align them for comparison.
fn nulls_to_empty(v: &mut Value) {
    match v {
        Value::Null => *v = Value::Object(Default::default()),
        Value::Array(items) => items.iter_mut().for_each(nulls_to_empty),
        Value::Object(map) => map.values_mut().for_each(nulls_to_empty),
        _ => {}
    }
}

/// Decodes both Go forms, checks they agree, re-encodes both ways and
/// compares with Go's output. Returns the decoded value.
///
/// `exact_bytes`: whether our protobuf encoding must equal Go's byte for
/// byte. It does, except that Go writes the value field of a map entry even
/// when it is empty (`"key": ""` or a nil message) and prost leaves it out;
/// both decode to the same map. For such messages the encoding is checked
/// by decoding it again.
fn check_round_trip<M>(name: &str, exact_bytes: bool) -> M
where
    M: Message + Default + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let go_json = fixture(&format!("{name}.json"));
    let go_pb = hex_decode(&fixture(&format!("{name}.pb.hex")));

    let from_json: M = serde_json::from_str(&go_json).unwrap();
    let from_pb = M::decode(go_pb.as_slice()).unwrap();
    assert_eq!(from_json, from_pb, "{name}: JSON and protobuf disagree");

    let ours = from_pb.encode_to_vec();
    if exact_bytes {
        assert_eq!(ours, go_pb, "{name}: protobuf bytes differ");
    } else {
        assert_eq!(
            M::decode(ours.as_slice()).unwrap(),
            from_pb,
            "{name}: re-decode differs"
        );
    }

    let mut want: Value = serde_json::from_str(&go_json).unwrap();
    nulls_to_empty(&mut want);
    let have = serde_json::to_value(&from_pb).unwrap();
    assert_eq!(have, want, "{name}: JSON differs");
    from_pb
}

#[test]
fn register_request_matches_go() {
    let req: RegisterPluginRequest = check_round_trip("go-register-request", true);
    assert_eq!(req.nri_version, "v0.12.5");
    assert!(fixture("go-register-request.json").contains("\"NRI_version\""));
}

#[test]
fn configure_response_matches_go() {
    let resp: ConfigureResponse = check_round_trip("go-configure-response", true);
    assert_eq!(resp.events, 0x208);
    assert!(resp.failure_policy.unwrap().fail_request);
}

#[test]
fn validate_request_matches_go() {
    let req: ValidateContainerAdjustmentRequest = check_round_trip("go-validate-request", false);
    let ctr = req.container.as_ref().unwrap();
    assert_eq!(ctr.pod_sandbox_id, "pod");
    assert_eq!(ctr.cdi_devices[0].name, "v/d=1");
    let owners = &req.owners.as_ref().unwrap().owners["ctr"];
    assert_eq!(owners.simple[&8], "10-a");
    assert_eq!(owners.compound[&1].owners["k"], "10-a");
    // Zero-valued wrappers are present, not absent.
    assert_eq!(ctr.linux.as_ref().unwrap().oom_score_adj.unwrap().value, 0);
}

#[test]
fn container_matches_go_byte_for_byte() {
    let c: nri_api::Container = check_round_trip("go-container", true);
    assert_eq!(c.labels.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(c.exit_code, -1);
    assert_eq!(c.user.unwrap().additional_gids, [4, 24]);
}

#[test]
fn owners_with_integer_keys_match_go_byte_for_byte() {
    let o: nri_api::OwningPlugins = check_round_trip("go-owners", true);
    let simple = &o.owners["ctr"].simple;
    assert_eq!(simple.keys().copied().collect::<Vec<_>>(), [8, 21]);
}

#[test]
fn adjustment_matches_go_and_go_builders() {
    let go: ContainerAdjustment = check_round_trip("go-adjustment", false);

    let mut a = ContainerAdjustment::default();
    a.add_annotation("example.com/a", "1")
        .remove_annotation("example.com/b")
        .add_mount(Mount {
            destination: "/data".into(),
            r#type: "bind".into(),
            source: "/srv".into(),
            options: vec!["rbind".into(), "ro".into()],
        })
        .remove_mount("/tmp")
        .add_env("A", "1")
        .remove_env("B")
        .update_args(&["sleep", "1"])
        .add_hooks(&Hooks {
            prestart: vec![Hook {
                path: "/bin/hook".into(),
                args: vec!["x".into()],
                env: vec![],
                timeout: opt(5),
            }],
            ..Default::default()
        })
        .add_rlimit("RLIMIT_NOFILE", 1024, 512)
        .add_device(LinuxDevice {
            path: "/dev/x".into(),
            r#type: "c".into(),
            major: 1,
            minor: 3,
            file_mode: opt(0o644),
            uid: opt(0),
            gid: opt(5),
        })
        .remove_device("/dev/y")
        .add_cdi_device("vendor.com/gpu=0")
        .add_or_replace_namespace(LinuxNamespace {
            r#type: "network".into(),
            path: "/proc/1/ns/net".into(),
        })
        .remove_namespace("ipc")
        .add_linux_net_device(
            "eth1",
            LinuxNetDevice {
                name: "net0".into(),
            },
        )
        .remove_linux_net_device("eth2")
        .set_linux_memory_policy(MpolMode::MpolBind, "0-1", &[MpolFlag::MpolFStaticNodes])
        .set_linux_memory_limit(1 << 30)
        .set_linux_memory_reservation(1 << 29)
        .set_linux_memory_swap(1 << 31)
        .set_linux_memory_kernel(1)
        .set_linux_memory_kernel_tcp(2)
        .set_linux_memory_swappiness(60)
        .set_linux_memory_disable_oom_killer()
        .set_linux_memory_use_hierarchy()
        .set_linux_cpu_shares(512)
        .set_linux_cpu_quota(-1)
        .set_linux_cpu_period(100_000)
        .set_linux_cpu_realtime_runtime(3)
        .set_linux_cpu_realtime_period(4)
        .set_linux_cpuset_cpus("0-3")
        .set_linux_cpuset_mems("0")
        .set_linux_pid_limits(-1)
        .add_linux_hugepage_limit("2MB", 4096)
        .set_linux_blockio_class("slow")
        .set_linux_rdt_class("gold")
        .set_linux_rdt_clos_id("c1")
        .set_linux_rdt_schemata(&["L3:0=ff"])
        .set_linux_rdt_enable_monitoring(true)
        .add_linux_unified("memory.high", "1G")
        .set_linux_cgroups_path("/kubepods/x")
        .set_linux_oom_score_adj(Some(-500))
        .set_linux_io_priority(LinuxIoPriority {
            class: IoPrioClass::IoprioClassBe as i32,
            priority: 4,
        })
        .set_linux_seccomp_policy(LinuxSeccomp {
            default_action: "SCMP_ACT_ERRNO".into(),
            default_errno: opt(1),
            syscalls: vec![LinuxSyscall {
                names: vec!["mkdir".into()],
                action: "SCMP_ACT_ALLOW".into(),
                errno_ret: None,
                args: vec![LinuxSeccompArg {
                    index: 1,
                    value: 2,
                    value_two: 3,
                    op: "SCMP_CMP_EQ".into(),
                }],
            }],
            ..Default::default()
        })
        .set_linux_sysctl("net.ipv4.ip_forward", "1")
        .set_linux_scheduler(LinuxScheduler {
            policy: LinuxSchedulerPolicy::SchedFifo as i32,
            priority: 10,
            flags: vec![
                LinuxSchedulerFlag::SchedFlagResetOnFork as i32,
                LinuxSchedulerFlag::SchedFlagReclaim as i32,
            ],
            ..Default::default()
        });

    assert_eq!(a, go);
    assert_eq!(a.encoded_len(), go.encoded_len());
}

#[test]
fn json_null_reads_as_default() {
    let json = r#"{"args":null,"annotations":null,"linux":{"net_devices":{"-x":null},"resources":null},"hooks":null}"#;
    let a: ContainerAdjustment = serde_json::from_str(json).unwrap();
    let linux = a.linux.unwrap();
    assert!(a.args.is_empty() && a.annotations.is_empty() && a.hooks.is_none());
    assert_eq!(linux.net_devices["-x"], LinuxNetDevice::default());
    assert!(linux.resources.is_none());
}

#[test]
fn unknown_json_fields_are_ignored_and_missing_ones_defaulted() {
    let c: nri_api::Container =
        serde_json::from_str(r#"{"id":"c1","future_field":{"x":1},"state":3}"#).unwrap();
    assert_eq!(c.id, "c1");
    assert_eq!(c.state, nri_api::ContainerState::ContainerRunning as i32);
    assert!(c.labels.is_empty());
}

#[test]
fn zero_values_are_omitted_like_omitempty() {
    assert_eq!(
        serde_json::to_string(&nri_api::Container::default()).unwrap(),
        "{}"
    );
    let mut c = nri_api::Container {
        pid: 0,
        exit_code: 0,
        ..Default::default()
    };
    c.linux = Some(Default::default());
    assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"linux":{}}"#);
}

#[test]
fn enums_serialize_as_numbers() {
    let json = serde_json::to_string(&nri_api::Event::StopContainer).unwrap();
    assert_eq!(json, "10");
    let e: nri_api::Event = serde_json::from_str("4").unwrap();
    assert_eq!(e, nri_api::Event::CreateContainer);
    assert!(serde_json::from_str::<nri_api::Event>("99").is_err());
}
