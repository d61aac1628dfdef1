//! Helpers shared by the fuzz targets under `fuzz_targets/`.
//!
//! * [`run_paused`]: runs a future on a fresh current-thread runtime whose
//!   clock is paused, so every timeout of the code under test fires as soon
//!   as nothing else can make progress, and a deadlock becomes a panic
//!   instead of a stalled fuzzer.
//! * [`ttrpc_frame`]: builds a ttRPC message as it goes on the wire.
//! * [`Json`]: an `arbitrary` JSON value whose object keys come mostly from
//!   the OCI runtime spec, so a fuzzed spec reaches the code that edits it.
//! * [`for_each_message!`]: every message type of `nri-api`.

use std::future::Future;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};

/// Virtual time after which a target run is declared hung.
pub const VIRTUAL_TIME_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Runs `fut` to completion on a new current-thread runtime with a paused
/// clock (timers fire once every task is idle).
///
/// # Panics
///
/// Panics (a fuzzer crash) if `fut` has not finished after
/// [`VIRTUAL_TIME_LIMIT`] of virtual time: with a paused clock that only
/// happens when everything waits on something that never comes.
pub fn run_paused<F: Future>(fut: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime can be built");
    rt.block_on(async {
        match tokio::time::timeout(VIRTUAL_TIME_LIMIT, fut).await {
            Ok(out) => out,
            Err(_) => panic!("hang: no progress within {VIRTUAL_TIME_LIMIT:?} of virtual time"),
        }
    })
}

/// Runs `fut` on a new current-thread runtime with the real clock, failing
/// after `limit` of wall time (for targets that use real sockets, where a
/// paused clock would jump while the kernel still holds data in flight).
///
/// # Panics
///
/// Panics (a fuzzer crash) if `fut` does not finish within `limit`.
pub fn run_real<F: Future>(limit: Duration, fut: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    rt.block_on(async {
        match tokio::time::timeout(limit, fut).await {
            Ok(out) => out,
            Err(_) => panic!("hang: not finished within {limit:?}"),
        }
    })
}

/// One ttRPC message on the wire: 10-byte header, then `payload`.
pub fn ttrpc_frame(stream_id: u32, kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let header = nri_ttrpc::frame::FrameHeader {
        length: u32::try_from(payload.len()).unwrap_or(u32::MAX),
        stream_id,
        kind,
        flags,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(payload);
    out
}

/// Object keys a fuzzed OCI spec is built from (plus arbitrary strings).
const SPEC_KEYS: &[&str] = &[
    "ociVersion",
    "process",
    "env",
    "args",
    "cwd",
    "user",
    "rlimits",
    "type",
    "hard",
    "soft",
    "oomScoreAdj",
    "ioPriority",
    "class",
    "priority",
    "scheduler",
    "policy",
    "nice",
    "flags",
    "root",
    "path",
    "mounts",
    "destination",
    "source",
    "options",
    "hooks",
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
    "annotations",
    "linux",
    "resources",
    "devices",
    "allow",
    "access",
    "major",
    "minor",
    "fileMode",
    "uid",
    "gid",
    "memory",
    "limit",
    "reservation",
    "swap",
    "kernel",
    "kernelTCP",
    "swappiness",
    "disableOOMKiller",
    "useHierarchy",
    "cpu",
    "shares",
    "quota",
    "period",
    "realtimeRuntime",
    "realtimePeriod",
    "cpus",
    "mems",
    "pids",
    "hugepageLimits",
    "pageSize",
    "blockIO",
    "unified",
    "cgroupsPath",
    "namespaces",
    "sysctl",
    "netDevices",
    "name",
    "seccomp",
    "defaultAction",
    "syscalls",
    "names",
    "action",
    "memoryPolicy",
    "mode",
    "nodes",
    "intelRdt",
    "closID",
    "l3CacheSchema",
    "memBwSchema",
    "enableMonitoring",
    "rootfsPropagation",
    "maskedPaths",
    "readonlyPaths",
];

/// An arbitrary JSON value for a fuzzed OCI spec: nesting is bounded and
/// most object keys are OCI spec member names.
#[derive(Debug, Clone)]
pub struct Json(pub serde_json::Value);

impl<'a> Arbitrary<'a> for Json {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Json(json_value(u, 6)?))
    }
}

