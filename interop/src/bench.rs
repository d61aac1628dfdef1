//! What the adaptation benchmark sends and gets back, shared by the bench
//! runtime (`nri-rs-adaptation-bench`) and the bench itself, which needs the
//! byte counts for its raw-chain baseline.
//!
//! ```
//! use nri_interop::bench::{create_request, create_trunk_bytes, test_plugin_reply};
//!
//! let (out, back) = create_trunk_bytes(&create_request(1), &test_plugin_reply(0));
//! assert!(out > back && back > 30, "{out} {back}");
//! ```

use nri_api::service::{plugin, PLUGIN_SERVICE};
use nri_api::{
    Container, ContainerAdjustment, ContainerState, CreateContainerRequest,
    CreateContainerResponse, PodSandbox,
};
use nri_mux::HEADER_LEN as MUX_HEADER_LEN;
use nri_ttrpc::frame::HEADER_LEN as TTRPC_HEADER_LEN;
use nri_ttrpc::proto;
use prost::Message;
use serde::{Deserialize, Serialize};

/// The pod of every bench request (`pod0`); the Go bench programs send
/// the same one.
pub fn bench_pod() -> PodSandbox {
    PodSandbox {
        id: "pod0".into(),
        name: "pod0".into(),
        uid: "uid0".into(),
        namespace: "default".into(),
        ..Default::default()
    }
}

/// The CreateContainer request of call `i`; the Go bench runtime sends the
/// same one.
pub fn create_request(i: i64) -> CreateContainerRequest {
    let id = format!("ctr{i}");
    CreateContainerRequest {
        pod: Some(bench_pod()),
        container: Some(Container {
            id: id.clone(),
            pod_sandbox_id: "pod0".into(),
            name: id,
            state: ContainerState::ContainerCreated as i32,
            args: vec!["sleep".into(), "3600".into()],
            env: vec!["PATH=/usr/bin:/bin".into()],
            ..Default::default()
        }),
    }
}

/// The reply of test plugin `i` in the bench: one annotation and one
/// environment variable of its own.
pub fn test_plugin_reply(i: usize) -> CreateContainerResponse {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation(format!("bench.nri.io/plugin-{i}"), "on");
    adjust.add_env(format!("BENCH_PLUGIN_{i}"), "on");
    CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    }
}

/// The reply of the minimal plugin named `bench<i>`: one annotation.
pub fn min_plugin_reply(i: usize) -> CreateContainerResponse {
    let mut adjust = ContainerAdjustment::default();
    adjust.add_annotation(format!("bench.nri.io/plugin-bench{i}"), "on");
    CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    }
}

/// The CreateContainer request each plugin of a chain gets from a runtime:
/// `first` for the first plugin, then for each next one `first` with the
/// earlier plugins' `replies` applied in order, as the adaptation merges
/// them (every plugin sees the changes of those before it).
///
/// ```
/// use nri_interop::bench::{chain_requests, create_request, min_plugin_reply};
///
/// let replies: Vec<_> = (0..3).map(min_plugin_reply).collect();
/// let requests = chain_requests(create_request(1), &replies).unwrap();
/// let seen = |r: &nri_api::CreateContainerRequest| r.container.as_ref().unwrap().annotations.len();
/// assert_eq!(requests.iter().map(seen).collect::<Vec<_>>(), [0, 1, 2]);
/// ```
pub fn chain_requests(
    first: CreateContainerRequest,
    replies: &[CreateContainerResponse],
) -> Result<Vec<CreateContainerRequest>, String> {
    let mut result = nri_adaptation::CreateResult::new(first);
    let mut requests = Vec::with_capacity(replies.len());
    for (i, reply) in replies.iter().enumerate() {
        requests.push(result.request().clone());
        result
            .apply(&format!("{i:02}-bench{i}"), reply.clone())
            .map_err(|e| format!("reply of plugin {i}: {e}"))?;
    }
    Ok(requests)
}

/// The ttRPC envelope of a CreateContainer call to a plugin, as the bench
/// runtimes send it (a 2 s timeout, no metadata).
///
/// ```
/// use nri_interop::bench::{create_envelope, create_request};
///
/// let envelope = create_envelope(&create_request(1));
/// assert_eq!(envelope.method, "CreateContainer");
/// ```
pub fn create_envelope(request: &CreateContainerRequest) -> proto::Request {
    proto::Request {
        service: PLUGIN_SERVICE.into(),
        method: plugin::CREATE_CONTAINER.into(),
        payload: request.encode_to_vec(),
        timeout_nano: 2_000_000_000,
        metadata: Vec::new(),
    }
}

