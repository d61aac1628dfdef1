//! The runtime adaptation with external plugin processes: nri-rs next to the
//! Go reference, measured in the same run on the same machine, written to
//! `docs/PERFORMANCE.md`.
//!
//! Run with `cargo bench -p nri-interop --bench adaptation`. For 1 and 8
//! subscribed plugins, and for each plugin implementation (Rust:
//! `nri-rs-test-plugin` on nri-stub; Go: `nri-ref-plugin` on the official
//! stub), both runtimes are measured with the same plugin binary:
//!
//! * `CreateContainer` latency: every plugin subscribes to CreateContainer
//!   only and answers with one annotation and one environment variable of
//!   its own; the call returns the merged adjustment;
//! * registration: a plugin process is started and timed until its
//!   Synchronize (empty pod and container lists) completed;
//! * the resident memory (`VmRSS`) of each idle plugin once registered.
//!
//! The Rust runtime is our `Adaptation` in this process on a
//! current-thread tokio runtime (the crate's tokio has no multi-thread
//! scheduler); the Go runtime is the official `pkg/adaptation` in
//! `nri-adaptation-bench` (interop/harness) with its default `GOMAXPROCS`.
//! `NRI_ADAPTATION_BENCH_ITERS` sets the number of measured calls per case (default 3000; a tenth more is run first as
//! warm-up).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::{
    Container, ContainerEviction, ContainerState, ContainerUpdate, CreateContainerRequest,
    PodSandbox,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

const GO_BENCH: &str = "nri-adaptation-bench";
const GO_PLUGIN: &str = "nri-ref-plugin";
const RUST_PLUGIN: &str = env!("CARGO_BIN_EXE_nri-rs-test-plugin");
const REGISTRATIONS: usize = 10;
const PLUGIN_COUNTS: [usize; 2] = [1, 8];
const LATENCY_TARGET: f64 = 0.5;
const MEMORY_TARGET: f64 = 0.25;

/// Median and 99th percentile of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct Latency {
    median_us: f64,
    p99_us: f64,
}

/// One case on one runtime; `nri-adaptation-bench` prints the same document.
#[derive(Debug, Deserialize)]
struct Report {
    create: Latency,
    registration: Latency,
    plugin_rss_kib: Vec<u64>,
    plugins: usize,
    iterations: usize,
}

/// The Go side's extra fields.
#[derive(Debug, Deserialize)]
struct GoInfo {
    gomaxprocs: usize,
    go_version: String,
}

/// Which plugin binary plays the plugin side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum PluginSide {
    Rust,
    Go,
}

impl PluginSide {
    fn label(self) -> &'static str {
        match self {
            PluginSide::Rust => "Rust (nri-rs-test-plugin)",
            PluginSide::Go => "Go (nri-ref-plugin)",
        }
    }
}

/// The configuration of a plugin, in `nri-ref-plugin`'s format.
#[derive(Debug, Serialize)]
struct PluginConfig {
    events: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adjust: Option<serde_json::Value>,
}

/// Plugin `i`'s configuration: one annotation and one variable of its own.
fn bench_config(i: usize) -> PluginConfig {
    PluginConfig {
        events: vec!["CreateContainer"],
        adjust: Some(serde_json::json!({
            "annotations": {format!("bench.nri.io/plugin-{i}"): "on"},
            "env": [{"key": format!("BENCH_PLUGIN_{i}"), "value": "on"}],
        })),
    }
}

/// The request of call `i`; `nri-adaptation-bench` sends the same one.
fn create_request(i: i64) -> CreateContainerRequest {
    let id = format!("ctr{i}");
    CreateContainerRequest {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "pod0".into(),
            uid: "uid0".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
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

/// The runtime side of the Rust measurement: empty tables, and a note each
/// time a plugin finished its Synchronize.
struct Hooks {
    synced: mpsc::UnboundedSender<Instant>,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Hooks {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        sync.synchronize(&[], &[]).await?;
        let _ = self.synced.send(Instant::now());
        Ok(())
    }

    async fn update_containers(
        &self,
        _plugin: &str,
        _updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(Vec::new())
    }
}

/// Starts one external plugin connecting to `socket`.
fn spawn_plugin(
    bin: &Path,
    dir: &Path,
    socket: &Path,
    idx: usize,
    name: &str,
    cfg: &PluginConfig,
) -> Child {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec(cfg).expect("encode config")).expect("write config");
    Command::new(bin)
        .arg("-config")
        .arg(&path)
        .args(["-name", name, "-idx", &format!("{idx:02}"), "-socket"])
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()))
}

