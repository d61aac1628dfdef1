//! The runtime adaptation with external plugin processes: nri-rs next to the
//! Go reference, measured in the same run on the same machine, written to
//! `docs/PERFORMANCE.md`.
//!
//! Run with `cargo bench -p nri-interop --bench adaptation`. Both runtimes
//! run in processes of their own, with the same flags and the same JSON
//! report: ours is `nri-rs-adaptation-bench` (this crate, `src/bin`), the Go
//! reference's is `nri-adaptation-bench` (interop/harness, official
//! `pkg/adaptation` v0.12.5). This program runs them one after the other,
//! case by case, and writes the document. Plugins are external processes
//! connected to the runtime's socket:
//!
//! * test plugins: `nri-rs-test-plugin` (nri-stub) and `nri-ref-plugin`
//!   (official stub), configured by JSON;
//! * minimal plugins: `nri-rs-min-plugin` (package `interop/min-plugin`:
//!   nri-stub, current-thread tokio, one annotation; built by this bench in
//!   three forms), the same plugin on the blocking stub
//!   (`nri-rs-min-blocking-plugin`, `nri_stub::blocking`, no async runtime;
//!   the same three forms; the one the targets use) and `nri-min-plugin`
//!   (official stub, the same; built with and without cgo), for
//!   CreateContainer, idle memory and Synchronize.
//!
//! Measured:
//!
//! * `CreateContainer` latency with 1 and 8 test plugins and with 8 minimal
//!   plugins (ours on each stub), on each runtime with the same plugin
//!   binary;
//! * plugin registration (process start to completed Synchronize);
//! * idle memory (`VmRSS`) of each plugin and of the runtime process with
//!   8 plugins connected;
//! * throughput of container lifecycles (create, start, stop, remove)
//!   through 8 test plugins;
//! * sustained load: lifecycles at a fixed rate for 60 s through 8 test
//!   plugins sending unsolicited updates, latency per 5-second window and the
//!   runtime's memory at the start and the end, all Rust against all Go;
//! * Synchronize of 1,000 and 10,000 containers with 4 KiB of annotations
//!   each (split into several messages), every runtime/plugin pairing;
//! * one plugin hop (a small ttRPC call over the mux) next to a raw socket
//!   pair round trip of the same bytes, in-process (`common/hop.rs`, the
//!   measurement of `--bench wire`);
//! * a WebAssembly plugin (the Go-built `nri-wasm-scripted` of
//!   `interop/wasm-plugins`, the same file for both runtimes, pre-installed):
//!   start-up of a runtime with it (ours from the cache of compiled modules)
//!   and CreateContainer through it, the first call and the steady state.
//!
//! `NRI_BENCH_QUICK=1` runs every case with few iterations (a check that the
//! bench works; it still writes the document, marked as a quick run).
//! `NRI_ADAPTATION_BENCH_ITERS` sets the CreateContainer calls per case
//! (default 3000, split over the case's five rounds, each runtime making
//! them in every round). `NRI_BENCH_ONLY=wasm` runs only the WebAssembly case and
//! prints its section without writing the document.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use machine::{cpu_model, nproc};
use serde::Deserialize;

#[path = "common/hop.rs"]
mod hop;
#[path = "common/machine.rs"]
mod machine;
#[path = "common/raw_chain.rs"]
mod raw_chain;
#[path = "common/rss_floor.rs"]
mod rss_floor;

const GO_BENCH: &str = "nri-adaptation-bench";
const RUST_BENCH: &str = env!("CARGO_BIN_EXE_nri-rs-adaptation-bench");
const GO_PLUGIN: &str = "nri-ref-plugin";
const RUST_PLUGIN: &str = env!("CARGO_BIN_EXE_nri-rs-test-plugin");
const GO_MIN_PLUGIN: &str = "nri-min-plugin";
/// The program of `interop/min-plugin` that is the minimal plugin on the
/// async stub.
const MIN_PLUGIN: &str = "nri-rs-min-plugin";
/// The program of `interop/min-plugin` that is the minimal plugin's build
/// without any plugin code (`common/rss_floor.rs`).
const RSS_FLOOR: &str = "nri-rs-rss-floor";
/// The program of `interop/min-plugin` that is the minimal plugin on the
/// blocking stub.
const MIN_BLOCKING_PLUGIN: &str = "nri-rs-min-blocking-plugin";
/// Processes of it measured per build.
const RSS_FLOOR_PROCESSES: usize = 16;
const LATENCY_TARGET: f64 = 0.5;
const MEMORY_TARGET: f64 = 0.25;
/// One hop over a raw socket pair round trip of the same bytes.
const HOP_TARGET: f64 = 3.0;
const MANY: usize = 8;
/// CreateContainer through 8 plugins over the raw chain of the same shape.
const RAW_CHAIN_TARGET: f64 = 2.0;
/// Synchronize of 10,000 containers, all Rust over all Go (median).
const SYNC_TARGET: f64 = 0.4;
/// Plugin registration, ours over Go's (median).
const REGISTRATION_TARGET: f64 = 0.7;
/// CreateContainer through one WebAssembly plugin, ours over Go's (median).
const WASM_CREATE_TARGET: f64 = 0.1;
/// Start-up of a runtime with one WebAssembly plugin, ours (compiled module
/// cached) over Go's.
const WASM_STARTUP_TARGET: f64 = 0.1;
/// The WebAssembly plugin measured.
const WASM_MODULE: &str = "nri-wasm-scripted";

/// Median and 99th percentile of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct Latency {
    median_us: f64,
    p99_us: f64,
}

/// Lifecycle latency of one 5-second window of the load mode.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct Window {
    start_s: u64,
    count: usize,
    median_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// Lifecycles per second started in the load mode.
const LOAD_RATE: usize = 50;
/// Each plugin's unsolicited update period in the load mode.
const LOAD_UPDATE_MS: usize = 100;

/// The report of one run of either bench program.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Report {
    create: Option<Latency>,
    registration: Option<Latency>,
    registration_samples_us: Vec<f64>,
    plugin_connect: Option<Latency>,
    plugin_connect_samples_us: Vec<f64>,
    plugin_scripted: Option<Latency>,
    plugin_scripted_samples_us: Vec<f64>,
    scripted_chain: Option<Latency>,
    event_loop_chain: Option<Latency>,
    scripted_runtime_cpu_us_per_call: Option<f64>,
    scripted_plugins_cpu_us_per_call: Option<f64>,
    event_loop_runtime_cpu_us_per_call: Option<f64>,
    busy_poll_us: Option<f64>,
    polling_chain: Option<Latency>,
    polling_runtime_cpu_us_per_call: Option<f64>,
    encoding_chain: Option<Latency>,
    encoding_chain_work: Option<Latency>,
    encoding_runtime_cpu_us_per_call: Option<f64>,
    turns_create: Option<Latency>,
    turns_encoding_chain: Option<Latency>,
    turns_runtime_cpu_us_per_call: Option<(f64, f64)>,
    turns_plugins_cpu_us_per_call: Option<(f64, f64)>,
    plugin_rss_kib: Vec<u64>,
    plugin_anon_kib: Vec<u64>,
    runtime_rss_kib: Option<u64>,
    runtime_anon_kib: Option<u64>,
    runtime_rss_after_kib: Option<u64>,
    runtime_cpu_us_per_call: Option<f64>,
    plugins_cpu_us_per_call: Option<f64>,
    lifecycle: Option<Latency>,
    lifecycles_per_s: Option<f64>,
    sync: Option<Latency>,
    sync_samples_us: Vec<f64>,
    sync_from_start: Option<Latency>,
    sync_from_start_samples_us: Vec<f64>,
    sync_runtime_cpu_us: Option<f64>,
    sync_plugin_cpu_us: Option<f64>,
    sync_scripted: Option<Latency>,
    sync_scripted_samples_us: Vec<f64>,
    load_windows: Vec<Window>,
    load_late: Option<usize>,
    updates_received: Option<u64>,
    pods: Option<usize>,
    sync_bytes: Option<usize>,
    startup: Option<Latency>,
    first_create_us: Option<f64>,
    module: Option<Latency>,
    wasm_work: Option<Latency>,
    iterations: usize,
    gomaxprocs: Option<usize>,
    go_version: Option<String>,
}

/// Which runtime adaptation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Rust,
    Go,
}

/// Which plugin binary plays the plugin side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Plugin {
    RustTest,
    GoTest,
    RustMin,
    RustMinStatic,
    RustMinSmall,
    /// `nri-rs-min-blocking-plugin` in the builds of the three above.
    RustMinBlocking,
    RustMinBlockingStatic,
    RustMinBlockingSmall,
    GoMin,
    GoMinStatic,
    /// The Go-built WebAssembly module `nri-wasm-scripted`.
    Wasm,
}

impl Plugin {
    fn label(self) -> &'static str {
        match self {
            Plugin::RustTest => "Rust (nri-rs-test-plugin)",
            Plugin::GoTest => "Go (nri-ref-plugin)",
            Plugin::RustMin => "Rust minimal (nri-rs-min-plugin)",
            Plugin::RustMinStatic => "Rust minimal, static (nri-rs-min-plugin)",
            Plugin::RustMinSmall => "Rust minimal, size profile + static (nri-rs-min-plugin)",
            Plugin::RustMinBlocking => "Rust minimal, blocking stub (nri-rs-min-blocking-plugin)",
            Plugin::RustMinBlockingStatic => {
                "Rust minimal, blocking stub, static (nri-rs-min-blocking-plugin)"
            }
            Plugin::RustMinBlockingSmall => {
                "Rust minimal, blocking stub, size profile + static (nri-rs-min-blocking-plugin)"
            }
            Plugin::GoMin => "Go minimal (nri-min-plugin)",
            Plugin::GoMinStatic => "Go minimal, static: CGO_ENABLED=0 (nri-min-plugin)",
            Plugin::Wasm => "WebAssembly, built with Go (nri-wasm-scripted)",
        }
    }

    /// Whether the plugin answers as a minimal plugin does (one
    /// annotation).
    fn is_minimal(self) -> bool {
        matches!(
            self,
            Plugin::RustMin
                | Plugin::RustMinStatic
                | Plugin::RustMinSmall
                | Plugin::RustMinBlocking
                | Plugin::RustMinBlockingStatic
                | Plugin::RustMinBlockingSmall
                | Plugin::GoMin
                | Plugin::GoMinStatic
        )
    }

    fn is_rust(self) -> bool {
        matches!(
            self,
            Plugin::RustTest
                | Plugin::RustMin
                | Plugin::RustMinStatic
                | Plugin::RustMinSmall
                | Plugin::RustMinBlocking
                | Plugin::RustMinBlockingStatic
                | Plugin::RustMinBlockingSmall
        )
    }

    /// The build of the minimal Rust plugin this one was made in (its
    /// `nri-rs-rss-floor` is that build's): itself for the async stub's.
    fn min_build(self) -> Plugin {
        match self {
            Plugin::RustMinBlocking => Plugin::RustMin,
            Plugin::RustMinBlockingStatic => Plugin::RustMinStatic,
            Plugin::RustMinBlockingSmall => Plugin::RustMinSmall,
            other => other,
        }
    }

    /// Whether the targets count this plugin's cases. Our minimal plugin
    /// there is the smallest our library makes, on the blocking stub; the
    /// async stub's (`RustMin`) is measured in every case all the same and
    /// shown in each section's tables.
    fn in_targets(self) -> bool {
        self != Plugin::RustMin
    }

    /// The minimal plugin on the blocking stub in this build of the minimal
    /// Rust plugin.
    fn blocking_of(self) -> Option<Plugin> {
        match self {
            Plugin::RustMin => Some(Plugin::RustMinBlocking),
            Plugin::RustMinStatic => Some(Plugin::RustMinBlockingStatic),
            Plugin::RustMinSmall => Some(Plugin::RustMinBlockingSmall),
            _ => None,
        }
    }
}

/// Paths of the programs.
struct Programs {
    go_bench: PathBuf,
    plugins: BTreeMap<Plugin, PathBuf>,
}

/// Iteration counts of one run.
#[derive(Debug, Clone, Copy)]
struct Counts {
    quick: bool,
    create: usize,
    registrations: usize,
    lifecycles: usize,
    /// (containers, rounds)
    syncs: [(usize, usize); 2],
    /// Round trips per case of the one-hop measurement.
    hops: usize,
    /// Seconds of the sustained-load case, per runtime.
    load_seconds: usize,
    /// Timed start-ups of a runtime with a WebAssembly plugin.
    wasm_starts: usize,
}

impl Counts {
    /// Measured CreateContainer calls in each round of a case.
    fn create_per_round(self) -> usize {
        (self.create / CREATE_ROUNDS).max(1)
    }