/// The bytes one plugin's CreateContainer call puts on the trunk: the
/// request out and the reply back, each with its mux and ttRPC headers.
pub fn create_trunk_bytes(
    request: &CreateContainerRequest,
    reply: &CreateContainerResponse,
) -> (usize, usize) {
    let req = create_envelope(request);
    let resp = proto::Response {
        status: Some(proto::Status::default()),
        payload: reply.encode_to_vec(),
    };
    (
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + req.encoded_len(),
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + resp.encoded_len(),
    )
}

/// Median and 99th percentile of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub median_us: f64,
    pub p99_us: f64,
}

/// Lifecycle latencies of one window of the load mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_s: u64,
    pub count: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The JSON report of one run of either bench runtime (`nri-rs-adaptation-bench`
/// writes it, the Go `nri-adaptation-bench` the same fields; the bench reads
/// both). A field a mode does not measure stays empty. Times are in µs,
/// memory in KiB; `*_samples_us` hold every sample of the summary of the
/// same name, in the order measured, so that runs can be pooled.
///
/// ```
/// let report: nri_interop::bench::Report =
///     serde_json::from_str(r#"{"create": {"median_us": 3, "p99_us": 9}, "iterations": 5}"#).unwrap();
/// assert_eq!(report.create.map(|c| c.p99_us), Some(9.0));
/// ```
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    pub mode: String,
    /// CreateContainer through the plugins (mode wasm: through the module).
    pub create: Option<Latency>,
    /// Plugin process start to its completed Synchronize, by our runtime.
    pub registration: Option<Latency>,
    pub registration_samples_us: Vec<f64>,
    /// Plugin process start to its connection to a socket nothing serves.
    pub plugin_connect: Option<Latency>,
    pub plugin_connect_samples_us: Vec<f64>,
    /// Plugin process start to its Synchronize reply, registered by a
    /// scripted runtime that sends frames encoded in advance.
    pub plugin_scripted: Option<Latency>,
    pub plugin_scripted_samples_us: Vec<f64>,
    /// CreateContainer through the same plugins from a scripted runtime
    /// (requests encoded in advance, replies not decoded): blocking, on the
    /// event loop, and polling as long as our runtime.
    pub scripted_chain: Option<Latency>,
    pub event_loop_chain: Option<Latency>,
    pub polling_chain: Option<Latency>,
    /// CPU time of the runtime process (and of the plugins) per call of
    /// those chains.
    pub scripted_runtime_cpu_us_per_call: Option<f64>,
    pub scripted_plugins_cpu_us_per_call: Option<f64>,
    pub event_loop_runtime_cpu_us_per_call: Option<f64>,
    pub polling_runtime_cpu_us_per_call: Option<f64>,
    /// How long our runtime's calls poll for a reply (`plugin_busy_poll`).
    pub busy_poll_us: Option<f64>,
    /// The polling chain doing the protocol's own work (each request
    /// encoded, each reply decoded and merged), the time per call of that
    /// work alone, and the runtime process's CPU time per call.
    pub encoding_chain: Option<Latency>,
    pub encoding_chain_work: Option<Latency>,
    pub encoding_runtime_cpu_us_per_call: Option<f64>,
    /// Our runtime and that chain measured in alternating turns, and the
    /// CPU time per call (ours, the chain's) of the runtime process and of
    /// the plugins.
    pub turns_create: Option<Latency>,
    pub turns_encoding_chain: Option<Latency>,
    pub turns_runtime_cpu_us_per_call: Option<(f64, f64)>,
    pub turns_plugins_cpu_us_per_call: Option<(f64, f64)>,
    /// Idle memory of each plugin process and of the runtime process, and
    /// the runtime's after the measured calls.
    pub plugin_rss_kib: Vec<u64>,
    pub plugin_anon_kib: Vec<u64>,
    pub runtime_rss_kib: Option<u64>,
    pub runtime_anon_kib: Option<u64>,
    pub runtime_rss_after_kib: Option<u64>,
    /// CPU time per measured CreateContainer of the runtime process and of
    /// all plugin processes together.
    pub runtime_cpu_us_per_call: Option<f64>,
    pub plugins_cpu_us_per_call: Option<f64>,
    pub lifecycle: Option<Latency>,
    pub lifecycles_per_s: Option<f64>,
    /// Synchronize inside the runtime hook, from the plugin's process start,
    /// and by a scripted runtime; CPU time per round of runtime and plugin.
    pub sync: Option<Latency>,
    pub sync_samples_us: Vec<f64>,
    pub sync_from_start: Option<Latency>,
    pub sync_from_start_samples_us: Vec<f64>,
    pub sync_scripted: Option<Latency>,
    pub sync_scripted_samples_us: Vec<f64>,
    pub sync_runtime_cpu_us: Option<f64>,
    pub sync_plugin_cpu_us: Option<f64>,
    pub containers: Option<usize>,
    pub pods: Option<usize>,
    pub sync_bytes: Option<usize>,
    pub load_windows: Vec<Window>,
    pub load_late: Option<usize>,
    pub updates_received: Option<u64>,
    /// Mode wasm: start-ups, the first call, the module's two calls alone
    /// and the work around them no runtime can skip.
    pub startup: Option<Latency>,
    pub first_create_us: Option<f64>,
    pub module: Option<Latency>,
    pub wasm_work: Option<Latency>,
    pub plugins: usize,
    pub iterations: usize,
    /// The Go program's `GOMAXPROCS` and Go version.
    pub gomaxprocs: Option<usize>,
    pub go_version: Option<String>,
}