fn json_value(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<serde_json::Value> {
    use serde_json::Value;
    let pick: u8 = if depth == 0 {
        u.int_in_range(0..=5)?
    } else {
        u.int_in_range(0..=7)?
    };
    Ok(match pick {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Value::from(u.arbitrary::<u64>()?),
        4 => serde_json::Number::from_f64(u.arbitrary::<f64>()?)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        5 => Value::String(json_string(u)?),
        6 => {
            let n = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(json_value(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=6)?;
            let mut map = serde_json::Map::new();
            for _ in 0..n {
                let key = if u.ratio(7, 8)? {
                    (*u.choose(SPEC_KEYS)?).to_string()
                } else {
                    u.arbitrary::<String>()?
                };
                map.insert(key, json_value(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

fn json_string(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    const WORDS: &[&str] = &[
        "",
        "/",
        "/dev/null",
        "c",
        "b",
        "a",
        "rw",
        "rbind",
        "rshared",
        "rslave",
        "ro",
        "A=1",
        "PATH=/bin",
        "-",
        "-A",
        "network",
        "pid",
        "RLIMIT_NOFILE",
        "SCMP_ACT_ERRNO",
    ];
    if u.ratio(1, 2)? {
        Ok((*u.choose(WORDS)?).to_string())
    } else {
        u.arbitrary()
    }
}

/// Calls `$m!(Type)` for every message type of `nri-api`.
#[macro_export]
macro_rules! for_each_message {
    ($m:ident) => {
        $m! {
            RegisterPluginRequest,
            UpdateContainersRequest,
            UpdateContainersResponse,
            LogRequest,
            ConfigureRequest,
            ConfigureResponse,
            FailurePolicy,
            SynchronizeRequest,
            SynchronizeResponse,
            RunPodSandboxRequest,
            RunPodSandboxResponse,
            UpdatePodSandboxRequest,
            UpdatePodSandboxResponse,
            PostUpdatePodSandboxRequest,
            PostUpdatePodSandboxResponse,
            StopPodSandboxRequest,
            StopPodSandboxResponse,
            RemovePodSandboxRequest,
            RemovePodSandboxResponse,
            CreateContainerRequest,
            CreateContainerResponse,
            PostCreateContainerRequest,
            PostCreateContainerResponse,
            StartContainerRequest,
            StartContainerResponse,
            PostStartContainerRequest,
            PostStartContainerResponse,
            UpdateContainerRequest,
            UpdateContainerResponse,
            PostUpdateContainerRequest,
            PostUpdateContainerResponse,
            StopContainerRequest,
            StopContainerResponse,
            RemoveContainerRequest,
            RemoveContainerResponse,
            StateChangeEvent,
            ValidateContainerAdjustmentRequest,
            PluginInstance,
            ValidateContainerAdjustmentResponse,
            Empty,
            PodSandbox,
            LinuxPodSandbox,
            Container,
            Image,
            Mount,
            Hooks,
            Hook,
            LinuxContainer,
            LinuxNamespace,
            LinuxDevice,
            LinuxDeviceCgroup,
            CdiDevice,
            User,
            LinuxResources,
            LinuxMemory,
            LinuxCpu,
            HugepageLimit,
            SecurityProfile,
            PosixRlimit,
            LinuxPids,
            LinuxIoPriority,
            LinuxNetDevice,
            LinuxScheduler,
            ContainerAdjustment,
            LinuxContainerAdjustment,
            LinuxSeccomp,
            LinuxSyscall,
            LinuxSeccompArg,
            LinuxMemoryPolicy,
            ContainerUpdate,
            LinuxContainerUpdate,
            ContainerEviction,
            LinuxRdt,
            KeyValue,
            OptionalString,
            OptionalRepeatedString,
            OptionalInt,
            OptionalInt32,
            OptionalUInt32,
            OptionalInt64,
            OptionalUInt64,
            OptionalBool,
            OptionalFileMode,
            CompoundFieldOwners,
            FieldOwners,
            OwningPlugins
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout() {
        assert_eq!(
            ttrpc_frame(3, 1, 0, b"ab"),
            vec![0, 0, 0, 2, 0, 0, 0, 3, 1, 0, b'a', b'b']
        );
    }
}