    fn from_env() -> Counts {
        let quick = std::env::var("NRI_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let create = std::env::var("NRI_ADAPTATION_BENCH_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(if quick { 200 } else { 3000 });
        if quick {
            Counts {
                quick,
                create,
                registrations: 3,
                lifecycles: 100,
                syncs: [(1000, 2), (10_000, 1)],
                hops: 2000,
                load_seconds: 5,
                wasm_starts: 2,
            }
        } else {
            Counts {
                quick,
                create,
                // Per round: 30 per case and runtime, pooled.
                registrations: 6,
                lifecycles: 2000,
                syncs: [(1000, 9), (10_000, 9)],
                hops: 20_000,
                load_seconds: 60,
                wasm_starts: 5,
            }
        }
    }
}

/// Runs one bench program and parses its report.
fn run(progs: &Programs, runtime: Runtime, plugin: Plugin, args: &[String]) -> Report {
    let prog: &Path = match runtime {
        Runtime::Rust => Path::new(RUST_BENCH),
        Runtime::Go => &progs.go_bench,
    };
    let out = Command::new(prog)
        .arg("-plugin")
        .arg(&progs.plugins[&plugin])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", prog.display()));
    assert!(
        out.status.success(),
        "{} {args:?} with {} failed ({}): {}",
        prog.display(),
        plugin.label(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{} output is not a report: {e}\n{}",
            prog.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Both runtimes' reports for one case.
struct Pair {
    plugins: usize,
    plugin: Plugin,
    rust: Report,
    go: Report,
    /// When the case ran in rounds: every round's median R/G, in order
    /// (`rust` and `go` are the round with the median of these).
    round_ratios: Vec<f64>,
    /// The case's raw chain, measured at the start of the round kept.
    raw: Option<hop::Latency>,
}

/// Rounds of each CreateContainer case. A disturbance of the machine that
/// hits one runtime's run and not the other's moves a single run's R/G by
/// a fifth or more, now and then in two rounds of the same case; the round
/// with the median R/G of five does not hang on two such runs.
const CREATE_ROUNDS: usize = 5;

/// Runs one case on our runtime, then on Go's.
fn pair(progs: &Programs, plugins: usize, plugin: Plugin, args: &[String]) -> Pair {
    eprintln!(
        "adaptation bench: {args:?}, {plugins} plugin(s), {} ...",
        plugin.label()
    );
    Pair {
        plugins,
        plugin,
        rust: run(progs, Runtime::Rust, plugin, args),
        go: run(progs, Runtime::Go, plugin, args),
        round_ratios: Vec::new(),
        raw: None,
    }
}

/// Runs of each Synchronize case per runtime and plugin, their rounds
/// pooled. All Rust and all Go run one right after the other in each, which
/// of them goes first switching from run to run, so that a slow stretch of
/// the machine does not fall on one side's whole case.
const SYNC_RUNS: usize = 3;

/// Synchronize of a table of `containers` containers, with our minimal
/// plugin and Go's, each on both runtimes, `rounds` rounds each (rounded up
/// to whole runs): [`SYNC_RUNS`] runs of each, in turn.
fn sync_case(progs: &Programs, containers: usize, rounds: usize) -> Vec<(usize, Pair)> {
    let per_run = rounds.div_ceil(SYNC_RUNS).max(1);
    let args = strings(&[
        "-mode",
        "sync",
        "-containers",
        &containers.to_string(),
        "-rounds",
        &per_run.to_string(),
    ]);
    // All Rust and all Go next to each other, then the mixed pairs; every
    // other run in the reverse order.
    let order = [
        (Runtime::Rust, Plugin::RustMin),
        (Runtime::Go, Plugin::GoMin),
        (Runtime::Go, Plugin::RustMin),
        (Runtime::Rust, Plugin::GoMin),
    ];
    let mut reports: [Vec<Report>; 4] = Default::default();
    for k in 0..SYNC_RUNS {
        let mut turn: Vec<usize> = (0..order.len()).collect();
        if k % 2 == 1 {
            turn.reverse();
        }
        for i in turn {
            let (runtime, plugin) = order[i];
            eprintln!(
                "adaptation bench: {args:?}, {} on the {runtime:?} runtime, run {} of {SYNC_RUNS} ...",
                plugin.label(),
                k + 1
            );
            reports[i].push(run(progs, runtime, plugin, &args));
        }
    }
    let [all_rust, all_go, go_rust, rust_go] = reports.map(merge_runs);
    [
        (Plugin::RustMin, all_rust, go_rust),
        (Plugin::GoMin, rust_go, all_go),
    ]
    .into_iter()
    .map(|(plugin, rust, go)| {
        (
            containers,
            Pair {
                plugins: 1,
                plugin,
                rust,
                go,
                round_ratios: Vec::new(),
                raw: None,
            },
        )
    })
    .collect()
}

/// One report of a measurement's runs: the first run's, with the samples
/// of all pooled ([`pool_samples`]), the CPU times per round averaged over
/// the runs (a run that left one out counting as zero) and the rounds added
/// up.
fn merge_runs(mut runs: Vec<Report>) -> Report {
    if runs.is_empty() {
        return Report::default();
    }
    let mut first = runs.remove(0);
    let count = (runs.len() + 1) as f64;
    // Go's program leaves out a CPU time of zero (`omitempty`).
    let mean = |first: Option<f64>, of: fn(&Report) -> Option<f64>| {
        let all = || std::iter::once(first).chain(runs.iter().map(of));
        all()
            .any(|v| v.is_some())
            .then(|| all().map(|v| v.unwrap_or(0.0)).sum::<f64>() / count)
    };
    first.sync_runtime_cpu_us = mean(first.sync_runtime_cpu_us, |r| r.sync_runtime_cpu_us);
    first.sync_plugin_cpu_us = mean(first.sync_plugin_cpu_us, |r| r.sync_plugin_cpu_us);
    first.iterations += runs.iter().map(|r| r.iterations).sum::<usize>();
    pool_samples(&mut first, runs.iter());
    first
}

/// Runs one CreateContainer case `rounds` times, both runtimes each round,
/// which of them goes first switching from round to round (so a trend over
/// the rounds weighs on both alike), and keeps the round whose median R/G
/// is the median of all rounds'. Each round starts with the case's raw
/// chain (`raw`: its hops' bytes, measured and warm-up calls), so that the
/// physical limit a row is held against was measured minutes, not a
/// quarter of an hour, from it.
fn pair_rounds(
    progs: &Programs,
    plugins: usize,
    plugin: Plugin,
    args: &[String],
    rounds: usize,
    raw: (&[(usize, usize)], usize, usize),
) -> Pair {
    let (hops, n, warmup) = raw;
    let mut runs = Vec::with_capacity(rounds);
    let mut raws = Vec::with_capacity(rounds);
    for round in 0..rounds {
        eprintln!(
            "adaptation bench: {args:?}, {plugins} plugin(s), {}, round {} of {rounds} ...",
            plugin.label(),
            round + 1
        );
        raws.push(hop::summarize(raw_chain::measure(plugins, hops, n, warmup)));
        let (rust, go) = if round % 2 == 0 {
            let rust = run(progs, Runtime::Rust, plugin, args);
            (rust, run(progs, Runtime::Go, plugin, args))
        } else {
            let go = run(progs, Runtime::Go, plugin, args);
            (run(progs, Runtime::Rust, plugin, args), go)
        };
        runs.push((rust, go));
    }
    let ratio = |(rust, go): &(Report, Report)| {
        lat(rust, |r| r.create).median_us / lat(go, |r| r.create).median_us
    };
    let round_ratios: Vec<f64> = runs.iter().map(ratio).collect();
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| round_ratios[a].total_cmp(&round_ratios[b]));
    let kept = order[order.len() / 2];
    let (mut rust, mut go) = runs.swap_remove(kept);
    // A case's registrations are few per round and do not depend on how
    // its CreateContainer calls went: those of all its rounds count.
    pool_samples(&mut rust, runs.iter().map(|r| &r.0));
    pool_samples(&mut go, runs.iter().map(|r| &r.1));
    Pair {
        plugins,
        plugin,
        rust,
        go,
        round_ratios,
        raw: raws.get(kept).copied(),
    }
}

/// Replaces each summary in `into` that its report also has the samples
/// of by the summary of those samples and the same samples of `others`,
/// the other runs of the same measurement.
fn pool_samples<'a>(into: &mut Report, others: impl Iterator<Item = &'a Report> + Clone) {
    let pool = |samples: fn(&Report) -> &[f64]| {
        pooled(
            samples(into)
                .iter()
                .copied()
                .chain(others.clone().flat_map(|r| samples(r).iter().copied())),
        )
    };
    let pooled = [
        pool(|r| &r.registration_samples_us),
        pool(|r| &r.plugin_connect_samples_us),
        pool(|r| &r.plugin_scripted_samples_us),
        pool(|r| &r.sync_samples_us),
        pool(|r| &r.sync_from_start_samples_us),
        pool(|r| &r.sync_scripted_samples_us),
    ];
    let slots = [
        &mut into.registration,
        &mut into.plugin_connect,
        &mut into.plugin_scripted,
        &mut into.sync,
        &mut into.sync_from_start,
        &mut into.sync_scripted,
    ];
    for (slot, pooled) in slots.into_iter().zip(pooled) {
        if pooled.is_some() {
            *slot = pooled;
        }
    }
}

/// Median and 99th percentile (nearest rank, as both bench programs
/// summarize) of samples in microseconds; `None` for none.
fn pooled(samples: impl Iterator<Item = f64>) -> Option<Latency> {
    let mut all: Vec<f64> = samples.collect();
    all.sort_by(f64::total_cmp);
    let rank = |p: f64| nri_interop::bench::nearest_rank(&all, p);
    Some(Latency {
        median_us: rank(0.5)?,
        p99_us: rank(0.99)?,
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Builds the Go minimal plugin (it lives under the bench's command
/// directory, so `harness_bin` does not install it) next to the harness
/// programs: as `go build` makes it by default (linked with the C library
/// through cgo), or with `CGO_ENABLED=0` (static).
fn build_go_min_plugin(go_bench: &Path, cgo: bool) -> PathBuf {
    let dir = go_bench
        .parent()
        .map_or_else(nri_interop::bin_dir, Path::to_path_buf);
    let out = dir.join(if cgo {
        GO_MIN_PLUGIN.to_owned()
    } else {
        format!("{GO_MIN_PLUGIN}-static")
    });
    let go = std::env::var_os("NRI_INTEROP_GO").unwrap_or_else(|| OsString::from("go"));
    let mut cmd = Command::new(&go);
    if !cgo {
        cmd.env("CGO_ENABLED", "0");
    }
    let status = cmd
        .current_dir(nri_interop::interop_dir().join("harness"))
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOWORK", "off")
        .arg("build")
        .arg("-o")
        .arg(&out)
        .arg("./cmd/nri-adaptation-bench/nri-min-plugin")
        .status()
        .unwrap_or_else(|e| panic!("run {}: {e}", go.to_string_lossy()));
    assert!(status.success(), "go build of {GO_MIN_PLUGIN} failed");
    out
}

/// The three builds of the minimal Rust plugin, each of its package alone
/// (so it gets only the dependency features it asks for, as a plugin
/// author's crate does): (the default release profile, dynamically linked;
/// the same, static, as `deploy/build-images` builds the shipped plugins;
/// the release profile for size, static). Each build has a target
/// directory of its own under `$CARGO_TARGET_DIR/min-plugin`, so that the
/// next run rebuilds nothing. In each, the plugin on the blocking stub is
/// built without the package's default features, as a plugin on the
/// blocking stub depends on `nri-stub` (its lean set: no tokio), and the
/// async one and the floor with them.
fn build_min_plugins() -> (PathBuf, PathBuf, PathBuf) {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let base = nri_interop::bin_dir()
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("min-plugin");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let manifest = nri_interop::interop_dir()
        .join("min-plugin")
        .join("Cargo.toml");
    let build = |dir: &str, static_: bool, extra: &[&str]| -> PathBuf {
        let target_dir = base.join(dir);
        let out = if static_ {
            target_dir.join(&triple).join("release")
        } else {
            target_dir.join("release")
        };
        let programs: [(&[&str], &[&str]); 2] = [
            (&[], &["--bin", MIN_PLUGIN, "--bin", RSS_FLOOR]),
            (&["--no-default-features"], &["--bin", MIN_BLOCKING_PLUGIN]),
        ];
        for (features, bins) in programs {
            let mut cmd = Command::new(&cargo);
            cmd.env("CARGO_TARGET_DIR", &target_dir)
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .arg("build")
                .arg("--quiet")
                .arg("--locked")
                .arg("--release")
                .arg("--manifest-path")
                .arg(&manifest)
                .args(features)
                // It installs no subscriber: its log events are not compiled
                // in (tracing's `release_max_level_off`, see its README).
                .args(["--features", "no-logs"])
                .args(bins)
                .args(extra);
            if static_ {
                // With --target the flag reaches the plugin and not the build
                // scripts or procedural macros.
                cmd.env("RUSTFLAGS", "-C target-feature=+crt-static")
                    .arg("--target")
                    .arg(&triple);
            }
            eprintln!("adaptation bench: building the minimal Rust plugins ({dir}): {bins:?}");
            let status = cmd
                .status()
                .unwrap_or_else(|e| panic!("run {}: {e}", cargo.to_string_lossy()));
            assert!(
                status.success(),
                "cargo build of the minimal plugin ({dir}) failed"
            );
        }
        out.join(MIN_PLUGIN)
    };
    let dynamic = build("dynamic", false, &[]);
    let static_ = build("static", true, &[]);
    let small = build("small", true, &SMALL_PROFILE);
    (dynamic, static_, small)
}

/// The release profile for size, as `--config` arguments.
const SMALL_PROFILE: [&str; 8] = [
    "--config",
    "profile.release.opt-level=\"s\"",
    "--config",
    "profile.release.lto=true",
    "--config",
    "profile.release.codegen-units=1",
    "--config",
    "profile.release.panic=\"abort\"",
];

/// The WebAssembly case: start-ups and CreateContainer through one module,
/// on each runtime.
fn wasm_case(progs: &Programs, counts: Counts) -> Pair {
    let args = [
        "-mode".to_string(),
        "wasm".to_string(),
        "-n".to_string(),
        counts.create.to_string(),
        "-warmup".to_string(),
        (counts.create / 10).to_string(),
        "-registrations".to_string(),
        counts.wasm_starts.to_string(),
    ];
    pair(progs, 1, Plugin::Wasm, &args)
}

fn main() {
    // In the echo processes of the raw chain this never returns.
    raw_chain::serve_echo_if_asked();
    let counts = Counts::from_env();
    if std::env::var("NRI_BENCH_ONLY").is_ok_and(|v| v == "wasm") {
        let progs = Programs {
            go_bench: nri_interop::harness_bin(GO_BENCH),
            plugins: BTreeMap::from([(Plugin::Wasm, nri_interop::wasm_plugin(WASM_MODULE))]),
        };
        let load_start = load_average();
        let wasm = wasm_case(&progs, counts);
        let mut d = String::new();
        render_wasm(&mut d, &wasm, counts);
        print!("{d}");
        eprintln!(
            "adaptation bench: only the WebAssembly case (load average at start: {load_start}; \
             at the end: {}); docs/PERFORMANCE.md not written",
            load_average()
        );
        return;
    }
    let load_start = load_average();
    let started = Instant::now();
    // First, while no plugin process runs: the in-process round trips are
    // the measurement most sensitive to other load on the machine.
    let hop = hop::measure(counts.hops);
    let raw = RawChains::measure(counts);

    let go_bench = nri_interop::harness_bin(GO_BENCH);
    let go_plugin = nri_interop::harness_bin(GO_PLUGIN);
    let go_min = build_go_min_plugin(&go_bench, true);
    let go_min_static = build_go_min_plugin(&go_bench, false);
    let (rust_min, rust_min_static, rust_min_small) = build_min_plugins();
    // The same package's plugin on the blocking stub, built alongside.
    let blocking = [&rust_min, &rust_min_static, &rust_min_small]
        .map(|path| path.with_file_name(MIN_BLOCKING_PLUGIN));
    let rss_floor = [
        (Plugin::RustMin, &rust_min),
        (Plugin::RustMinStatic, &rust_min_static),
        (Plugin::RustMinSmall, &rust_min_small),
    ]
    .into_iter()
    .map(|(plugin, path)| {
        let floor = path.with_file_name(RSS_FLOOR);
        (plugin, rss_floor::measure(&floor, RSS_FLOOR_PROCESSES))
    })
    .collect();
    let progs = Programs {
        go_bench,
        plugins: BTreeMap::from([
            (Plugin::RustTest, PathBuf::from(RUST_PLUGIN)),
            (Plugin::GoTest, go_plugin),
            (Plugin::RustMin, rust_min),
            (Plugin::RustMinStatic, rust_min_static),
            (Plugin::RustMinBlocking, blocking[0].clone()),
            (Plugin::RustMinBlockingStatic, blocking[1].clone()),
            (Plugin::RustMinBlockingSmall, blocking[2].clone()),
            (Plugin::RustMinSmall, rust_min_small),
            (Plugin::GoMin, go_min),
            (Plugin::GoMinStatic, go_min_static),
            (Plugin::Wasm, nri_interop::wasm_plugin(WASM_MODULE)),
        ]),
    };

    let n = counts.create_per_round().to_string();
    // The warm-up of a whole case's worth of calls, in every round.
    let warmup = (counts.create / 10).to_string();
    let reg = counts.registrations.to_string();
    let mut creates = Vec::new();
    let mut parked = Vec::new();
    for (plugins, sides) in [
        (1, [Plugin::RustTest, Plugin::GoTest].as_slice()),
        (MANY, &[Plugin::RustTest, Plugin::GoTest]),
        (
            MANY,
            &[Plugin::RustMinBlocking, Plugin::RustMin, Plugin::GoMin],
        ),
    ] {
        for &plugin in sides {
            let args = [
                "-mode",
                "create",
                "-plugins",
                &plugins.to_string(),
                "-n",
                &n,
                "-warmup",
                &warmup,
                "-registrations",
                &reg,
            ];
            creates.push(pair_rounds(
                &progs,
                plugins,
                plugin,
                &strings(&args),
                CREATE_ROUNDS,
                (
                    raw.hops_of(plugin),
                    counts.create_per_round(),
                    counts.create / 10,
                ),
            ));
            if plugins == MANY {
                // Our runtime again, its calls waiting to be woken at once.
                let mut off = strings(&args);
                off.extend(strings(&["-busy-poll-us", "0"]));
                eprintln!(
                    "adaptation bench: {off:?}, {}, our runtime only ...",
                    plugin.label()
                );
                parked.push((plugin, run(&progs, Runtime::Rust, plugin, &off)));
            }
        }
    }
    // The other builds of the minimal plugins (the default build of each is
    // in the CreateContainer cases above), for their idle memory only (read
    // before the measured calls, so few calls; each call's merged adjustment
    // is checked all the same).
    let mut memory = Vec::new();
    for plugin in [
        Plugin::RustMinStatic,
        Plugin::RustMinBlockingStatic,
        Plugin::RustMinSmall,
        Plugin::RustMinBlockingSmall,
        Plugin::GoMinStatic,
    ] {
        let args = [
            "-mode",
            "create",
            "-plugins",
            &MANY.to_string(),
            "-n",
            "100",
            "-warmup",
            "10",
            "-registrations",
            "0",
        ];
        memory.push(pair(&progs, MANY, plugin, &strings(&args)));
    }

    let lifecycles = counts.lifecycles.to_string();
    let lifecycle_warmup = (counts.lifecycles / 10).max(10).to_string();
    let mut cycles = Vec::new();
    for plugin in [Plugin::RustTest, Plugin::GoTest] {
        let args = [
            "-mode",
            "lifecycle",
            "-plugins",
            &MANY.to_string(),
            "-n",
            &lifecycles,
            "-warmup",
            &lifecycle_warmup,
        ];
        cycles.push(pair(&progs, MANY, plugin, &strings(&args)));
    }

    let mut syncs = Vec::new();
    for (containers, rounds) in counts.syncs {
        syncs.extend(sync_case(&progs, containers, rounds));
    }

    // Sustained load: all Rust, then all Go.
    let load_args = strings(&[
        "-mode",
        "load",
        "-plugins",
        &MANY.to_string(),
        "-warmup",
        &lifecycle_warmup,
        "-rate",
        &LOAD_RATE.to_string(),
        "-duration",
        &counts.load_seconds.to_string(),
        "-update-ms",
        &LOAD_UPDATE_MS.to_string(),
    ]);
    eprintln!(
        "adaptation bench: sustained load, {} s per runtime ...",
        counts.load_seconds
    );
    let load = LoadPair {
        rust: run(&progs, Runtime::Rust, Plugin::RustTest, &load_args),
        go: run(&progs, Runtime::Go, Plugin::GoTest, &load_args),
    };
    let wasm = wasm_case(&progs, counts);

    let load_end = load_average();
    let go_info = creates
        .iter()
        .find_map(|p| Some((p.go.go_version.clone()?, p.go.gomaxprocs?)))
        .unwrap_or_else(|| ("unknown Go".into(), 0));
    let results = Results {
        creates,
        parked,
        memory,
        rss_floor,
        cycles,
        syncs,
        hop,
        raw,
        load,
        wasm,
    };
    let doc = render(
        &results,
        &go_info,
        counts,
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

/// Everything measured in one run.
struct Results {
    creates: Vec<Pair>,
    /// The 8-plugin CreateContainer cases on our runtime again, with
    /// `plugin_busy_poll` off.
    parked: Vec<(Plugin, Report)>,
    /// The minimal plugins' other builds, measured for their idle memory.
    memory: Vec<Pair>,
    /// Idle memory of `nri-rs-rss-floor` in each build of the minimal Rust
    /// plugin (keyed by that build).
    rss_floor: BTreeMap<Plugin, Vec<rss_floor::Idle>>,
    cycles: Vec<Pair>,
    syncs: Vec<(usize, Pair)>,
    hop: hop::Hop,
    raw: RawChains,
    load: LoadPair,
    wasm: Pair,
}

/// The sustained-load case: our runtime with our test plugins, the Go
/// runtime with the Go test plugins.
struct LoadPair {
    rust: Report,
    go: Report,
}

/// The raw chains: the CreateContainer cases without any protocol.
struct RawChains {
    /// Bytes, out and back, of each hop of a test plugin's and a minimal
    /// plugin's chain.
    test_hops: Vec<(usize, usize)>,
    min_hops: Vec<(usize, usize)>,
    /// The first and the last of them.
    test_bytes: ((usize, usize), (usize, usize)),
    min_bytes: ((usize, usize), (usize, usize)),
    one_test: hop::Latency,
    many_test: hop::Latency,
    many_min: hop::Latency,
}

impl RawChains {
    fn measure(counts: Counts) -> RawChains {
        use nri_interop::bench::{
            chain_requests, create_request, create_trunk_bytes, min_plugin_reply, test_plugin_reply,
        };
        // Each hop with the bytes of that plugin's call: its request carries
        // the earlier plugins' adjustments, as a runtime sends it.
        let hops = |reply: fn(usize) -> nri_api::CreateContainerResponse| {
            let replies: Vec<_> = (0..MANY).map(reply).collect();
            let requests =
                chain_requests(create_request(1), &replies).expect("the bench replies merge");
            requests
                .iter()
                .zip(&replies)
                .map(|(req, reply)| create_trunk_bytes(req, reply))
                .collect::<Vec<_>>()
        };
        let (test, min) = (hops(test_plugin_reply), hops(min_plugin_reply));
        let (n, warmup) = (counts.create, counts.create / 10);
        eprintln!("adaptation bench: raw chains ...");
        RawChains {
            test_bytes: (test[0], test[MANY - 1]),
            min_bytes: (min[0], min[MANY - 1]),
            one_test: hop::summarize(raw_chain::measure(1, &test, n, warmup)),
            many_test: hop::summarize(raw_chain::measure(MANY, &test, n, warmup)),
            many_min: hop::summarize(raw_chain::measure(MANY, &min, n, warmup)),
            test_hops: test,
            min_hops: min,
        }
    }

    /// The raw chain of a CreateContainer case, measured at the start of
    /// the run.
    fn of(&self, plugins: usize, plugin: Plugin) -> hop::Latency {
        match (plugins, plugin.is_minimal()) {
            (1, _) => self.one_test,
            (_, true) => self.many_min,
            (_, false) => self.many_test,
        }
    }

    /// The hops' bytes of a plugin's chain.
    fn hops_of(&self, plugin: Plugin) -> &[(usize, usize)] {
        match plugin.is_minimal() {
            true => &self.min_hops,
            false => &self.test_hops,
        }
    }

    /// The raw chain a CreateContainer case is held against: the one
    /// measured in its round, else the one at the start of the run.
    fn of_case(&self, p: &Pair) -> hop::Latency {
        p.raw.unwrap_or_else(|| self.of(p.plugins, p.plugin))
    }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

fn median_u64(values: &[u64]) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// The median of the fastest of the scripted chains (blocking reads, the
/// same frames awaited on the event loop, and awaited polling as our
/// runtime polls): the floor of CreateContainer with these plugins.
fn chain_floor(r: &Report) -> Option<f64> {
    [r.scripted_chain, r.event_loop_chain, r.polling_chain]
        .into_iter()
        .flatten()
        .map(|l| l.median_us)
        .reduce(f64::min)
}

fn lat(r: &Report, f: fn(&Report) -> Option<Latency>) -> Latency {
    f(r).unwrap_or_default()
}

/// Whether both runtimes timed registrations in this case.
fn registered(p: &Pair) -> bool {
    p.rust.registration.is_some_and(|r| r.median_us > 0.0)
        && p.go.registration.is_some_and(|r| r.median_us > 0.0)
}

/// Microseconds, whole.
fn us0(us: f64) -> String {
    format!("{us:.0} µs")
}

fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

fn render(
    res: &Results,
    go: &(String, usize),
    counts: Counts,
    load_start: &str,
    load_end: &str,
    took: Duration,
) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "# Performance: nri-rs next to the Go reference\n");
    let _ = writeln!(
        d,
        "Generated by `cargo bench -p nri-interop --bench adaptation` \
         (`interop/benches/adaptation.rs`; runtimes `nri-rs-adaptation-bench` in \
         `interop/src/bin/` and `nri-adaptation-bench` in `interop/harness/cmd/`, the latter \
         on the official `github.com/containerd/nri` v0.12.5). Every Rust/Go ratio below \
         compares figures measured in the same run, one case right after the other. \
         R/G is Rust divided by Go: below 1 means nri-rs is faster or smaller.\n"
    );
    let _ = writeln!(
        d,
        "Elsewhere: what the time of a CreateContainer through 8 plugins is made of \
         ([PERFORMANCE-profile.md](PERFORMANCE-profile.md)), and the latency `nri-runc` and \
         `nri-hostd` add to an OCI runtime's `create`, `start` and `delete` with 0, 1 and 8 \
         plugins ([PERFORMANCE-oci-engines.md](PERFORMANCE-oci-engines.md), \
         `cargo bench -p nri-e2e --bench nri_runc`).\n"
    );
    if counts.quick {
        let _ = writeln!(
            d,
            "**Quick run** (`NRI_BENCH_QUICK=1`): few iterations, only a check that the bench \
             works; the figures are not meant to be quoted.\n"
        );
    }
    let _ = writeln!(d, "## Machine\n");
    let _ = writeln!(d, "* CPUs (nproc): {}", nproc());
    let _ = writeln!(d, "* CPU model: {}", cpu_model());
    let _ = writeln!(d, "* memory: {}", mem_total());
    let _ = writeln!(d, "* kernel: {}", kernel());
    let _ = writeln!(
        d,
        "* load average (1, 5, 15 min) at start: {load_start}; at the end: {load_end}"
    );
    let _ = writeln!(
        d,
        "* runtimes: each in a process of its own. Rust: `nri-adaptation` on a current-thread \
         tokio runtime (one OS thread), its requests made from a spawned task; Go: {}, \
         GOMAXPROCS={}",
        go.0, go.1
    );
    let _ = writeln!(d, "* run time: {:.0} s\n", took.as_secs_f64());
    let _ = writeln!(
        d,
        "When the load average is above the CPU count the machine was shared with other work: \
         absolute figures, and tails most of all, are then noisier than on an idle host. Both \
         runtimes ran under the same conditions, alternating case by case.\n"
    );

    render_targets(&mut d, res);
    render_create(&mut d, res, counts);
    render_memory(&mut d, res);
    render_lifecycle(&mut d, res, counts);
    render_load(&mut d, &res.load, counts);
    render_sync(&mut d, res);
    render_registration(&mut d, res, counts);
    render_hop(&mut d, &res.hop);
    render_wasm(&mut d, &res.wasm, counts);
    d.push_str(PROFILE);
    let _ = writeln!(d, "\n## Reproducing\n");
    let _ = writeln!(
        d,
        "```sh\nCARGO_TARGET_DIR=target cargo bench -p nri-interop --bench adaptation\n\
         NRI_BENCH_QUICK=1 cargo bench -p nri-interop --bench adaptation   # a quick check\n```\n\n\
         Needs the Go toolchain (see `interop/README.md`); `NRI_ADAPTATION_BENCH_ITERS` sets \
         the CreateContainer calls per case, split over its rounds. The command rewrites this file. The full run \
         takes a few minutes on 2 cores after building."
    );
    d
}

fn render_wasm(d: &mut String, p: &Pair, counts: Counts) {
    let _ = writeln!(d, "## A WebAssembly plugin\n");
    let _ = writeln!(
        d,
        "One pre-installed WebAssembly plugin, the same file on both runtimes: `{WASM_MODULE}` \
         of `interop/wasm-plugins` (Go, `GOOS=wasip1 GOARCH=wasm -buildmode=c-shared`, \
         {:.1} MB), which answers CreateContainer with an annotation, a variable, a mount and \
         CPU and memory limits (mode `wasm` of both bench programs). Rust: `nri-wasm` \
         (wasmtime, Cranelift); Go: the reference's wazero. Start-up: {} runtimes started one \
         after the other, each timed from its creation until its start returned with the \
         module loaded, configured and synchronized; ours loads the compiled module from its \
         cache (filled by one unmeasured start), wazero compiles the module at every start. \
         CreateContainer: the first call after the start alone, then {} calls (after {} \
         warm-up).\n",
        std::fs::metadata(nri_interop::wasm_plugin(WASM_MODULE))
            .map_or(0.0, |m| m.len() as f64 / 1e6),
        counts.wasm_starts,
        counts.create,
        counts.create / 10
    );
    let _ = writeln!(
        d,
        "Targets: CreateContainer ≤ {WASM_CREATE_TARGET}× Go (median), start-up ≤ \
         {WASM_STARTUP_TARGET}× Go (median).\n"
    );
    let _ = writeln!(
        d,
        "| | Rust median | p99 | Go median | p99 | median R/G | target |\n|---|---:|---:|---:|---:|---:|---|"
    );
    let (rs, gs) = (lat(&p.rust, |r| r.startup), lat(&p.go, |r| r.startup));
    let (rc, gc) = (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create));
    let us = |v: f64| format!("{v:.0} µs");
    let mut row =
        |name: &str, rust: [String; 2], go: [String; 2], ratio: f64, target: Option<f64>| {
            let target =
                target.map_or_else(String::new, |t| format!("≤ {t} ({})", met(ratio <= t)));
            let [rm, rp] = rust;
            let [gm, gp] = go;
            let _ = writeln!(
                d,
                "| {name} | {rm} | {rp} | {gm} | {gp} | {ratio:.3} | {target} |"
            );
        };
    row(
        "start-up with the plugin",
        [ms(rs.median_us), ms(rs.p99_us)],
        [ms(gs.median_us), ms(gs.p99_us)],
        rs.median_us / gs.median_us,
        Some(WASM_STARTUP_TARGET),
    );
    let (rf, gf) = (
        p.rust.first_create_us.unwrap_or_default(),
        p.go.first_create_us.unwrap_or(f64::NAN),
    );
    row(
        "first CreateContainer",
        [us(rf), String::new()],
        [us(gf), String::new()],
        rf / gf,
        None,
    );
    row(
        "CreateContainer, steady state",
        [us(rc.median_us), us(rc.p99_us)],
        [us(gc.median_us), us(gc.p99_us)],
        rc.median_us / gc.median_us,
        Some(WASM_CREATE_TARGET),
    );
    if let Some(m) = p.rust.module {
        row(
            "the module's two calls alone (nri-wasm, the adaptation's requests)",
            [us(m.median_us), us(m.p99_us)],
            [String::new(), String::new()],
            m.median_us / gc.median_us,
            None,
        );
        if let Some(w) = p.rust.wasm_work {
            row(
                "the work around the two calls that no runtime can skip, alone",
                [us_tenths(w.median_us), us_tenths(w.p99_us)],
                [String::new(), String::new()],
                w.median_us / gc.median_us,
                None,
            );
            row(
                "the two together: a runtime that adds nothing else",
                [us(m.median_us + w.median_us), String::new()],
                [String::new(), String::new()],
                (m.median_us + w.median_us) / gc.median_us,
                None,
            );
        }
        let budget = WASM_CREATE_TARGET * gc.median_us - m.median_us;
        let ours = us_tenths(rc.median_us - m.median_us);
        let _ = if budget < 0.0 {
            writeln!(
                d,
                "\n* The module's own {} per CreateContainer are already above the target \
                 ({} for the whole call). Ours adds {ours} to them (its median less the \
                 module's).",
                us(m.median_us),
                us_tenths(WASM_CREATE_TARGET * gc.median_us),
            )
        } else {
            writeln!(
                d,
                "\n* At the target, a runtime may add {} to the module's own {} per \
                 CreateContainer; ours adds {ours} (its median less the module's).",
                us_tenths(budget),
                us(m.median_us),
            )
        };
    }
    let _ = writeln!(
        d,
        "\nThe plugin subscribes to every event, so each CreateContainer makes two calls into \
         the module on both runtimes: CreateContainer, then ValidateContainerAdjustment with \
         the merged adjustment. A steady-state call is the plugin's own work (the same Go \
         code in both, decoding and encoding protobuf, compiled to WebAssembly) plus what the \
         runtime adds: the requests' encoding, the copies into and out of the module's \
         memory (through its `malloc` and `free`), the adaptation's merge and the validation \
         request. The fourth row times the module alone, in the same run: the same file loaded \
         with `nri-wasm` and configured as the adaptation does, then per container the two \
         calls with the requests the adaptation sends, encoded beforehand: the normalized \
         CreateContainer request, and the validation request with the container, the merged \
         adjustment, the fields' owners and the plugin's name, built by the adaptation's own \
         merge code. That is the plugin's own work, the same on any runtime: its ratio is \
         what a runtime that added nothing at all would reach, and the gap between it and the \
         target is all a runtime may add to reach the target. The row after it times, in the \
         same loop, the work around the calls that any runtime must do and ours does with \
         the same code: normalizing and encoding the CreateContainer request, decoding the \
         reply, merging it, building and encoding the validation request, decoding its \
         reply. Ours \
         runs the module on the task that makes the call, with no hand-over to another \
         thread.\n"
    );
}

/// Microseconds to a tenth (a budget can be small or negative).
fn us_tenths(v: f64) -> String {
    format!("{v:.1} µs")
}

fn render_hop(d: &mut String, hop: &hop::Hop) {
    let _ = writeln!(d, "## One plugin hop against a raw socket pair\n");
    let _ = writeln!(
        d,
        "{} round trips per case (after {} warm-up). One hop is `Plugin.StartContainer` \
         ({} B request, empty reply) from a ttRPC client to a ttRPC server, each on its own \
         mux over one end of a Unix socket pair, in one process; the raw case echoes the same \
         byte counts ({} out, {} back) over a bare socket pair. Rust: nri-ttrpc and nri-mux \
         on a current-thread tokio runtime; Go: ttrpc and the NRI multiplexer of the official \
         module in `nri-wire-bench` ({}, GOMAXPROCS={}).\n",
        hop.iterations,
        hop.iterations / 10,
        hop.request_payload_bytes,
        hop.trunk_bytes.0,
        hop.trunk_bytes.1,
        hop.go.go_version,
        hop.go.gomaxprocs
    );
    let _ = writeln!(
        d,
        "Target: one hop ≤ {HOP_TARGET}× the raw socket pair round trip (median).\n"
    );
    let _ = writeln!(
        d,
        "| | Rust median | p99 | Go median | p99 | median R/G | p99 R/G |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for (name, rust, go) in [
        (
            "ttRPC over mux (one hop)",
            hop.rust_ttrpc_over_mux,
            hop.go.ttrpc_over_mux,
        ),
        ("raw socket pair echo", hop.rust_raw, hop.go.raw),
    ] {
        let _ = writeln!(
            d,
            "| {name} | {:.2} µs | {:.2} µs | {:.2} µs | {:.2} µs | {:.2} | {:.2} |",
            rust.median_us,
            rust.p99_us,
            go.median_us,
            go.p99_us,
            rust.median_us / go.median_us,
            rust.p99_us / go.p99_us
        );
    }
    let (rust, go) = hop.over_raw();
    let _ = writeln!(
        d,
        "\nOne hop over the raw round trip, median: Rust {rust:.2}× ({}), Go {go:.2}×.\n",
        met(rust <= HOP_TARGET)
    );
}

fn render_create(d: &mut String, res: &Results, counts: Counts) {
    let _ = writeln!(d, "## CreateContainer latency\n");
    let _ = writeln!(
        d,
        "{CREATE_ROUNDS} rounds of {} measured calls per case (after {} warm-up calls), each \
         round both runtimes one after the other, which goes first switching from round to \
         round; each row shows the round whose median R/G is the median of the case's rounds \
         (every round's R/G is in the last column), so that one run disturbed by the machine \
         does not decide a row. Every plugin is an external \
         process connected to the runtime's socket, subscribed to CreateContainer only, and \
         answers with one annotation (test plugins: and one environment variable) of its own; \
         the call returns the merged adjustment (checked on every call). Each runtime was \
         measured with the same plugin binary, so a row compares the runtimes alone. Our \
         minimal plugin comes twice, the same handler on each of our stubs: on the blocking \
         stub (`nri-rs-min-blocking-plugin`: one thread, one blocking read and one write per \
         request, which the targets use) and on the async stub (`nri-rs-min-plugin`, a \
         current-thread tokio runtime).\n",
        counts.create_per_round(),
        counts.create / 10
    );
    let _ = writeln!(
        d,
        "Target: Rust/Go ratio ≤ {LATENCY_TARGET} at the median and at p99.\n"
    );
    let _ = writeln!(
        d,
        "The physical limit of each case is its **raw chain**, measured in the same run: one \
         process standing for the runtime and one per plugin, each hop a blocking echo over a \
         Unix socket pair of the bytes the real call puts on the trunk, plugin after plugin, with \
         no protocol at all. Each plugin's request carries the earlier plugins' adjustments, as \
         a runtime sends it, so the requests grow along the chain: with {MANY} test plugins \
         from {} bytes out and {} back at the first hop to {} / {} at the last, with minimal \
         plugins from {} / {} to {} / {}, mux and ttRPC headers included. The raw chains are measured \
         at the start of the run (the table right below) and again at the start of every \
         round of every case, with that case's bytes: the machine's speed drifts over the \
         minutes of a run, by half in the raw chain itself, so each case is held against its \
         own round's (column \"raw chain\"). R/raw and G/raw are each runtime's median over \
         it; target for 8 plugins with our runtime: R/raw ≤ {RAW_CHAIN_TARGET}. Where the time between the two goes (system calls per hop, \
         CPU samples): [PERFORMANCE-profile.md](PERFORMANCE-profile.md).\n",
        res.raw.test_bytes.0 .0,
        res.raw.test_bytes.0 .1,
        res.raw.test_bytes.1 .0,
        res.raw.test_bytes.1 .1,
        res.raw.min_bytes.0 .0,
        res.raw.min_bytes.0 .1,
        res.raw.min_bytes.1 .0,
        res.raw.min_bytes.1 .1,
    );
    let _ = writeln!(
        d,
        "| plugins | raw chain | median | p99 |\n|---:|---|---:|---:|\n\
         | 1 | test plugin bytes | {:.0} µs | {:.0} µs |\n\
         | {MANY} | test plugin bytes | {:.0} µs | {:.0} µs |\n\
         | {MANY} | minimal plugin bytes | {:.0} µs | {:.0} µs |\n",
        res.raw.one_test.median_us,
        res.raw.one_test.p99_us,
        res.raw.many_test.median_us,
        res.raw.many_test.p99_us,
        res.raw.many_min.median_us,
        res.raw.many_min.p99_us,
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | Rust runtime median | p99 | Go runtime median | p99 | median R/G | p99 R/G | raw chain | R/raw | G/raw | target | median R/G of each round |"
    );
    let _ = writeln!(
        d,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for p in &res.creates {
        let (r, g) = (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create));
        let (rm, rp) = (r.median_us / g.median_us, r.p99_us / g.p99_us);
        let raw = res.raw.of_case(p).median_us;
        let (rr, gr) = (r.median_us / raw, g.median_us / raw);
        let raw_target = if p.plugins == MANY {
            format!(", R/raw {}", met(rr <= RAW_CHAIN_TARGET))
        } else {
            String::new()
        };
        let _ = writeln!(
            d,
            "| {} | {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | {raw:.0} µs | {rr:.2} | {gr:.1} | median {}, p99 {}{raw_target} | {} |",
            p.plugins,
            p.plugin.label(),
            r.median_us,
            r.p99_us,
            g.median_us,
            g.p99_us,
            met(rm <= LATENCY_TARGET),
            met(rp <= LATENCY_TARGET),
            p.round_ratios
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    render_create_cpu(d, res);
    render_scripted_chain(d, res);
    render_protocol_work(d, res);
    render_turns(d, res);
    render_busy_poll(d, res);
    let _ = writeln!(
        d,
        "\nAll Rust (our runtime, our plugins) against all Go (Go runtime, Go plugins):\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugins used | Rust median | Rust p99 | Go median | Go p99 | median R/G | p99 R/G | target |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for (plugins, rust_side, go_side, kind) in [
        (1, Plugin::RustTest, Plugin::GoTest, "test"),
        (MANY, Plugin::RustTest, Plugin::GoTest, "test"),
        (MANY, Plugin::RustMinBlocking, Plugin::GoMin, "minimal"),
        (
            MANY,
            Plugin::RustMin,
            Plugin::GoMin,
            "minimal, ours on the async stub",
        ),
    ] {
        let find = |side| {
            res.creates
                .iter()
                .find(|p| p.plugins == plugins && p.plugin == side)
        };
        let (Some(r), Some(g)) = (find(rust_side), find(go_side)) else {
            continue;
        };
        let (rust, go) = (lat(&r.rust, |r| r.create), lat(&g.go, |r| r.create));
        let (rm, rp) = (rust.median_us / go.median_us, rust.p99_us / go.p99_us);
        let _ = writeln!(
            d,
            "| {plugins} | {kind} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | median {}, p99 {} |",
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
        "\nMixed pairings (Rust runtime with Go plugins, Go runtime with Rust plugins) are in \
         the first table: Rust runtime + Go plugins is the \"Rust runtime\" columns of the Go \
         plugin rows, Go runtime + Rust plugins the \"Go runtime\" columns of the Rust plugin \
         rows.\n"
    );
}

/// CPU time per measured CreateContainer of the runtime process and of the
/// plugin processes, from `/proc/<pid>/stat` before and after the measured
/// calls, and what the plugins' share leaves a runtime.
fn render_create_cpu(d: &mut String, res: &Results) {
    let cpu = |r: &Report| (r.runtime_cpu_us_per_call, r.plugins_cpu_us_per_call);
    if !res.creates.iter().any(|p| {
        let (a, b) = cpu(&p.rust);
        a.is_some() && b.is_some()
    }) {
        return;
    }
    let _ = writeln!(
        d,
        "\nCPU time (user and system, all threads) per measured call, from `/proc/<pid>/stat` \
         of the runtime process and of every plugin process, read before and after the \
         measured calls (10 ms ticks, over seconds of calls). The plugins are called one \
         after the other, so a plugin's CPU time lies on the call's critical path, except \
         what a Go plugin does on other threads meanwhile. **Floor R/G** is what our runtime \
         would reach if it took no time at all: the plugins' CPU time in our runtime's run \
         over the Go runtime's median with the same plugins.\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | Rust runtime: runtime CPU | plugins CPU | Go runtime: runtime CPU | plugins CPU | floor R/G |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|");
    let us = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} µs"));
    for p in &res.creates {
        let ((rr, rp), (gr, gp)) = (cpu(&p.rust), cpu(&p.go));
        let go_median = lat(&p.go, |r| r.create).median_us;
        let floor = rp.map_or("–".to_string(), |rp| format!("{:.2}", rp / go_median));
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {floor} |",
            p.plugins,
            p.plugin.label(),
            us(rr),
            us(rp),
            us(gr),
            us(gp),
        );
    }
}

/// CreateContainer through the same plugins behind the smallest possible
/// runtime, against both runtimes, and what each side's CPU time was there.
fn render_scripted_chain(d: &mut String, res: &Results) {
    if !res.creates.iter().any(|p| p.rust.scripted_chain.is_some()) {
        return;
    }
    let _ = writeln!(
        d,
        "
The same plugins behind the smallest runtime possible, measured in the same run by \
         our bench program: as many fresh processes of the same plugin binary with the same \
         configurations, registered by a **scripted runtime** (a bare listener that answers \
         RegisterPlugin and sends Configure and Synchronize as frames encoded in advance), \
         then per call each plugin in turn sent its CreateContainer request encoded in \
         advance, only its stream id written in, each reply read to its end (one read takes \
         what the socket holds) and not decoded: no mux, no ttRPC, no adaptation, no merge. \
         Each plugin's request is the one a runtime sends it, with the earlier plugins' \
         adjustments (recorded in one call before the others, its replies decoded and \
         merged), so a plugin decodes the same request under both runtimes. \
         It runs three times on the same plugins: with **blocking** reads and writes; on the \
         **event loop** (the sockets non-blocking and registered with tokio for reading, as \
         our runtime's are, each reply awaited in `epoll_wait` from a spawned task), the way \
         a runtime that serves other requests while a plugin works has to wait; and on the \
         event loop **polling** for each reply for as long as our runtime does, yielding \
         the CPU between looks as it does (`plugin_busy_poll`, below), before it waits in \
         `epoll_wait`. The fastest of the three medians over the Go runtime's is the **floor R/G**: what a runtime that took \
         no time at all would reach with these plugins, wake-ups and all. The last \
         two columns put the median's gap in time per plugin: what our runtime takes above \
         the floor, and what it could take and still meet R/G ≤ {LATENCY_TARGET}.\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | scripted, blocking: median | p99 | scripted, event loop: median | p99 | scripted, polling: median | p99 | Rust runtime median | Go runtime median | floor R/G | Rust over the floor | ours above the floor, per plugin | room to R/G {LATENCY_TARGET}, per plugin |"
    );
    let _ = writeln!(
        d,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let lat_cells = |l: Option<Latency>| {
        l.map_or(("–".to_string(), "–".to_string()), |l| {
            (us0(l.median_us), us0(l.p99_us))
        })
    };
    for p in &res.creates {
        let Some(floor) = chain_floor(&p.rust) else {
            continue;
        };
        let (r, g) = (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create));
        let (bm, bp) = lat_cells(p.rust.scripted_chain);
        let (em, ep) = lat_cells(p.rust.event_loop_chain);
        let (pm, pp) = lat_cells(p.rust.polling_chain);
        let per_plugin = |us: f64| {
            if us > 0.0 {
                format!("{:.0} µs", us / p.plugins.max(1) as f64)
            } else {
                "none".to_string()
            }
        };
        let _ = writeln!(
            d,
            "| {} | {} | {bm} | {bp} | {em} | {ep} | {pm} | {pp} | {} | {} | {:.2} | {:.2} | {} | {} |",
            p.plugins,
            p.plugin.label(),
            us0(r.median_us),
            us0(g.median_us),
            floor / g.median_us,
            r.median_us / floor,
            per_plugin(r.median_us - floor),
            per_plugin(LATENCY_TARGET * g.median_us - floor),
        );
    }
    let _ = writeln!(
        d,
        "\nCPU time per call in the same runs (as in the CPU table above): our runtime's \
         process against the scripted runtime's in each of its forms, and the plugins' \
         under ours and under the blocking form. What our runtime spends above the chain \
         that waits as it does (polling, or the event loop when polling is off) is the work \
         of the protocol stack itself (mux, ttRPC, encoding, decoding, the adaptation's \
         merge, tasks and timers): the system calls per hop are the same in both \
         (`sendto`, `recvfrom`, and `epoll_wait`: blocking when a reply is waited for, \
         without blocking while it is polled for).\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | our runtime | scripted, blocking | scripted, event loop | scripted, polling | our runtime over the chain waiting alike, per plugin | plugins under ours | plugins under the scripted runtime |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let us = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} µs"));
    for p in &res.creates {
        let r = &p.rust;
        if r.scripted_runtime_cpu_us_per_call.is_none() {
            continue;
        }
        let alike = r
            .polling_runtime_cpu_us_per_call
            .or(r.event_loop_runtime_cpu_us_per_call);
        let above = match (r.runtime_cpu_us_per_call, alike) {
            (Some(ours), Some(floor)) => {
                format!("{:.1} µs", (ours - floor) / p.plugins.max(1) as f64)
            }
            _ => "–".to_string(),
        };
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {above} | {} | {} |",
            p.plugins,
            p.plugin.label(),
            us(r.runtime_cpu_us_per_call),
            us(r.scripted_runtime_cpu_us_per_call),
            us(r.event_loop_runtime_cpu_us_per_call),
            us(r.polling_runtime_cpu_us_per_call),
            us(r.plugins_cpu_us_per_call),
            us(r.scripted_plugins_cpu_us_per_call),
        );
    }
}

/// The scripted polling chain again, doing the protocol's own work: what
/// that work alone costs with each kind of plugin.
fn render_protocol_work(d: &mut String, res: &Results) {
    if !res.creates.iter().any(|p| p.rust.encoding_chain.is_some()) {
        return;
    }
    let _ = writeln!(
        d,
        "\n### The protocol's own work\n\n\
         The scripted runtime's polling form once more on the same plugins, now doing the \
         work of the protocol that no runtime can skip, and nothing else: each plugin's \
         request encoded from the result merged so far (the CreateContainer message, the \
         ttRPC envelope and the frame), each reply decoded and merged into that result \
         (`nri_adaptation::CreateResult`, the merge our runtime does), with blocking-free \
         sockets on the event loop, polling for each reply as our runtime does. No mux or \
         ttRPC machinery, no tasks, no timers. **Its work** is the time per call spent \
         encoding, decoding and merging, timed around that work alone; **added** is its \
         median over the plain polling chain's. Where the added time is many times the \
         work, the plugins answer more slowly while the runtime works between their \
         calls, and every microsecond a runtime spends per hop costs that many at the \
         median. **Its R/G** is its median over the Go runtime's, and the last column its \
         median over the raw chain of the same round. These were measured seconds after \
         our runtime's calls; the targets judge by the same chain measured in turns with \
         our runtime (the table after this one).\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | scripted, polling: median | with the protocol's work: median | its work per call (median) | added | added over the work | runtime CPU per call, without / with the work | Rust runtime median | Go runtime median | its R/G | its median over the raw chain |"
    );
    let _ = writeln!(
        d,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let us = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} µs"));
    for p in &res.creates {
        let r = &p.rust;
        let (Some(enc), Some(work)) = (r.encoding_chain, r.encoding_chain_work) else {
            continue;
        };
        let plain = r.polling_chain.or(r.event_loop_chain);
        let (pm, added, over) = match plain {
            Some(pl) => {
                let added = enc.median_us - pl.median_us;
                let over = match work.median_us > 0.0 {
                    true => format!("{:.1}", added / work.median_us),
                    false => "–".to_string(),
                };
                (us0(pl.median_us), format!("{added:.0} µs"), over)
            }
            None => ("–".to_string(), "–".to_string(), "–".to_string()),
        };
        let plain_cpu = r
            .polling_runtime_cpu_us_per_call
            .or(r.event_loop_runtime_cpu_us_per_call);
        let (rm, gm) = (lat(r, |r| r.create), lat(&p.go, |r| r.create));
        let _ = writeln!(
            d,
            "| {} | {} | {pm} | {} | {:.1} µs | {added} | {over} | {} / {} | {} | {} | {:.2} | {:.2} |",
            p.plugins,
            p.plugin.label(),
            us0(enc.median_us),
            work.median_us,
            us(plain_cpu),
            us(r.encoding_runtime_cpu_us_per_call),
            us0(rm.median_us),
            us0(gm.median_us),
            enc.median_us / gm.median_us,
            enc.median_us / res.raw.of_case(p).median_us,
        );
    }
}

/// The chain doing the protocol's own work over our runtime, both measured
/// in the same turns ([`Report::turns_create`]): the share of our
/// runtime's time that a runtime doing only that work would take at the
/// same moment.
fn protocol_work_share(r: &Report) -> Option<f64> {
    let (ours, chain) = (r.turns_create?, r.turns_encoding_chain?);
    (ours.median_us > 0.0).then(|| chain.median_us / ours.median_us)
}

/// Our runtime and the chain doing the protocol's own work, measured in
/// turns: what the comparison above looks like without the minutes
/// between the two.
fn render_turns(d: &mut String, res: &Results) {
    if !res
        .creates
        .iter()
        .any(|p| protocol_work_share(&p.rust).is_some())
    {
        return;
    }
    let _ = writeln!(
        d,
        "\nThe same chain measured **in turns** with our runtime: after its measured calls our \
         runtime makes as many more, in turns of 50 calls with the chain doing the protocol's \
         work on fresh plugins of the same binary, each side's plugins idle during the other's \
         turn, so that both are measured at the same moments. The table above compares \
         measurements made a few seconds apart, over which this machine's speed can move by \
         half. **Its share** is the chain's median over ours in the turns: the part of our \
         runtime's time that a runtime doing only the protocol's work takes at the same \
         moment. **Its R/G** is our runtime's median R/G (the first table) times that share: \
         the targets use it to say whether a runtime doing only that work would meet them.\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | our runtime, in turns: median | p99 | the protocol's work alone, in turns: median | p99 | its share | ours above it, per plugin | runtime CPU per call, ours / its | plugins CPU per call, under ours / under it | its R/G |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let pair =
        |v: Option<(f64, f64)>| v.map_or("–".to_string(), |(a, b)| format!("{a:.0} / {b:.0} µs"));
    for p in &res.creates {
        let r = &p.rust;
        let (Some(ours), Some(chain), Some(share)) = (
            r.turns_create,
            r.turns_encoding_chain,
            protocol_work_share(r),
        ) else {
            continue;
        };
        let (rm, gm) = (lat(r, |r| r.create), lat(&p.go, |r| r.create));
        let per_plugin = (ours.median_us - chain.median_us) / p.plugins as f64;
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {share:.2} | {per_plugin:.1} µs | {} | {} | {:.2} |",
            p.plugins,
            p.plugin.label(),
            us0(ours.median_us),
            us0(ours.p99_us),
            us0(chain.median_us),
            us0(chain.p99_us),
            pair(r.turns_runtime_cpu_us_per_call),
            pair(r.turns_plugins_cpu_us_per_call),
            rm.median_us / gm.median_us * share,
        );
    }
}

/// Our runtime with `plugin_busy_poll` as it was in the main runs, against
/// the same case with it off.
fn render_busy_poll(d: &mut String, res: &Results) {
    let Some(window) = res
        .creates
        .iter()
        .find_map(|p| p.rust.busy_poll_us)
        .filter(|w| *w > 0.0)
    else {
        return;
    };
    let _ = writeln!(
        d,
        "\n### Polling for replies\n\n\
         A call of our runtime to a plugin polls for the reply for up to {window:.0} µs \
         (`plugin_busy_poll`, the default on a machine with two or more CPUs) before its \
         thread sleeps in `epoll_wait`: the calling task looks at its reply, yields the CPU \
         to any other thread waiting for it and then to tokio, which checks the sockets \
         without blocking before it runs the task again. A reply that arrives meanwhile is taken without the thread being woken; calls to a plugin \
         poll only while most of its recent replies came within the window. The scripted \
         runtime's polling form above polls for every reply. Every Rust-runtime \
         figure above is with polling; here each 8-plugin case is run once more on our \
         runtime alone with it off (`-busy-poll-us 0`), and its runtime's CPU time per call \
         is what the polling costs.\n"
    );
    let _ = writeln!(
        d,
        "| plugins | plugin side | polling: median | p99 | runtime CPU | polling off: median | p99 | runtime CPU | median, polling over off | Go runtime median | R/G polling off |"
    );
    let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let us = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} µs"));
    for (plugin, off) in &res.parked {
        let Some(p) = res
            .creates
            .iter()
            .find(|p| p.plugins == MANY && p.plugin == *plugin)
        else {
            continue;
        };
        let (on, offl, go) = (
            lat(&p.rust, |r| r.create),
            lat(off, |r| r.create),
            lat(&p.go, |r| r.create),
        );
        let _ = writeln!(
            d,
            "| {MANY} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.2} |",
            plugin.label(),
            us0(on.median_us),
            us0(on.p99_us),
            us(p.rust.runtime_cpu_us_per_call),
            us0(offl.median_us),
            us0(offl.p99_us),
            us(off.runtime_cpu_us_per_call),
            on.median_us / offl.median_us,
            us0(go.median_us),
            offl.median_us / go.median_us,
        );
    }
}

/// Idle `VmRSS` and `RssAnon` of every plugin process, by plugin build.
type MemoryByPlugin = BTreeMap<Plugin, Vec<u64>>;

fn plugin_memory(res: &Results) -> (MemoryByPlugin, MemoryByPlugin) {
    let mut rss = MemoryByPlugin::new();
    let mut anon = MemoryByPlugin::new();
    for p in res.creates.iter().chain(&res.memory) {
        let all = rss.entry(p.plugin).or_default();
        all.extend(&p.rust.plugin_rss_kib);
        all.extend(&p.go.plugin_rss_kib);
        let all = anon.entry(p.plugin).or_default();
        all.extend(&p.rust.plugin_anon_kib);
        all.extend(&p.go.plugin_anon_kib);
    }
    (rss, anon)
}

/// A ratio for comparison with `target`: two decimals, or as many more
/// (up to six) as it takes to show a figure above the target as above it
/// (0.2504 against 0.25 is missed, and shows as 0.2504, not 0.25).
fn against(value: f64, target: f64) -> String {
    let mut shown = format!("{value:.2}");
    for digits in 3..=6 {
        if value <= target || shown.parse::<f64>().is_ok_and(|s| s > target) {
            break;
        }
        shown = format!("{value:.digits$}");
    }
    shown
}

/// Median idle `VmRSS` (KiB) of `nri-rs-rss-floor` in the build of
/// `plugin`, if it was measured.
fn floor_rss(res: &Results, plugin: Plugin) -> Option<u64> {
    let values = res.rss_floor.get(&plugin.min_build())?;
    (!values.is_empty()).then(|| median_idle(values, |i| i.vm_rss))
}

/// The median of one figure over measured floor processes.
fn median_idle(values: &[rss_floor::Idle], figure: impl Fn(&rss_floor::Idle) -> u64) -> u64 {
    median_u64(&values.iter().map(figure).collect::<Vec<_>>())
}

/// The floor of each build of the minimal Rust plugin next to the plugin.
fn render_rss_floor(d: &mut String, res: &Results, plugin_rss: &dyn Fn(Plugin) -> u64) {
    if res.rss_floor.is_empty() {
        return;
    }
    let _ = writeln!(
        d,
        "**Floor**: `{RSS_FLOOR}` (`interop/min-plugin/src/floor.rs`), built with the minimal \
         plugin in each of its forms, is a Rust program with no plugin code: it starts, writes \
         one byte to a socket and blocks reading it. Its `VmRSS`, read once the kernel has put \
         it to sleep in that read, {RSS_FLOOR_PROCESSES} processes per build, is what any \
         Rust program of that build pays on this machine (the standard library's start-up, \
         the dynamic loader, the C library); the plugin's figure less the floor is what the \
         plugin's own code and data cost (tokio, the stub, the mux, ttRPC, the messages).\n"
    );
    let _ = writeln!(
        d,
        "| build | floor median VmRSS | floor RssAnon | minimal plugin, async stub: median VmRSS | its own share | blocking stub: median VmRSS | its own share | floor over Go's default build | over Go's static build |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let (go, go_static) = (plugin_rss(Plugin::GoMin), plugin_rss(Plugin::GoMinStatic));
    for (plugin, values) in res.rss_floor.iter().filter(|(_, v)| !v.is_empty()) {
        let floor = median_idle(values, |i| i.vm_rss);
        let ours = plugin_rss(*plugin);
        let blocking = plugin.blocking_of().map_or(0, plugin_rss);
        let _ = writeln!(
            d,
            "| {} | {floor} KiB | {} KiB | {ours} KiB | {} KiB | {blocking} KiB | {} KiB | {:.2} | {:.2} |",
            plugin.label(),
            median_idle(values, |i| i.rss_anon),
            ours.saturating_sub(floor),
            blocking.saturating_sub(floor),
            floor as f64 / go.max(1) as f64,
            floor as f64 / go_static.max(1) as f64,
        );
    }
    let _ = writeln!(d);
}

/// Every target of this document in one table: the figure, the floor (what
/// a runtime that took no time at all would reach, where the run measures
/// it) and whether the target is met, missed, or out of any runtime's
/// reach here because the floor itself is above it.
fn render_targets(d: &mut String, res: &Results) {
    let _ = writeln!(
        d,
        "## Targets
"
    );
    let _ = writeln!(
        d,
        "Every target below, as measured in this run. **Floor** is what a runtime that took no \
         time at all would reach, measured in the same run where the section says how: with \
         the same plugins behind a scripted runtime (CreateContainer, registration, \
         Synchronize), the module's own calls and the work around them that no runtime can \
         skip (WebAssembly). For a plugin's idle memory the floor is a program of the same \
         build with no plugin code at all (\"Idle plugin memory\"). Where the floor is above \
         the target, no runtime can meet the target with those plugins on this machine (no \
         plugin of that build, for memory). Our minimal plugin in these rows is the smallest \
         and quickest our library makes, on the blocking stub (`nri-rs-min-blocking-plugin`); \
         the same plugin on the async stub (`nri-rs-min-plugin`) is measured in the same \
         cases, and its figures are in each section's tables. A CreateContainer row (over Go's \
         runtime or over the raw chain) that misses says so with the reason when a runtime \
         that does only the protocol's own work (encoding, decoding, merging, measured in turns \
         with our runtime: our runtime's figure times that runtime's share of our time at the \
         same moments) misses it too.\n"
    );
    let _ = writeln!(d, "| figure | target | measured | floor | verdict |");
    let _ = writeln!(d, "|---|---|---:|---:|---|");
    // Every target is an upper bound.
    // `work`: what a runtime doing only the protocol's own work measured
    // (CreateContainer rows).
    let mut row = |figure: String,
                   target: f64,
                   value: f64,
                   floor: Option<f64>,
                   work: Option<f64>| {
        let verdict = if value <= target {
            "met".to_string()
        } else if floor.is_some_and(|f| f > target) {
            "missed: the floor is above the target".to_string()
        } else if let Some(w) = work.filter(|w| *w > target) {
            format!(
                "missed: a runtime doing only the protocol's own work, measured in turns with ours, comes to {w:.2} (\"The protocol's own work\")"
            )
        } else {
            "missed".to_string()
        };
        let floor = floor.map_or("–".to_string(), |f| against(f, target));
        let value = against(value, target);
        let _ = writeln!(
            d,
            "| {figure} | ≤ {target} | {value} | {floor} | {verdict} |"
        );
    };
    let targeted = |p: &&Pair| p.plugins == MANY && p.plugin.in_targets();
    for p in res.creates.iter().filter(targeted) {
        let (r, g) = (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create));
        let chain = chain_floor(&p.rust);
        let ratio = r.median_us / g.median_us;
        let floor = chain.map(|c| c / g.median_us);
        let work = protocol_work_share(&p.rust).map(|w| ratio * w);
        row(
            format!(
                "CreateContainer, {MANY} plugins, {}: median R/G",
                p.plugin.label()
            ),
            LATENCY_TARGET,
            ratio,
            floor,
            work,
        );
    }
    for p in res.creates.iter().filter(targeted) {
        let r = lat(&p.rust, |r| r.create);
        let raw = res.raw.of_case(p).median_us;
        let ratio = r.median_us / raw;
        let floor = chain_floor(&p.rust).map(|c| c / raw);
        let work = protocol_work_share(&p.rust).map(|w| ratio * w);
        row(
            format!(
                "CreateContainer, {MANY} plugins, {}: our runtime over the raw chain",
                p.plugin.label()
            ),
            RAW_CHAIN_TARGET,
            ratio,
            floor,
            work,
        );
    }
    let (hop, _) = res.hop.over_raw();
    row(
        "one hop over the raw socket pair".to_string(),
        HOP_TARGET,
        hop,
        None,
        None,
    );
    let sync = |rust: bool| {
        res.syncs
            .iter()
            .find(|(n, p)| *n >= 10_000 && p.plugin.is_rust() == rust)
            .map(|(_, p)| p)
    };
    if let (Some(r), Some(g)) = (sync(true), sync(false)) {
        let go = lat(&g.go, |r| r.sync).median_us;
        let ratio = lat(&r.rust, |r| r.sync).median_us / go;
        let floor = r.rust.sync_scripted.map(|c| c.median_us / go);
        row(
            "Synchronize of 10,000 containers, all Rust against all Go".to_string(),
            SYNC_TARGET,
            ratio,
            floor,
            None,
        );
    }
    for p in res
        .creates
        .iter()
        .filter(|p| registered(p) && p.plugin.in_targets())
    {
        let (r, g) = (
            lat(&p.rust, |r| r.registration),
            lat(&p.go, |r| r.registration),
        );
        let ratio = r.median_us / g.median_us;
        let floor = p.rust.plugin_scripted.map(|c| c.median_us / g.median_us);
        row(
            format!(
                "registration, {}-plugin case, {}: median R/G",
                p.plugins,
                p.plugin.label()
            ),
            REGISTRATION_TARGET,
            ratio,
            floor,
            None,
        );
    }
    let (rss, _) = plugin_memory(res);
    let med = |side: Plugin| median_u64(rss.get(&side).map_or(&[], Vec::as_slice));
    // Our minimal plugin is the smallest our library makes: on the blocking
    // stub (the async stub's is in the memory section).
    for (rust, go, what) in [
        (
            Plugin::RustMinBlocking,
            Plugin::GoMin,
            "each toolchain's default build",
        ),
        (
            Plugin::RustMinBlockingStatic,
            Plugin::GoMin,
            "ours static as shipped, Go's default build",
        ),
        (
            Plugin::RustMinBlockingSmall,
            Plugin::GoMinStatic,
            "both static, ours built for size",
        ),
    ] {
        if !rss.contains_key(&rust) || !rss.contains_key(&go) {
            continue;
        }
        let ratio = med(rust) as f64 / med(go).max(1) as f64;
        let floor = floor_rss(res, rust).map(|f| f as f64 / med(go).max(1) as f64);
        row(
            format!("idle minimal plugin VmRSS, {what}: R/G"),
            MEMORY_TARGET,
            ratio,
            floor,
            None,
        );
    }
    let p = &res.wasm;
    let (rs, gs) = (lat(&p.rust, |r| r.startup), lat(&p.go, |r| r.startup));
    let (rc, gc) = (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create));
    if gs.median_us > 0.0 && gc.median_us > 0.0 {
        let startup = rs.median_us / gs.median_us;
        row(
            "WebAssembly plugin, start-up: median R/G".to_string(),
            WASM_STARTUP_TARGET,
            startup,
            None,
            None,
        );
        let create = rc.median_us / gc.median_us;
        // The module's own two calls and the work no runtime can skip.
        let floor = p
            .rust
            .module
            .zip(p.rust.wasm_work)
            .map(|(m, w)| (m.median_us + w.median_us) / gc.median_us);
        row(
            "WebAssembly plugin, CreateContainer: median R/G".to_string(),
            WASM_CREATE_TARGET,
            create,
            floor,
            None,
        );
    }
    let _ = writeln!(d);
}

fn render_memory(d: &mut String, res: &Results) {
    let _ = writeln!(d, "## Idle plugin memory\n");
    let _ = writeln!(
        d,
        "`VmRSS` from `/proc/<pid>/status` of each plugin process, 200 ms after every plugin's \
         adjustment first showed in a CreateContainer reply (registered, configured, \
         synchronized, idle), before the measured calls. Median over all plugin processes of \
         that kind in the run (both runtimes). The minimal plugins compare like with like: \
         each is the smallest plugin its library makes possible (connect, register, answer \
         CreateContainer with one annotation). Ours comes twice: on the async stub \
         (`nri-rs-min-plugin`, a current-thread tokio runtime) and on the blocking stub \
         (`nri-rs-min-blocking-plugin`, `nri_stub::blocking`: the same handler served on the \
         main thread, no async runtime), the smaller, which the targets use. The test plugins carry a JSON configuration, an \
         event log and every handler. Ours installs no subscriber and builds `tracing` with \
         `release_max_level_off`, so it carries no log events (Go's logs to its standard \
         error through logrus, as the official stub does). The bench builds the minimal plugins in several forms: \
         ours from its own package (`interop/min-plugin`, so it gets only the dependency \
         features it asks for, as a plugin author's crate does; the one on the blocking stub \
         without default features, so that it depends on `nri-stub` without its `async` and \
         no tokio is built into it) with the default release \
         profile, dynamically linked and static (`-C target-feature=+crt-static`, as \
         `deploy/build-images` builds the plugins it ships), and static with a release \
         profile for size; Go's as `go build` makes it (linked with the C library through \
         cgo, as the reference's Makefile builds its plugins) and with `CGO_ENABLED=0` \
         (static).\n"
    );
    let _ = writeln!(d, "Target: Rust plugin ≤ {MEMORY_TARGET}× the Go plugin.\n");
    let (rss, anon) = plugin_memory(res);
    let _ = writeln!(
        d,
        "| plugin | processes | median VmRSS | min | max | median RssAnon |\n|---|---:|---:|---:|---:|---:|"
    );
    for (side, values) in &rss {
        let _ = writeln!(
            d,
            "| {} | {} | {} KiB | {} KiB | {} KiB | {} KiB |",
            side.label(),
            values.len(),
            median_u64(values),
            values.iter().min().copied().unwrap_or(0),
            values.iter().max().copied().unwrap_or(0),
            median_u64(anon.get(side).map_or(&[], Vec::as_slice)),
        );
    }
    let med = |side: Plugin| median_u64(rss.get(&side).map_or(&[], Vec::as_slice));
    let med_anon = |side: Plugin| median_u64(anon.get(&side).map_or(&[], Vec::as_slice));
    let _ = writeln!(d);
    render_rss_floor(d, res, &med);
    for (rust, go, what) in [
        (
            Plugin::RustMinBlocking,
            Plugin::GoMin,
            "minimal plugins, each as its toolchain builds it by default (dynamically linked), \
             ours on the blocking stub",
        ),
        (
            Plugin::RustMin,
            Plugin::GoMin,
            "the same, ours on the async stub",
        ),
        (
            Plugin::RustMinBlockingStatic,
            Plugin::GoMinStatic,
            "minimal plugins, both static, default release profile, ours on the blocking stub",
        ),
        (
            Plugin::RustMinStatic,
            Plugin::GoMinStatic,
            "the same, ours on the async stub",
        ),
        (
            Plugin::RustMinBlockingStatic,
            Plugin::GoMin,
            "minimal plugins, ours static as shipped (default release profile) against Go's \
             default build, ours on the blocking stub",
        ),
        (
            Plugin::RustMinStatic,
            Plugin::GoMin,
            "the same, ours on the async stub",
        ),
        (
            Plugin::RustMinBlockingSmall,
            Plugin::GoMinStatic,
            "minimal plugins, both static, ours built for size, on the blocking stub",
        ),
        (
            Plugin::RustMinSmall,
            Plugin::GoMinStatic,
            "the same, ours on the async stub",
        ),
        (Plugin::RustTest, Plugin::GoTest, "test plugins"),
    ] {
        if !rss.contains_key(&rust) || !rss.contains_key(&go) {
            continue;
        }
        let ratio = med(rust) as f64 / med(go).max(1) as f64;
        let anon_ratio = med_anon(rust) as f64 / med_anon(go).max(1) as f64;
        let _ = writeln!(
            d,
            "* {what}: VmRSS Rust/Go **{}×** — target ≤ {MEMORY_TARGET}×: **{}**; \
             RssAnon Rust/Go {anon_ratio:.2}×",
            against(ratio, MEMORY_TARGET),
            met(ratio <= MEMORY_TARGET)
        );
    }
    d.push_str(MEMORY_NOTES);

    let _ = writeln!(d, "\n## Runtime memory with {MANY} plugins\n");
    let _ = writeln!(
        d,
        "`VmRSS` of the runtime process (the bench program holding the adaptation): with {MANY} \
         plugins connected and idle (read with the plugins' figures above), and again after the \
         measured CreateContainer calls. Each bench program is a small process around its \
         adaptation, so the figure is the adaptation plus a process's baseline.\n"
    );
    let _ = writeln!(
        d,
        "| plugins used | Rust runtime, connected | after calls | Go runtime, connected | after calls | R/G connected | R/G after | RssAnon connected, Rust / Go |"
    );
    let _ = writeln!(d, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for p in res
        .creates
        .iter()
        .filter(|p| p.plugins == MANY && p.plugin != Plugin::RustMinSmall)
    {
        let (rc, ra) = (
            p.rust.runtime_rss_kib.unwrap_or(0),
            p.rust.runtime_rss_after_kib.unwrap_or(0),
        );
        let (gc, ga) = (
            p.go.runtime_rss_kib.unwrap_or(0),
            p.go.runtime_rss_after_kib.unwrap_or(0),
        );
        let _ = writeln!(
            d,
            "| {} | {rc} KiB | {ra} KiB | {gc} KiB | {ga} KiB | {:.2} | {:.2} | {} / {} KiB |",
            p.plugin.label(),
            rc as f64 / gc.max(1) as f64,
            ra as f64 / ga.max(1) as f64,
            p.rust.runtime_anon_kib.unwrap_or(0),
            p.go.runtime_anon_kib.unwrap_or(0),
        );
    }
    let _ = writeln!(d);
}

fn render_lifecycle(d: &mut String, res: &Results, counts: Counts) {
    let _ = writeln!(d, "## Container lifecycle throughput\n");
    let _ = writeln!(
        d,
        "{} container lifecycles per case (after {} warm-up ones), one after the other: \
         CreateContainer (the merged adjustment checked), StartContainer, StopContainer, \
         RemoveContainer, through {MANY} test plugins subscribed to these four events. \
         Throughput is lifecycles divided by the wall time of the measured ones; latency is \
         one whole lifecycle.\n",
        counts.lifecycles,
        (counts.lifecycles / 10).max(10)
    );
    let _ = writeln!(
        d,
        "| plugin side | Rust runtime | Go runtime | R/G throughput | Rust median | p99 | Go median | p99 |"
    );
    let _ = writeln!(d, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for p in &res.cycles {
        let (rt, gt) = (
            p.rust.lifecycles_per_s.unwrap_or(0.0),
            p.go.lifecycles_per_s.unwrap_or(0.0),
        );
        let (rl, gl) = (lat(&p.rust, |r| r.lifecycle), lat(&p.go, |r| r.lifecycle));
        let _ = writeln!(
            d,
            "| {} | {rt:.0}/s | {gt:.0}/s | {:.2} | {} | {} | {} | {} |",
            p.plugin.label(),
            rt / gt.max(f64::MIN_POSITIVE),
            ms(rl.median_us),
            ms(rl.p99_us),
            ms(gl.median_us),
            ms(gl.p99_us),
        );
    }
    let find = |side| res.cycles.iter().find(|p| p.plugin == side);
    if let (Some(r), Some(g)) = (find(Plugin::RustTest), find(Plugin::GoTest)) {
        let (rt, gt) = (
            r.rust.lifecycles_per_s.unwrap_or(0.0),
            g.go.lifecycles_per_s.unwrap_or(0.0),
        );
        let _ = writeln!(
            d,
            "\nAll Rust against all Go: **{rt:.0} against {gt:.0} lifecycles/s ({:.2}×)**.\n",
            rt / gt.max(f64::MIN_POSITIVE)
        );
    }
}

fn render_load(d: &mut String, load: &LoadPair, counts: Counts) {
    let _ = writeln!(d, "## Sustained load\n");
    let _ = writeln!(
        d,
        "Container lifecycles (as above) started at a fixed rate of {LOAD_RATE} per second for \
         {} s, one at a time, through {MANY} test plugins subscribed to the four container events, \
         while each plugin sends an unsolicited UpdateContainers (a CPU-shares change) every \
         {LOAD_UPDATE_MS} ms: {} updates per second in all. Each lifecycle is timed from its \
         scheduled start, so a late start counts in its latency. All Rust (our runtime, our test \
         plugins) against all Go (Go runtime, Go test plugins), one after the other; latency per \
         5-second window, and the runtime's `VmRSS` after the warm-up and at the end.\n",
        counts.load_seconds,
        MANY * 1000 / LOAD_UPDATE_MS,
    );
    let _ = writeln!(
        d,
        "| window | Rust lifecycles | Rust median | p99 | max | Go lifecycles | Go median | p99 | max |"
    );
    let _ = writeln!(d, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let windows = load.rust.load_windows.len().max(load.go.load_windows.len());
    for w in 0..windows {
        let cell = |r: &Report| {
            r.load_windows.get(w).map_or_else(
                || "| – | – | – | –".to_owned(),
                |x| {
                    format!(
                        "| {} | {} | {} | {}",
                        x.count,
                        ms(x.median_us),
                        ms(x.p99_us),
                        ms(x.max_us)
                    )
                },
            )
        };
        let start = load
            .rust
            .load_windows
            .get(w)
            .or_else(|| load.go.load_windows.get(w))
            .map_or(0, |x| x.start_s);
        let _ = writeln!(
            d,
            "| {start}–{} s {} {} |",
            start + 5,
            cell(&load.rust),
            cell(&load.go)
        );
    }
    let (rl, gl) = (
        lat(&load.rust, |r| r.lifecycle),
        lat(&load.go, |r| r.lifecycle),
    );
    let _ = writeln!(
        d,
        "\n| | Rust | Go | R/G |\n|---|---:|---:|---:|\n\
         | lifecycle median, whole run | {} | {} | {:.2} |\n\
         | lifecycle p99, whole run | {} | {} | {:.2} |\n\
         | lifecycles started late | {} | {} | |\n\
         | unsolicited updates received | {} | {} | |\n\
         | runtime `VmRSS` after warm-up | {} KiB | {} KiB | {:.2} |\n\
         | runtime `VmRSS` at the end | {} KiB | {} KiB | {:.2} |\n\
         | growth | {:+} KiB | {:+} KiB | |\n",
        ms(rl.median_us),
        ms(gl.median_us),
        rl.median_us / gl.median_us.max(f64::MIN_POSITIVE),
        ms(rl.p99_us),
        ms(gl.p99_us),
        rl.p99_us / gl.p99_us.max(f64::MIN_POSITIVE),
        load.rust.load_late.unwrap_or(0),
        load.go.load_late.unwrap_or(0),
        load.rust.updates_received.unwrap_or(0),
        load.go.updates_received.unwrap_or(0),
        load.rust.runtime_rss_kib.unwrap_or(0),
        load.go.runtime_rss_kib.unwrap_or(0),
        ratio_kib(load.rust.runtime_rss_kib, load.go.runtime_rss_kib),
        load.rust.runtime_rss_after_kib.unwrap_or(0),
        load.go.runtime_rss_after_kib.unwrap_or(0),
        ratio_kib(
            load.rust.runtime_rss_after_kib,
            load.go.runtime_rss_after_kib
        ),
        growth(&load.rust),
        growth(&load.go),
    );
}

/// Ratio of two sizes, 0 when either is missing.
fn ratio_kib(a: Option<u64>, b: Option<u64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => a as f64 / b as f64,
        _ => 0.0,
    }
}

/// The runtime's `VmRSS` at the end of the load minus at its start, in KiB.
fn growth(r: &Report) -> i64 {
    let kib = |v: Option<u64>| i64::try_from(v.unwrap_or(0)).unwrap_or(i64::MAX);
    kib(r.runtime_rss_after_kib) - kib(r.runtime_rss_kib)
}

fn render_sync(d: &mut String, res: &Results) {
    let _ = writeln!(d, "## Synchronize of a large table\n");
    let _ = writeln!(
        d,
        "The runtime's table holds N containers, ten per pod, each with four annotations of \
         1 KiB (4 KiB of annotation values per container). A minimal plugin is started and \
         the table is offered to it; at these sizes the request exceeds the 4 MiB message \
         limit, so both runtimes split it into several Synchronize messages and the plugin's \
         stub collects them. \"In the runtime\" is the runtime's synchronize hook (offering \
         the table to the plugin until its last reply), \"from start\" is from starting the \
         plugin process to the end of that hook (process start, connection, registration, \
         Configure included). One plugin per round, median and p99 (nearest rank) over the \
         rounds; the request timeout is raised to 120 s on both sides.\n"
    );
    let _ = writeln!(
        d,
        "The table has many pods on purpose: when it splits a table that has a pod, the Go \
         reference computes the pods per message by scaling, and with a single pod that comes \
         out as zero pods per message, which never finishes (decision [9]); with 100 and \
         1,000 pods it progresses.\n"
    );
    let _ = writeln!(
        d,
        "| containers | request size | plugin | Rust runtime, in the runtime | from start | Go runtime, in the runtime | from start | R/G |"
    );
    let _ = writeln!(d, "|---:|---:|---|---:|---:|---:|---:|---:|");
    for (containers, p) in &res.syncs {
        let (r, g) = (lat(&p.rust, |r| r.sync), lat(&p.go, |r| r.sync));
        let (rs, gs) = (
            lat(&p.rust, |r| r.sync_from_start),
            lat(&p.go, |r| r.sync_from_start),
        );
        let _ = writeln!(
            d,
            "| {containers} ({} pods) | {:.1} MB | {} | {} (p99 {}) | {} | {} (p99 {}) | {} | {:.2} |",
            p.rust.pods.unwrap_or(0),
            p.rust.sync_bytes.unwrap_or(0) as f64 / 1e6,
            p.plugin.label(),
            ms(r.median_us),
            ms(r.p99_us),
            ms(rs.median_us),
            ms(g.median_us),
            ms(g.p99_us),
            ms(gs.median_us),
            r.median_us / g.median_us,
        );
    }
    let cpu = |r: &Report| (r.sync_runtime_cpu_us, r.sync_plugin_cpu_us);
    if res.syncs.iter().any(|(_, p)| cpu(&p.rust).1.is_some()) {
        let _ = writeln!(
            d,
            "\nCPU time (user and system, all threads) per round, from `/proc/<pid>/stat`: of \
             the runtime process over the round, and of the plugin process from its start to \
             its completed Synchronize (its process start included). Our plugins answer each \
             message of a split table on arrival and decode it on a thread of their own while \
             the runtime sends the next, so their CPU time overlaps with the runtime's. \
             **Scripted runtime**: the same table offered to as many fresh processes of the same \
             plugin by our bench program playing a runtime that takes no time: a bare listener \
             that registers the plugin and sends the Synchronize messages encoded in advance, \
             split as our runtime splits them, with blocking calls, reading each reply without \
             decoding it; timed from its first message to the last reply. **Floor R/G** is its \
             median over the Go runtime's median with the same plugin: what a runtime that took \
             no time at all would reach.\n"
        );
        let _ = writeln!(
            d,
            "| containers | plugin | Rust runtime: runtime CPU | plugin CPU | Go runtime: runtime CPU | plugin CPU | scripted runtime | floor R/G |"
        );
        let _ = writeln!(d, "|---:|---|---:|---:|---:|---:|---:|---:|");
        let ms_or = |v: Option<f64>| v.map_or("–".to_string(), ms);
        for (containers, p) in &res.syncs {
            let ((rr, rp), (gr, gp)) = (cpu(&p.rust), cpu(&p.go));
            let go_median = lat(&p.go, |r| r.sync).median_us;
            let scripted = p.rust.sync_scripted.map(|c| c.median_us);
            let floor = scripted.map_or("–".to_string(), |c| format!("{:.2}", c / go_median));
            let _ = writeln!(
                d,
                "| {containers} | {} | {} | {} | {} | {} | {} | {floor} |",
                p.plugin.label(),
                ms_or(rr),
                ms_or(rp),
                ms_or(gr),
                ms_or(gp),
                ms_or(scripted),
            );
        }
    }
    let _ = writeln!(
        d,
        "\nAll Rust (our runtime, our plugin) against all Go (Go runtime, Go plugin), in the \
         runtime, median. Target for 10,000 containers: R/G ≤ {SYNC_TARGET}. Floor R/G: our \
         plugin behind the scripted runtime, over the Go median.\n"
    );
    let _ = writeln!(
        d,
        "| containers | Rust | Go | R/G | floor R/G | target |\n|---:|---:|---:|---:|---:|---|"
    );
    let containers: Vec<usize> = res.syncs.iter().map(|(c, _)| *c).collect();
    let mut seen = Vec::new();
    for c in containers {
        if seen.contains(&c) {
            continue;
        }
        seen.push(c);
        let find = |rust: bool| {
            res.syncs
                .iter()
                .find(|(n, p)| *n == c && p.plugin.is_rust() == rust)
                .map(|(_, p)| p)
        };
        let (Some(r), Some(g)) = (find(true), find(false)) else {
            continue;
        };
        let (rust, go) = (lat(&r.rust, |r| r.sync), lat(&g.go, |r| r.sync));
        let ratio = rust.median_us / go.median_us;
        let floor = r.rust.sync_scripted.map_or("–".to_string(), |c| {
            format!("{:.2}", c.median_us / go.median_us)
        });
        let target = if c >= 10_000 {
            met(ratio <= SYNC_TARGET)
        } else {
            ""
        };
        let _ = writeln!(
            d,
            "| {c} | {} | {} | {ratio:.2} | {floor} | {target} |",
            ms(rust.median_us),
            ms(go.median_us),
        );
    }
    let rounds: Vec<String> = res
        .syncs
        .iter()
        .filter(|(_, p)| p.plugin.is_rust())
        .map(|(c, p)| format!("{} for {c}", p.rust.iterations))
        .collect();
    let _ = writeln!(
        d,
        "\nRounds per case: {}, in {SYNC_RUNS} runs of each runtime and plugin, pooled: each \
         run of all Rust right before or after one of all Go (which goes first switching from \
         run to run), the mixed pairs before or after those two.\n",
        rounds.join(", ")
    );
    let _ = writeln!(
        d,
        "Where a split table's time went, and what was cut (profiled with `perf record \
         --call-graph dwarf` on `nri-rs-adaptation-bench -mode sync -containers 10000`, \
         system calls counted with `strace -f`):\n\n\
         * **Copies on the way in.** Each message of 4 MiB reached the plugin's decoder through \
         three buffers: the mux read each frame into one of its own, and ttRPC copied the \
         message's two frames (a first frame of 4 KiB, as Go peers need, and the rest) into \
         another, fresh memory that the kernel had to supply page by page. That copy and its \
         page faults were about 40 % of the samples of the plugin's main thread, and clearing \
         the mux's growing buffers about 20 %. Now the mux reads a frame into one buffer with \
         the short frame before it on the same connection while that one waits unread, and \
         ttRPC takes a message that lies whole in one received piece as a slice of it: the \
         bytes are copied once, from the socket.\n\
         * **The decoding thread's heap.** glibc gives every thread but the main one a heap of \
         its own and opens it for writing as allocations reach its end, a page and an \
         `mprotect` call at a time: 6,930 calls for a table of 10,000 containers. The stub \
         now opens room for each message's decoded size in large steps before decoding it: \
         465 calls. What remains of the decoding thread's time is mostly the kernel supplying \
         fresh pages for the decoded strings (about half of its samples) and allocating them.\n\
         * **Measuring.** The runtime measured each container's encoded length three times \
         (to plan the split, for the message's length, for each entry's length prefix); now \
         once.\n\n\
         By hand, four alternating runs of `-mode sync -containers 10000 -rounds 9` of the \
         previous and the present build (runtime and minimal plugin both), medians of each \
         run: our runtime 102, 106, 125 and 138 ms before, 84, 88, 91 and 106 ms after; the \
         scripted runtime with the same plugin 93 to 125 ms before, 76 to 91 ms after; the \
         plugin's CPU time 114 to 166 ms before, 90 to 110 ms after.\n"
    );
}

fn render_registration(d: &mut String, res: &Results, counts: Counts) {
    let _ = writeln!(d, "## Plugin registration\n");
    let _ = writeln!(
        d,
        "{} plugins per case, one at a time, in each of the case's {CREATE_ROUNDS} rounds (so \
         {} per case and runtime, pooled): from starting the plugin process to the runtime's \
         end of its Synchronize (empty pod and container lists), so the figure includes the \
         plugin's process start, connection, RegisterPlugin, Configure and Synchronize. \
         Measured in every CreateContainer case (before the latency plugins start).\n",
        counts.registrations,
        counts.registrations * CREATE_ROUNDS
    );
    let _ = writeln!(
        d,
        "Target: Rust/Go ratio ≤ {REGISTRATION_TARGET} at the median.\n\n\
         Part of every registration is the plugin's own, and our bench program times it \
         in the same run, with as many processes of the same plugin binary, interleaved with \
         its own registrations so that a slow stretch of the machine falls on all alike: \
         after each registration by our runtime, one start to connect and one registration \
         by the scripted runtime, each 50 ms after the one before. **Start to connect**: from starting the \
         process until it connects to a socket that a bare listener accepts on. **Scripted \
         runtime**: the whole registration against a runtime that takes no time: a bare \
         listener that answers RegisterPlugin and sends Configure and Synchronize as frames \
         encoded in advance, reading the plugin's replies without decoding more than their \
         headers (no mux, no ttRPC, no adaptation). **Floor R/G** is the scripted runtime's \
         median over the Go runtime's: the ratio a runtime that took no time at all would \
         reach with this plugin.\n"
    );
    let _ = writeln!(
        d,
        "| case | plugin side | Rust runtime median | p99 | Go runtime median | p99 | median R/G | start to connect | scripted runtime | floor R/G | target |"
    );
    let _ = writeln!(d, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for p in res.creates.iter().filter(|p| registered(p)) {
        let (r, g) = (
            lat(&p.rust, |r| r.registration),
            lat(&p.go, |r| r.registration),
        );
        let connect = p
            .rust
            .plugin_connect
            .map_or_else(|| "–".to_string(), |c| ms(c.median_us));
        let (scripted, floor) = match p.rust.plugin_scripted {
            Some(c) => (ms(c.median_us), format!("{:.2}", c.median_us / g.median_us)),
            None => ("–".to_string(), "–".to_string()),
        };
        let ratio = r.median_us / g.median_us;
        let _ = writeln!(
            d,
            "| {}-plugin case | {} | {} | {} | {} | {} | {ratio:.2} | {connect} | {scripted} | {floor} | {} |",
            p.plugins,
            p.plugin.label(),
            ms(r.median_us),
            ms(r.p99_us),
            ms(g.median_us),
            ms(g.p99_us),
            met(ratio <= REGISTRATION_TARGET),
        );
    }
    let _ = writeln!(d);
}

/// What the idle plugin memory is made of (measured apart, see the text).
const MEMORY_NOTES: &str = "
What the figures are made of, from `/proc/<pid>/smaps` of minimal plugins (measured \
apart on the same machine, connected to our runtime and answering calls; the builds are the \
bench's):

| | Rust, dynamic | Rust, static | Rust, blocking stub, dynamic | Rust, blocking stub, static | Go, static |
|---|---:|---:|---:|---:|---:|
| the program's own file pages (text, rodata, data) | 1,220 KiB (2.1 MB binary) | 2,136 KiB (3.1 MB binary, the parts of glibc it uses included) | 572 KiB (0.9 MB binary) | 1,328 KiB (1.9 MB binary) | 5,988 KiB (10.2 MB binary) |
| libc, ld.so, libgcc_s file pages | 1,588 KiB | – | 1,632 KiB | – | – |
| anonymous (`RssAnon`: heap, stacks, runtime) | 280 KiB | 236 KiB | 144 KiB | 100 KiB | about 1,500 KiB |
| threads | 1 | 1 | 1 | 1 | 5 |

* The Rust plugin's private memory is small: one thread (a current-thread tokio runtime \
  spawns no worker threads, and the stub does no blocking file work, so no blocking-pool \
  thread and no extra glibc malloc arena exists), a heap of about 150 KiB. `RssAnon` is \
  what each more plugin process really costs; Rust needs about a sixth of Go's.
* Most of a Rust plugin's `VmRSS` is file pages that the kernel maps in whole (fault-around \
  maps up to 64 KiB of already cached file around each touched page): practically the whole \
  text of the binary (all 1,672 KiB of the static build's text are resident, so every \
  KiB of code a plugin carries costs a KiB of `VmRSS`, used or not) and half of the \
  dynamic glibc count as resident. They are shared with every other process using \
  the same files.
* What the static default build's 3.1 MB hold, by symbol size, roughly: 700 to 850 KiB of \
  glibc (its `printf` and `scanf` families, locale tables and dynamic loader come along with \
  what the Rust standard library calls), 250 KiB of the standard library and its generic \
  code, 170 KiB of the standard library's backtrace printer, 165 KiB stub (a split \
  Synchronize decoded on a thread of its own included), 150 KiB tokio, 120 KiB of NRI \
  message code, 80 KiB ttRPC, 70 KiB prost. With the release profile's defaults none of \
  these can go: the backtrace printer and glibc's parts come with the standard library \
  whatever the plugin calls. What did go is code a plugin carried once per NRI method: the \
  stub now runs the layers around each handler (its span, trace context and panic \
  catching) as one piece of code on a boxed future, and ttRPC shares what follows each \
  typed call; each method keeps only its own decoding, handler and encoding. That took \
  125 KiB of text out of the static build (1,826 to 1,703 KiB of functions), and 116 to \
  134 KiB of `VmRSS` out of each of its processes (2,416 KiB before, 2,282 to 2,300 KiB \
  after, measured alike); the dynamic build's change stayed within its spread between runs. \
  Two more went since: the stub's run (connect, register, serve) is returned behind a \
  trait object, so its state machine is compiled once, in the stub, and no longer again \
  in the plugin's crate that awaits it (28 KB of text); and the minimal plugin, which \
  installs no subscriber, builds `tracing` with `release_max_level_off`, so the log \
  events of the stub, ttRPC and the mux are not compiled in (62 KB of text and 15 KB of \
  data). Measured by hand on 8 processes of each static build (before, with the first, \
  with both), right after building: 2,298, 2,276 and 2,232 KiB; the same binaries half an \
  hour later: 2,300, 2,208 and 2,096 KiB. A binary's pages count only while the page cache \
  holds them, and what it holds of a file changes with time and with what else runs, so \
  the figures of one binary move between runs by tens of KiB.
* The blocking stub (`nri_stub::blocking`) is what a plugin that needs no async runtime \
  can use instead: the same handlers as plain methods, served on the main thread with \
  blocking socket calls, without tokio, logging, trace contexts or requests of the \
  plugin's own. Its minimal plugin's text is 471 KB against 1,011 KB (dynamic), its \
  binary 0.9 MB against 1.9 MB. Its 220 KB of text beyond the floor's 251 KB hold, by \
  symbol size, mostly the NRI messages it decodes and encodes: their decoders and \
  encoders, prost's generic code for them, `BTreeMap` code for their maps, and their \
  drop code, which the compiler copies into each code unit that drops a message. A \
  plugin decodes most messages whatever it handles: every request carries the pod and \
  the container with all their fields. What went, measured on the text of the dynamic \
  build: one decoder for all the requests that carry only a pod and a container \
  (567 to 541 KB); the events a plugin handles are a constant of its type \
  (`Plugin::EVENTS`), so the requests of the others, with the decoders and encoders \
  only they use (the validation request's maps of field owners, for one), are not \
  compiled into it (541 to 473 KB); and the pod and container are decoded in place on \
  the heap and lent to the handler, which took 20 KiB of stack (and of `RssAnon`) \
  away. Taking the stub's \
  code out of the plugin's crate (a trait object instead of generic code) added 6 KB, \
  and was not kept. Practically all of the text is resident: in the dynamic build every \
  64 KiB window the kernel maps around touched pages was mapped in whole, the standard \
  library's backtrace printer (never run) included, because each window also holds \
  code that runs.
* A plugin on the blocking stub alone builds `nri-stub` without its default feature \
  `async` (`default-features = false`), and links no tokio, no ttRPC client or server \
  and no multiplexer. That matters beyond the code: the linker drops the code of a \
  dependency the plugin never calls, but keeps its unwinding tables \
  (`.gcc_except_table`) when it shares an object file with code that is called. The \
  minimal plugin on the blocking stub, built with the async stub's dependencies, \
  carried 43 KB of tables for code it did not have (tokio's 17 KB, the async stub's \
  20 KB): without `async` its `.gcc_except_table` is 23 KB instead of 66 KB. In \
  `VmRSS` that is 8 to 12 KiB of its read-only segment, not 43: what is left of the \
  segment lies in the same 64 KiB windows as what a plugin reads (relocations, \
  constants). By hand, 5 alternating runs of 8 processes each: medians 2,268 to \
  2,320 KiB against 2,300 to 2,332 KiB before; the C library's share alone moves by \
  100 KiB between processes of one binary, with where its pages fall in those windows.
* The rest of the blocking plugin's own code is written more than once: 33 KB of its \
  474 KB of functions are exact copies of a function in another of its crate's 16 code \
  units (the NRI messages' drop code, prost's varint coders, `String`'s formatting). One \
  code unit for the plugin's package (`codegen-units = 1` for it alone) takes 54 KB of \
  text out, whole-program optimisation (`lto = true`) about 100 KiB of `VmRSS`: both \
  release-profile settings a plugin author can choose, outside the default profile the \
  targets hold. Moving the blocking stub's decoding and encoding out of the plugin's \
  crate into plain functions of `nri-stub` added 12 KB instead (its 16 code units copy \
  alike), and was not kept.
* What a plugin author can do about it: a current-thread runtime and no logging subscriber \
  or JSON configuration (the test plugin, with `serde_json`, `tracing-subscriber` and an \
  event log, is about 1 MiB bigger); if the plugin does not log, `tracing` with \
  `release_max_level_off` in its `Cargo.toml`, as the minimal plugin does; static linking (what `deploy/build-images` does), \
  which maps only the parts of glibc the plugin uses; a release profile for size \
  (`opt-level = \"s\"`, `lto = true`, `codegen-units = 1`, `panic = \"abort\"`), which \
  halves the binary. `MALLOC_ARENA_MAX` and similar tuning of the measured process are \
  not used.
";

/// Where the time of one CreateContainer goes (measured apart, see the text).
const PROFILE: &str = r#"## Where the time goes

One CreateContainer through 8 minimal Rust plugins on our runtime, counted apart from the
run above on the same machine (counts of system calls and context switches do not depend
on the machine's load; times do). The details, commands and CPU samples are in
[PERFORMANCE-profile.md](PERFORMANCE-profile.md). The counts are of calls that wait to be
woken (`-busy-poll-us 0`): with polling on, the number of non-blocking `epoll_wait` calls
depends on how long each plugin takes, and under `strace` every plugin takes far longer.

```sh
strace -f -c -- target/release/nri-rs-adaptation-bench -plugin target/release/nri-rs-min-plugin \
  -mode create -plugins 8 -n 2000 -warmup 200 -registrations 0 -busy-poll-us 0
perf stat -e task-clock,context-switches -- target/release/nri-rs-adaptation-bench \
  -plugin target/release/nri-rs-min-plugin -mode create -plugins 8 -n 3000 -warmup 300 \
  -registrations 0 -busy-poll-us 0
```

| per CreateContainer (8 plugins, whole chain) | tokio sockets | `UnixTrunk` | now | raw chain |
|---|---:|---:|---:|---:|
| system calls | 73 | 56 | 48 | 32 |
| `epoll_wait` | 40 | 24 | 16 | – |
| `sendto` + `recvfrom` | 32 | 32 | 32 | 32 (`write` + `read`) |
| context switches | 29–31 | 18.5–19 | 18.6–19 | 16 (two per hop) |
| task hand-overs per hop (runtime + plugin) | 4 + 5 | 4 + 5 | 2 + 1 | – |

(The context switches are those of the runtime and plugin processes while they run the
calls: `perf stat -e context-switches,syscalls:sys_enter_sendto -p <their pids>` over 3 s
of a long run, divided by the calls, 16 `sendto` each.)

* **Waiting, not computing.** Plugins are called one after the other, so a call is 8
  round trips, and most of each is the kernel waking the peer process (CPU samples: 60 %
  in the kernel, wake-ups and task switches above all).
* **Fewer wake-ups.** tokio registers every socket with its event loop for reading and
  writing. On a Unix socket each read by the peer frees buffer space and raises a new
  "writable" event, so every message woke its sender once more when the receiver read
  it: two useless wake-ups per hop. The mux registers its socket for readability only
  and asks for writability only while a write waits for buffer space
  (`nri_mux::UnixTrunk`): a plugin blocks once per message, as the raw chain does.
* **Fewer task hand-overs.** A message used to pass from the task that made it to the
  ttRPC writer task, then to the mux writer task, which sent it; and a plugin ran each
  handler in a task of its own and handed its reply back to the connection's task. Now
  the task that makes a message sends it to the socket itself (the mux writes straight
  to a `UnixTrunk` socket when nothing else is queued; ttRPC writes from the calling task
  and keeps a partly written frame with the connection, so a cancelled call never leaves
  half a frame), and a plugin's handler that completes without waiting runs on the
  connection's task. A hop is now: runtime `sendto`, `epoll_wait` (sleeps), `recvfrom`;
  plugin `epoll_wait` (sleeps), `recvfrom`, `sendto`. The runtime's requests come from a
  spawned task, as a runtime's request handlers make them: a future the thread blocks on
  is polled only after one more, non-blocking, `epoll_wait`.
* **The event loop is not what is left.** The scripted runtime runs the same frames on
  the same plugins twice: blocking, and on the event loop (sockets registered with tokio
  for reading, each reply awaited in `epoll_wait` from a spawned task, as our runtime
  waits). Both are equally fast, in latency and in the runtime's CPU time per call (the
  tables after "CreateContainer latency"; 100–140 µs against 110–135 µs per call in four
  runs by hand with 8 minimal plugins). Both make the three system calls per hop that our
  runtime makes.
* **Not sleeping is what helps.** A call of our runtime now polls for its reply for up
  to 250 µs before its thread sleeps (`plugin_busy_poll`, "Polling for replies" above;
  calls to a plugin poll only while most of its recent replies came within it):
  the reply finds the thread awake, and neither the wake-up nor the cold start after it
  is paid. By hand on a quiet machine, four alternating rounds of 8 plugins each way
  (the same bench program, `-busy-poll-us 0` for off): minimal Rust plugins, median
  344–399 µs polling against 498–514 µs without (0.68–0.80 per round), for 355–415
  against 235–250 µs of runtime CPU per call; Rust test plugins 578–706 against 733–891
  µs (0.76–0.92); Go test plugins 1030–1355 against 1127–1467 µs (0.72–1.02). The
  scripted runtime gains less from the same polling (its polling chain against its
  event-loop chain with the minimal plugins: 249–288 against 256–326 µs), so polling
  takes away much of what our runtime paid beyond the scripted one for waking up: 9–14
  µs per plugin above the polling chain with polling, 24–30 µs above the event-loop chain
  without.
* **What is left is the protocol stack's own work per hop.** In those runs our runtime's
  process spent 240–355 µs of CPU per call, 17–31 µs per plugin above the event-loop
  chain. CPU samples of its process alone (`perf record --call-graph dwarf -p`, 2 s of
  calls, 2,889 samples): 43 % in the kernel (`sendto` 16 %, most of it waking the plugin;
  `epoll_wait` 14 %; `recvfrom` 9 %), 57 % in user space: encoding each request 8 %,
  merging each reply 5 %, decoding it 3 %, `memmove` 5 %, `malloc` and `free` 6 %, the
  mux's reader task besides its `recvfrom` 6 %, ttRPC's reader task 4 %, and the rest
  spread over tokio's scheduler, timers and wakers and the futures' state machines, no
  function above 1.5 % on its own. Both sides of one hop take 12 µs in one process with
  warm caches ("One plugin hop"); in the chain each process runs after the others have
  run, and its code and data come back from memory (this virtual machine has no
  hardware counters to count the misses).

### One CPU against two

The same case with every process of the chain on one CPU (`taskset -c 0` before the
bench program; the plugins inherit it), against the default, two rounds each, median
latency and CPU time per call (the `/proc` figures of the table above):

| 8 minimal Rust plugins | median | runtime CPU | plugins CPU |
|---|---:|---:|---:|
| our runtime, both CPUs | 552–556 µs | 240–243 µs | 290–310 µs |
| our runtime, one CPU | 375–377 µs | 137–140 µs | 233–237 µs |
| Go runtime, both CPUs | 840–851 µs | 637–663 µs | 363–380 µs |
| Go runtime, one CPU | 432–435 µs | 233 µs | 253 µs |
| raw chain, both CPUs | 256–279 µs | | |
| raw chain, one CPU | 88 µs | | |

(The raw chain rows come from a standalone echo chain of the same shape and bytes, 156
out and 58 back per hop, run the same way. The rows of our runtime were measured before
the task hand-overs per hop were cut, see the profile.)

* **Waking the other CPU is what costs most here.** On this virtual machine an idle
  vCPU is halted, and a message to a process the kernel places on it waits for that CPU
  to wake. On one CPU the wake-up is a task switch, and every chain gets faster: the raw
  chain by 3×, ours by 1.5×, Go's by 2×. On both CPUs our runtime's own CPU time per
  call is 1.7× its one-CPU figure: the same work, paid again in wake-ups. How often the
  kernel spreads the chain over both CPUs depends on what else runs: on a busy machine
  the other CPU is seldom idle, and the raw chain measures near its one-CPU figure.
* **On one CPU the chain is computing, not waiting:** CPU time per call (runtime and
  plugins together, 372 µs) is the latency. Per plugin hop that is 29 µs in a plugin
  process (waking, reading, the mux and ttRPC frames, protobuf decoding and encoding,
  the handler, tokio's task and timer bookkeeping, the kernel's socket and task-switch
  work) and 17 µs in the runtime, against 11 µs for the raw chain's whole hop. Both
  sides of one in-process hop with warm caches take 12 µs ("One plugin hop" above);
  each process of the chain runs for a few microseconds between switches, with cold
  caches. (These rows are of the minimal plugin on the async stub. On the blocking stub
  a plugin makes the raw chain's two system calls per request and runs none of tokio's
  bookkeeping; through 8 of them our runtime stays within the raw-chain target, see the
  targets.)
* **The same plugins behind a scripted runtime** (the tables after "CreateContainer
  latency") are the floor for a chain of real plugins. Where that floor is above twice the
  raw chain, no runtime meets the raw-chain target with those plugins, and the targets say
  so. With Go's plugins it always has been so far; with our test plugins (a JSON
  configuration, an event log, the async stub) the floor came out at 1.4 to 2.1 times the
  raw chain of its round in the runs so far. With Go's plugins the floor is under
  half of the Go runtime's median, but our runtime stays further above it than with our
  plugins. The scripted runtime shows why ("The protocol's own work" above): when it
  encodes each request, decodes each reply and merges it, 20 to 70 µs of work per call,
  its median with Go's plugins rises by several times that work, while with ours it
  rises by about the work. Go plugins answer more slowly when the runtime works between
  their calls, so every microsecond a runtime spends per hop counts several times over
  (by hand, with the `perf sched` and system-call counts behind this: "Go plugins and
  the runtime's thread" in [PERFORMANCE-profile.md](PERFORMANCE-profile.md)).
"#;

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or_else(
            || "unknown".into(),
            |kib| format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0),
        )
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| "unknown".into())
}