/// What the benches read of `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter (`R` running, `S` sleeping, ...).
    pub state: char,
    /// User and system CPU time, in clock ticks.
    pub utime: u64,
    pub stime: u64,
}

/// The `p` quantile (0 < `p` ≤ 1) of `sorted`, samples in ascending order,
/// by nearest rank: the smallest sample with at least that share of them at
/// or below it. Both bench programs summarize their samples so (Go's
/// `summarize` alike); `None` for no samples.
///
/// ```
/// use nri_interop::bench::nearest_rank;
///
/// let sorted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/// assert_eq!(nearest_rank(&sorted, 0.5), Some(5));
/// assert_eq!(nearest_rank(&sorted, 0.99), Some(10));
/// assert_eq!(nearest_rank::<u32>(&[], 0.5), None);
/// ```
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// Reads `/proc/<pid>/stat`.
///
/// ```
/// let me = nri_interop::bench::proc_stat(std::process::id()).unwrap();
/// assert_eq!(me.state, 'R');
/// ```
pub fn proc_stat(pid: u32) -> Result<ProcStat, String> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    parse_proc_stat(&stat).ok_or_else(|| format!("{path}: cannot parse {stat:?}"))
}

/// The fields after the command name, which is in parentheses and may hold
/// spaces and parentheses itself: state is field 3, utime 14, stime 15.
fn parse_proc_stat(stat: &str) -> Option<ProcStat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        utime: num(11)?,
        stime: num(12)?,
    })
}

/// One size in KiB from `/proc/<pid>/status`, `field` with its colon
/// (`"VmRSS:"`, `"RssAnon:"`).
///
/// ```
/// let rss = nri_interop::bench::status_kib(std::process::id(), "VmRSS:").unwrap();
/// assert!(rss > 0);
/// ```
pub fn status_kib(pid: u32, field: &str) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    parse_status_kib(&status, field).ok_or_else(|| format!("no {field} in {path}"))
}

fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parentheses_in_the_name() {
        let line = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 5 0 0";
        assert_eq!(
            parse_proc_stat(line),
            Some(ProcStat {
                state: 'S',
                utime: 7,
                stime: 3
            })
        );
        assert_eq!(parse_proc_stat("42 (a) S 1"), None);
        assert_eq!(parse_proc_stat("no name"), None);
    }

    #[test]
    fn status_fields_by_exact_name() {
        let status = "Name:\tx\nVmRSSx:\t9 kB\nVmRSS:\t  1884 kB\nRssAnon:\t124 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(1884));
        assert_eq!(parse_status_kib(status, "RssAnon:"), Some(124));
        assert_eq!(parse_status_kib(status, "RssFile:"), None);
    }
}