fn stop_plugin(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Our adaptation in this process, with `plugins` plugins of `bin`.
fn rust_run(bin: &Path, plugins: usize, iters: usize, warmup: usize) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = rt.block_on(rust_measure(bin, plugins, iters, warmup));
    rt.shutdown_timeout(Duration::from_secs(5));
    report
}

async fn rust_measure(bin: &Path, plugins: usize, iters: usize, warmup: usize) -> Report {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("nri.sock");
    for sub in ["plugins", "conf"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    let (tx, mut synced) = mpsc::unbounded_channel();
    let nri = Adaptation::builder(
        "nri-adaptation-bench",
        "v0.0.0",
        Arc::new(Hooks { synced: tx }),
    )
    .plugin_path(dir.path().join("plugins"))
    .plugin_config_path(dir.path().join("conf"))
    .socket_path(&socket)
    .build();
    nri.start().await.expect("start adaptation");
    while synced.try_recv().is_ok() {}

    // Registration, one plugin at a time.
    let mut reg = Vec::with_capacity(REGISTRATIONS);
    for i in 0..REGISTRATIONS {
        let cfg = PluginConfig {
            events: vec!["CreateContainer"],
            adjust: None,
        };
        let start = Instant::now();
        let child = spawn_plugin(
            bin,
            dir.path(),
            &socket,
            90 + i % 10,
            &format!("reg{i}"),
            &cfg,
        );
        let done = tokio::time::timeout(Duration::from_secs(30), synced.recv())
            .await
            .expect("plugin synchronized within 30 s")
            .expect("hooks alive");
        reg.push(done - start);
        stop_plugin(child);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let children: Vec<Child> = (0..plugins)
        .map(|i| {
            spawn_plugin(
                bin,
                dir.path(),
                &socket,
                i,
                &format!("bench{i}"),
                &bench_config(i),
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let adjusted = nri
            .create_container(create_request(-1))
            .await
            .ok()
            .and_then(|r| r.adjust)
            .map_or(0, |a| a.annotations.len());
        if adjusted == plugins {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{plugins} plugins did not all adjust within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss = children.iter().map(|c| vm_rss_kib(c.id())).collect();

    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let req = create_request(i as i64);
        let start = Instant::now();
        let reply = nri.create_container(req).await;
        let elapsed = start.elapsed();
        let reply = reply.unwrap_or_else(|e| panic!("CreateContainer {i}: {e}"));
        let got = reply.adjust.map_or(0, |a| a.annotations.len());
        assert_eq!(got, plugins, "CreateContainer {i}: annotations");
        if i >= warmup {
            samples.push(elapsed);
        }
    }

    nri.stop().await;
    children.into_iter().for_each(stop_plugin);
    Report {
        create: summarize(samples),
        registration: summarize(reg),
        plugin_rss_kib: rss,
        plugins,
        iterations: iters,
    }
}

/// The Go adaptation in `nri-adaptation-bench`, with `plugins` plugins of `bin`.
fn go_run(bin: &Path, plugins: usize, iters: usize, warmup: usize) -> (Report, GoInfo) {
    let prog = nri_interop::harness_bin(GO_BENCH);
    let out = Command::new(&prog)
        .arg("-plugin")
        .arg(bin)
        .args(["-plugins", &plugins.to_string()])
        .args(["-n", &iters.to_string()])
        .args(["-warmup", &warmup.to_string()])
        .args(["-registrations", &REGISTRATIONS.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", prog.display()));
    assert!(
        out.status.success(),
        "{GO_BENCH} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let fail = |e: serde_json::Error| -> ! {
        panic!(
            "{GO_BENCH} output is not a report: {e}\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    };
    let report: Report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| fail(e));
    let info: GoInfo = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| fail(e));
    (report, info)
}

/// Median and 99th percentile (nearest rank).
fn summarize(mut samples: Vec<Duration>) -> Latency {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let rank = |p: f64| {
        let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i].as_secs_f64() * 1e6
    };
    Latency {
        median_us: rank(0.5),
        p99_us: rank(0.99),
    }
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS for pid {pid}"))
}

fn median_u64(values: &[u64]) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

/// Both runtimes' results for one plugin count and plugin side.
struct Pair {
    plugins: usize,
    side: PluginSide,
    rust: Report,
    go: Report,
}

fn main() {
    let iters: usize = std::env::var("NRI_ADAPTATION_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3000);
    let warmup = iters / 10;
    let load_start = load_average();
    let started = Instant::now();

    let go_plugin = nri_interop::harness_bin(GO_PLUGIN);
    let rust_plugin = PathBuf::from(RUST_PLUGIN);
    let mut go_info = None;
    let mut pairs = Vec::new();
    for plugins in PLUGIN_COUNTS {
        for side in [PluginSide::Rust, PluginSide::Go] {
            let bin = match side {
                PluginSide::Rust => rust_plugin.as_path(),
                PluginSide::Go => go_plugin.as_path(),
            };
            eprintln!(
                "adaptation bench: {plugins} plugin(s), {} ...",
                side.label()
            );
            let rust = rust_run(bin, plugins, iters, warmup);
            let (go, info) = go_run(bin, plugins, iters, warmup);
            go_info = Some(info);
            pairs.push(Pair {
                plugins,
                side,
                rust,
                go,
            });
        }
    }
    let load_end = load_average();
    let go_info = go_info.expect("at least one Go run");
    let doc = render(
        &pairs,
        &go_info,
        iters,
        &load_start,
        &load_end,
        started.elapsed(),
    );
    print!("{doc}");
    let path = nri_interop::interop_dir()
        .parent()
        .map(|p| p.join("docs").join("PERFORMANCE.md"))
        .expect("workspace directory");
    std::fs::write(&path, doc).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("adaptation bench: wrote {}", path.display());
}

fn render(
    pairs: &[Pair],
    go: &GoInfo,
    iters: usize,
    load_start: &str,
    load_end: &str,
    took: Duration,
) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "# Performance: nri-rs next to the Go reference\n");
    let _ = writeln!(
        d,
        "Generated by `cargo bench -p nri-interop --bench adaptation` \
         (`interop/benches/adaptation.rs`, Go side `interop/harness/cmd/nri-adaptation-bench`, \
         official `github.com/containerd/nri` v0.12.5). Every Rust/Go ratio below compares \
         figures measured in the same run, one case right after the other.\n"
    );
    let _ = writeln!(d, "## Machine\n");
    let _ = writeln!(d, "* CPUs (nproc): {}", nproc());
    let _ = writeln!(d, "* CPU model: {}", cpu_model());
    let _ = writeln!(
        d,
        "* load average (1, 5, 15 min) at start: {load_start}; at the end: {load_end}"
    );
    let _ = writeln!(
        d,
        "* Rust: adaptation on a current-thread tokio runtime (one OS thread); Go: {}, GOMAXPROCS={}",
        go.go_version, go.gomaxprocs
    );
    let _ = writeln!(d, "* run time: {:.0} s\n", took.as_secs_f64());
    let _ = writeln!(
        d,
        "The machine was shared with other work during the run (see the load average, \
         which is well above the CPU count when the machine is busy): absolute figures, \
         and tails most of all, are noisier than on an idle host. Both runtimes ran under \
         the same conditions, alternating case by case.\n"
    );

    let _ = writeln!(d, "## CreateContainer latency\n");
    let _ = writeln!(
        d,
        "{iters} measured calls per case (after {} warm-up calls). Every plugin is an external \
         process connected to the runtime's socket, subscribed to CreateContainer only, and \
         answers with one annotation and one environment variable of its own; the call returns \
         the merged adjustment (checked on every call). Each runtime was measured with the same \
         plugin binary, so a row compares the runtimes alone.\n",
        iters / 10
    );
    let _ = writeln!(
        d,
        "Target: Rust/Go ratio ≤ {LATENCY_TARGET} at the median and at p99.\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | Rust median | Rust p99 | Go median | Go p99 | median R/G | p99 R/G | target |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for p in pairs {
        let (rm, rp) = (
            p.rust.create.median_us / p.go.create.median_us,
            p.rust.create.p99_us / p.go.create.p99_us,
        );
        let _ = writeln!(
            d,
            "| {} | {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | median {}, p99 {} |",
            p.plugins,
            p.side.label(),
            p.rust.create.median_us,
            p.rust.create.p99_us,
            p.go.create.median_us,
            p.go.create.p99_us,
            met(rm <= LATENCY_TARGET),
            met(rp <= LATENCY_TARGET),
        );
    }
    let _ = writeln!(
        d,
        "\nAll Rust (our runtime, our plugins) against all Go (Go runtime, Go plugins):\n"
    );
    let _ = writeln!(
        d,
        "| plugins | Rust median | Rust p99 | Go median | Go p99 | median R/G | p99 R/G | target |"
    );
    let _ = writeln!(d, "|---:|---:|---:|---:|---:|---:|---:|---|");
    for plugins in PLUGIN_COUNTS {
        let find = |side| {
            pairs
                .iter()
                .find(|p| p.plugins == plugins && p.side == side)
        };
        let (Some(r), Some(g)) = (find(PluginSide::Rust), find(PluginSide::Go)) else {
            continue;
        };
        let (rust, go) = (r.rust.create, g.go.create);
        let (rm, rp) = (rust.median_us / go.median_us, rust.p99_us / go.p99_us);
        let _ = writeln!(
            d,
            "| {plugins} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | median {}, p99 {} |",
            rust.median_us,
            rust.p99_us,
            go.median_us,
            go.p99_us,
            met(rm <= LATENCY_TARGET),
            met(rp <= LATENCY_TARGET),
        );
    }
    let _ = writeln!(
        d,
        "\nMixed pairings (Rust runtime with Go plugins, Go runtime with Rust plugins) are the \
         rows of the first table: Rust runtime + Go plugins is the \"Rust\" columns of the Go \
         plugin rows, Go runtime + Rust plugins the \"Go\" columns of the Rust plugin rows.\n"
    );

    let _ = writeln!(d, "## Idle plugin memory\n");
    let _ = writeln!(
        d,
        "`VmRSS` from `/proc/<pid>/status` of each plugin process, 200 ms after every plugin's \
         adjustment first showed in a CreateContainer reply (registered, configured, \
         synchronized, idle), before the measured calls. Median over all plugin processes of \
         that kind in all cases of the run (both runtimes).\n"
    );
    let _ = writeln!(d, "Target: Rust plugin ≤ {MEMORY_TARGET}× the Go plugin.\n");
    let mut rss: BTreeMap<PluginSide, Vec<u64>> = BTreeMap::new();
    for p in pairs {
        let all = rss.entry(p.side).or_default();
        all.extend(&p.rust.plugin_rss_kib);
        all.extend(&p.go.plugin_rss_kib);
    }
    let rust_rss = median_u64(rss.get(&PluginSide::Rust).map_or(&[], Vec::as_slice));
    let go_rss = median_u64(rss.get(&PluginSide::Go).map_or(&[], Vec::as_slice));
    let ratio = rust_rss as f64 / go_rss.max(1) as f64;
    let _ = writeln!(
        d,
        "| plugin | processes | median VmRSS | min | max |\n|---|---:|---:|---:|---:|"
    );
    for (side, values) in &rss {
        let _ = writeln!(
            d,
            "| {} | {} | {} KiB | {} KiB | {} KiB |",
            side.label(),
            values.len(),
            median_u64(values),
            values.iter().min().copied().unwrap_or(0),
            values.iter().max().copied().unwrap_or(0),
        );
    }
    let _ = writeln!(
        d,
        "\nRust/Go: **{ratio:.2}×** — target ≤ {MEMORY_TARGET}×: **{}**.\n",
        met(ratio <= MEMORY_TARGET)
    );

    let _ = writeln!(d, "## Plugin registration\n");
    let _ = writeln!(
        d,
        "{REGISTRATIONS} plugins per case, one at a time: from starting the plugin process to the \
         runtime's end of its Synchronize (empty pod and container lists), so the figure includes \
         the plugin's process start, connection, RegisterPlugin, Configure and Synchronize. \
         Measured in the 1-plugin and 8-plugin cases alike (before the latency plugins start); \
         both cases are listed. No target was set for it.\n"
    );
    let _ = writeln!(
        d,
        "| case | plugin side | Rust runtime median | p99 | Go runtime median | p99 | median R/G |"
    );
    let _ = writeln!(d, "|---|---|---:|---:|---:|---:|---:|");
    for p in pairs {
        let _ = writeln!(
            d,
            "| {}-plugin case | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} |",
            p.plugins,
            p.side.label(),
            p.rust.registration.median_us / 1e3,
            p.rust.registration.p99_us / 1e3,
            p.go.registration.median_us / 1e3,
            p.go.registration.p99_us / 1e3,
            p.rust.registration.median_us / p.go.registration.median_us,
        );
    }
    let _ = writeln!(d, "\n## Not measured\n");
    let _ = writeln!(
        d,
        "Synchronize of 1,000 containers with 4 KiB annotations each is not part of this bench."
    );
    let _ = writeln!(d, "\n## Reproducing\n");
    let _ = writeln!(
        d,
        "```sh\ncargo bench -p nri-interop --bench adaptation\n```\n\nNeeds the Go toolchain \
         (see `interop/README.md`); `NRI_ADAPTATION_BENCH_ITERS` sets the calls per case. \
         The command rewrites this file."
    );
    debug_assert!(pairs
        .iter()
        .all(|p| p.rust.iterations == p.go.iterations && p.rust.plugins == p.go.plugins));
    d
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|| "unknown".into())
}

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
