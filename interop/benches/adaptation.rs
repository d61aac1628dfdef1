//! The runtime adaptation with external plugin processes: nri-rs next to the
//! Go reference, measured in the same run on the same machine, written to
//! `docs/PERFORMANCE.md` (`cargo bench -p nri-interop --bench adaptation`).
//! Both runtimes are bench programs of their own with the same flags and
//! report (`nri-rs-adaptation-bench` in `src/bin`, `nri-adaptation-bench` in
//! interop/harness), run case by case; what each case measures is said in
//! the document's text, `adaptation-notes/template.md`, which has a `{name}`
//! for each figure and table.
//!
//! `NRI_BENCH_QUICK=1`: few iterations (a check that the bench works; the
//! document is marked as a quick run). `NRI_ADAPTATION_BENCH_ITERS`: the
//! CreateContainer calls per case (default 3000, over five rounds).
//! `NRI_BENCH_ONLY=wasm`: only the WebAssembly case, printed, no document.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use machine::{cpu_model, nproc};
use nri_interop::bench::{Latency, Report};

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

/// Lifecycles per second started in the load mode.
const LOAD_RATE: usize = 50;
/// Each plugin's unsolicited update period in the load mode.
const LOAD_UPDATE_MS: usize = 100;

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
    /// annotation): the labels say so.
    fn is_minimal(self) -> bool {
        self.label().contains("minimal")
    }

    /// Whether the plugin is one of ours (its label says Rust).
    fn is_rust(self) -> bool {
        self.label().starts_with("Rust")
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

/// Rounds of each CreateContainer case (the median of five does not hang
/// on two disturbed runs).
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

/// Runs of each Synchronize case per runtime and plugin, rounds pooled,
/// which side goes first alternating.
const SYNC_RUNS: usize = 3;

/// Synchronize of a table of `containers` containers, with our minimal
/// plugin and Go's, each on both runtimes, `rounds` rounds each (rounded up
/// to whole runs): [`SYNC_RUNS`] runs of each, in turn.
fn sync_case(progs: &Programs, containers: usize, rounds: usize) -> Vec<(usize, Pair)> {
    let per_run = rounds.div_ceil(SYNC_RUNS).max(1);
    let args = args(&format!(
        "-mode sync -containers {containers} -rounds {per_run}"
    ));
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

/// Runs one CreateContainer case `rounds` times, both runtimes each round
/// (which goes first alternating), each round after the case's raw chain
/// (`raw`); keeps the round with the median R/G.
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

/// A bench program's arguments, written as one command line.
fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
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

/// The three builds of the minimal Rust plugin, its package alone
/// (default release, dynamic; the same static, as shipped; size profile,
/// static), each in a target directory of its own; the blocking-stub
/// plugin without the package's default features.
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
    let (n, warmup, starts) = (counts.create, counts.create / 10, counts.wasm_starts);
    let args = args(&format!(
        "-mode wasm -n {n} -warmup {warmup} -registrations {starts}"
    ));
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
        let mut values = Vec::new();
        render_wasm(&mut values, &wasm, counts);
        let section = TEMPLATE
            .split("\n## ")
            .find(|s| s.starts_with("A WebAssembly plugin"));
        let d = fill(&format!("## {}", section.unwrap_or_default()), &values);
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
            let args = args(&format!(
                "-mode create -plugins {plugins} -n {n} -warmup {warmup} -registrations {reg}"
            ));
            creates.push(pair_rounds(
                &progs,
                plugins,
                plugin,
                &args,
                CREATE_ROUNDS,
                (
                    raw.hops_of(plugin),
                    counts.create_per_round(),
                    counts.create / 10,
                ),
            ));
            if plugins == MANY {
                // Our runtime again, its calls waiting to be woken at once.
                let off = [args, self::args("-busy-poll-us 0")].concat();
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
        let args = args(&format!(
            "-mode create -plugins {MANY} -n 100 -warmup 10 -registrations 0"
        ));
        memory.push(pair(&progs, MANY, plugin, &args));
    }

    let lifecycles = counts.lifecycles.to_string();
    let lifecycle_warmup = (counts.lifecycles / 10).max(10).to_string();
    let mut cycles = Vec::new();
    for plugin in [Plugin::RustTest, Plugin::GoTest] {
        let args = args(&format!(
            "-mode lifecycle -plugins {MANY} -n {lifecycles} -warmup {lifecycle_warmup}"
        ));
        cycles.push(pair(&progs, MANY, plugin, &args));
    }

    let mut syncs = Vec::new();
    for (containers, rounds) in counts.syncs {
        syncs.extend(sync_case(&progs, containers, rounds));
    }

    // Sustained load: all Rust, then all Go.
    let load_args = args(&format!(
        "-mode load -plugins {MANY} -warmup {lifecycle_warmup} -rate {LOAD_RATE} -duration {} \
         -update-ms {LOAD_UPDATE_MS}",
        counts.load_seconds
    ));
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
        (&load_start, &load_end),
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

/// The document's text, with a `{name}` for every figure and table of a
/// run (the document itself has no braces).
const TEMPLATE: &str = include_str!("adaptation-notes/template.md");

/// Fills every `{name}` of `template` (a part of [`TEMPLATE`]); a name
/// left without a value is a bug of this bench.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut doc = template.to_string();
    for (name, value) in values {
        doc = doc.replace(&format!("{{{name}}}"), value);
    }
    if let Some(at) = doc.find('{') {
        panic!(
            "no value for {}",
            &doc[at..doc[at..].find('}').map_or(doc.len(), |e| at + e + 1)]
        );
    }
    doc
}

/// Table rows, one a line: `row` of every item it makes one for.
fn rows<T>(items: impl IntoIterator<Item = T>, row: impl FnMut(T) -> Option<String>) -> String {
    items
        .into_iter()
        .filter_map(row)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Microseconds, whole; "–" for none.
fn us_or(v: Option<f64>) -> String {
    v.map_or("–".to_string(), us0)
}

/// Microseconds to a tenth (a budget can be small or negative).
fn us_tenths(v: f64) -> String {
    format!("{v:.1} µs")
}

/// The median and p99 of our runtime's and Go's CreateContainer in a case.
fn creates(p: &Pair) -> (Latency, Latency) {
    (lat(&p.rust, |r| r.create), lat(&p.go, |r| r.create))
}

fn render(
    res: &Results,
    go: &(String, usize),
    counts: Counts,
    load: (&str, &str),
    took: Duration,
) -> String {
    let raw = &res.raw;
    let mut values =
        vec![
        ("quick", match counts.quick {
            true => "**Quick run** (`NRI_BENCH_QUICK=1`): few iterations, only a check that the \
                     bench works; the figures are not meant to be quoted.\n\n"
                .to_string(),
            false => String::new(),
        }),
        ("nproc", nproc().to_string()),
        ("cpu_model", cpu_model()),
        ("memory", mem_total()),
        ("kernel", kernel()),
        ("load_start", load.0.to_string()),
        ("load_end", load.1.to_string()),
        ("go_version", go.0.clone()),
        ("gomaxprocs", go.1.to_string()),
        ("took", format!("{:.0}", took.as_secs_f64())),
        ("create_rounds", CREATE_ROUNDS.to_string()),
        ("create_per_round", counts.create_per_round().to_string()),
        ("create_warmup", (counts.create / 10).to_string()),
        ("latency_target", LATENCY_TARGET.to_string()),
        ("raw_chain_target", RAW_CHAIN_TARGET.to_string()),
        ("memory_target", MEMORY_TARGET.to_string()),
        ("sync_target", SYNC_TARGET.to_string()),
        ("registration_target", REGISTRATION_TARGET.to_string()),
        ("hop_target", HOP_TARGET.to_string()),
        ("registrations", counts.registrations.to_string()),
        ("registrations_total", (counts.registrations * CREATE_ROUNDS).to_string()),
        ("lifecycles", counts.lifecycles.to_string()),
        ("lifecycle_warmup", (counts.lifecycles / 10).max(10).to_string()),
        ("load_seconds", counts.load_seconds.to_string()),
        ("targets_rows", render_targets(res)),
    ];
    let ((t0, t1), (m0, m1)) = (raw.test_bytes, raw.min_bytes);
    for (name, bytes) in [
        ("test_first_out", t0.0),
        ("test_first_back", t0.1),
        ("test_last_out", t1.0),
        ("test_last_back", t1.1),
        ("min_first_out", m0.0),
        ("min_first_back", m0.1),
        ("min_last_out", m1.0),
        ("min_last_back", m1.1),
    ] {
        values.push((name, bytes.to_string()));
    }
    let raw_row = |plugins: usize, what: &str, l: hop::Latency| {
        format!(
            "| {plugins} | {what} plugin bytes | {:.0} µs | {:.0} µs |",
            l.median_us, l.p99_us
        )
    };
    values.push((
        "raw_rows",
        [
            raw_row(1, "test", raw.one_test),
            raw_row(MANY, "test", raw.many_test),
            raw_row(MANY, "minimal", raw.many_min),
        ]
        .join("\n"),
    ));
    render_create(&mut values, res);
    render_memory(&mut values, res);
    render_lifecycle(&mut values, res);
    render_load(&mut values, &res.load);
    render_sync(&mut values, res);
    render_registration(&mut values, res);
    render_hop(&mut values, &res.hop);
    render_wasm(&mut values, &res.wasm, counts);
    fill(TEMPLATE, &values)
}

fn render_create(v: &mut Vec<(&'static str, String)>, res: &Results) {
    v.push(("create_rows", rows(&res.creates, |p| {
        let (r, g) = creates(p);
        let (rm, rp) = (r.median_us / g.median_us, r.p99_us / g.p99_us);
        let raw = res.raw.of_case(p).median_us;
        let (rr, gr) = (r.median_us / raw, g.median_us / raw);
        let raw_target = match p.plugins == MANY {
            true => format!(", R/raw {}", met(rr <= RAW_CHAIN_TARGET)),
            false => String::new(),
        };
        let rounds: Vec<String> = p.round_ratios.iter().map(|x| format!("{x:.2}")).collect();
        Some(format!(
            "| {} | {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | {raw:.0} µs | {rr:.2} | {gr:.1} | median {}, p99 {}{raw_target} | {} |",
            p.plugins, p.plugin.label(), r.median_us, r.p99_us, g.median_us, g.p99_us,
            met(rm <= LATENCY_TARGET), met(rp <= LATENCY_TARGET), rounds.join(", "),
        ))
    })));
    v.push((
        "cpu_rows",
        rows(&res.creates, |p| {
            let (r, g) = (&p.rust, &p.go);
            let floor = r.plugins_cpu_us_per_call.map_or("–".to_string(), |rp| {
                format!("{:.2}", rp / lat(g, |r| r.create).median_us)
            });
            Some(format!(
                "| {} | {} | {} | {} | {} | {} | {floor} |",
                p.plugins,
                p.plugin.label(),
                us_or(r.runtime_cpu_us_per_call),
                us_or(r.plugins_cpu_us_per_call),
                us_or(g.runtime_cpu_us_per_call),
                us_or(g.plugins_cpu_us_per_call),
            ))
        }),
    ));
    let cells = |l: Option<Latency>| {
        l.map_or(("–".to_string(), "–".to_string()), |l| {
            (us0(l.median_us), us0(l.p99_us))
        })
    };
    v.push(("scripted_rows", rows(&res.creates, |p| {
        let floor = chain_floor(&p.rust)?;
        let (r, g) = creates(p);
        let ((bm, bp), (em, ep), (pm, pp)) = (
            cells(p.rust.scripted_chain),
            cells(p.rust.event_loop_chain),
            cells(p.rust.polling_chain),
        );
        let per_plugin = |us: f64| match us > 0.0 {
            true => format!("{:.0} µs", us / p.plugins.max(1) as f64),
            false => "none".to_string(),
        };
        Some(format!(
            "| {} | {} | {bm} | {bp} | {em} | {ep} | {pm} | {pp} | {} | {} | {:.2} | {:.2} | {} | {} |",
            p.plugins, p.plugin.label(), us0(r.median_us), us0(g.median_us),
            floor / g.median_us, r.median_us / floor, per_plugin(r.median_us - floor),
            per_plugin(LATENCY_TARGET * g.median_us - floor),
        ))
    })));
    v.push((
        "scripted_cpu_rows",
        rows(&res.creates, |p| {
            let r = &p.rust;
            r.scripted_runtime_cpu_us_per_call?;
            let alike = r
                .polling_runtime_cpu_us_per_call
                .or(r.event_loop_runtime_cpu_us_per_call);
            let above = match (r.runtime_cpu_us_per_call, alike) {
                (Some(ours), Some(floor)) => {
                    format!("{:.1} µs", (ours - floor) / p.plugins.max(1) as f64)
                }
                _ => "–".to_string(),
            };
            Some(format!(
                "| {} | {} | {} | {} | {} | {} | {above} | {} | {} |",
                p.plugins,
                p.plugin.label(),
                us_or(r.runtime_cpu_us_per_call),
                us_or(r.scripted_runtime_cpu_us_per_call),
                us_or(r.event_loop_runtime_cpu_us_per_call),
                us_or(r.polling_runtime_cpu_us_per_call),
                us_or(r.plugins_cpu_us_per_call),
                us_or(r.scripted_plugins_cpu_us_per_call),
            ))
        }),
    ));
    v.push(("work_rows", rows(&res.creates, |p| {
        let r = &p.rust;
        let (enc, work) = (r.encoding_chain?, r.encoding_chain_work?);
        let (pm, added, over) = match r.polling_chain.or(r.event_loop_chain) {
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
        let plain_cpu = r.polling_runtime_cpu_us_per_call.or(r.event_loop_runtime_cpu_us_per_call);
        let (rm, gm) = creates(p);
        Some(format!(
            "| {} | {} | {pm} | {} | {:.1} µs | {added} | {over} | {} / {} | {} | {} | {:.2} | {:.2} |",
            p.plugins, p.plugin.label(), us0(enc.median_us), work.median_us, us_or(plain_cpu),
            us_or(r.encoding_runtime_cpu_us_per_call), us0(rm.median_us), us0(gm.median_us),
            enc.median_us / gm.median_us, enc.median_us / res.raw.of_case(p).median_us,
        ))
    })));
    let both =
        |v: Option<(f64, f64)>| v.map_or("–".to_string(), |(a, b)| format!("{a:.0} / {b:.0} µs"));
    v.push((
        "turns_rows",
        rows(&res.creates, |p| {
            let r = &p.rust;
            let (ours, chain, share) = (
                r.turns_create?,
                r.turns_encoding_chain?,
                protocol_work_share(r)?,
            );
            let (rm, gm) = creates(p);
            Some(format!(
                "| {} | {} | {} | {} | {} | {} | {share:.2} | {:.1} µs | {} | {} | {:.2} |",
                p.plugins,
                p.plugin.label(),
                us0(ours.median_us),
                us0(ours.p99_us),
                us0(chain.median_us),
                us0(chain.p99_us),
                (ours.median_us - chain.median_us) / p.plugins as f64,
                both(r.turns_runtime_cpu_us_per_call),
                both(r.turns_plugins_cpu_us_per_call),
                rm.median_us / gm.median_us * share,
            ))
        }),
    ));
    let window = res
        .creates
        .iter()
        .find_map(|p| p.rust.busy_poll_us)
        .unwrap_or(0.0);
    v.push(("busy_poll", format!("{window:.0}")));
    v.push((
        "polling_rows",
        rows(&res.parked, |(plugin, off)| {
            let p = res
                .creates
                .iter()
                .find(|p| p.plugins == MANY && p.plugin == *plugin)?;
            let ((on, go), offl) = (creates(p), lat(off, |r| r.create));
            Some(format!(
                "| {MANY} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.2} |",
                plugin.label(),
                us0(on.median_us),
                us0(on.p99_us),
                us_or(p.rust.runtime_cpu_us_per_call),
                us0(offl.median_us),
                us0(offl.p99_us),
                us_or(off.runtime_cpu_us_per_call),
                on.median_us / offl.median_us,
                us0(go.median_us),
                offl.median_us / go.median_us,
            ))
        }),
    ));
    let all_rust = [
        (1, Plugin::RustTest, Plugin::GoTest, "test"),
        (MANY, Plugin::RustTest, Plugin::GoTest, "test"),
        (MANY, Plugin::RustMinBlocking, Plugin::GoMin, "minimal"),
        (
            MANY,
            Plugin::RustMin,
            Plugin::GoMin,
            "minimal, ours on the async stub",
        ),
    ];
    v.push(("all_rust_rows", rows(all_rust, |(plugins, rust_side, go_side, kind)| {
        let find = |side| res.creates.iter().find(|p| p.plugins == plugins && p.plugin == side);
        let (rust, go) = (creates(find(rust_side)?).0, creates(find(go_side)?).1);
        let (rm, rp) = (rust.median_us / go.median_us, rust.p99_us / go.p99_us);
        Some(format!(
            "| {plugins} | {kind} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {rm:.2} | {rp:.2} | median {}, p99 {} |",
            rust.median_us, rust.p99_us, go.median_us, go.p99_us,
            met(rm <= LATENCY_TARGET), met(rp <= LATENCY_TARGET),
        ))
    })));
}

/// The chain doing the protocol's own work over our runtime, both measured
/// in the same turns ([`Report::turns_create`]): the share of our
/// runtime's time that a runtime doing only that work would take at the
/// same moment.
fn protocol_work_share(r: &Report) -> Option<f64> {
    let (ours, chain) = (r.turns_create?, r.turns_encoding_chain?);
    (ours.median_us > 0.0).then(|| chain.median_us / ours.median_us)
}

/// Idle `VmRSS` and `RssAnon` of every plugin process, by plugin build.
type MemoryByPlugin = BTreeMap<Plugin, Vec<u64>>;

fn plugin_memory(res: &Results) -> (MemoryByPlugin, MemoryByPlugin) {
    let figures: [fn(&Report) -> &Vec<u64>; 2] = [|r| &r.plugin_rss_kib, |r| &r.plugin_anon_kib];
    let [rss, anon] = figures.map(|of| {
        let mut by = MemoryByPlugin::new();
        for p in res.creates.iter().chain(&res.memory) {
            let all = by.entry(p.plugin).or_default();
            all.extend(of(&p.rust));
            all.extend(of(&p.go));
        }
        by
    });
    (rss, anon)
}

/// The median of a plugin's figures in `by`, 0 for none.
fn median_of(by: &MemoryByPlugin, plugin: Plugin) -> u64 {
    median_u64(by.get(&plugin).map_or(&[], Vec::as_slice))
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

/// Every target of this document in one table: the figure, the floor (what
/// a runtime that took no time at all would reach, where the run measures
/// it) and whether the target is met, missed, or out of any runtime's
/// reach here because the floor itself is above it.
fn render_targets(res: &Results) -> String {
    // Every target is an upper bound. `work`: what a runtime doing only the
    // protocol's own work measured (CreateContainer rows).
    let mut out = Vec::new();
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
        out.push(format!(
            "| {figure} | ≤ {target} | {} | {floor} | {verdict} |",
            against(value, target)
        ));
    };
    let targeted = || {
        res.creates
            .iter()
            .filter(|p| p.plugins == MANY && p.plugin.in_targets())
    };
    for over_raw in [false, true] {
        for p in targeted() {
            let (r, g) = creates(p);
            let (base, what, target) = match over_raw {
                false => (g.median_us, "median R/G", LATENCY_TARGET),
                true => (
                    res.raw.of_case(p).median_us,
                    "our runtime over the raw chain",
                    RAW_CHAIN_TARGET,
                ),
            };
            let ratio = r.median_us / base;
            let work = protocol_work_share(&p.rust).map(|w| ratio * w);
            let floor = chain_floor(&p.rust).map(|c| c / base);
            row(
                format!(
                    "CreateContainer, {MANY} plugins, {}: {what}",
                    p.plugin.label()
                ),
                target,
                ratio,
                floor,
                work,
            );
        }
    }
    row(
        "one hop over the raw socket pair".to_string(),
        HOP_TARGET,
        res.hop.over_raw().0,
        None,
        None,
    );
    let sync = |rust: bool| {
        res.syncs
            .iter()
            .find(|(n, p)| *n >= 10_000 && p.plugin.is_rust() == rust)
    };
    if let (Some((_, r)), Some((_, g))) = (sync(true), sync(false)) {
        let go = lat(&g.go, |r| r.sync).median_us;
        let floor = r.rust.sync_scripted.map(|c| c.median_us / go);
        let ratio = lat(&r.rust, |r| r.sync).median_us / go;
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
        let floor = p.rust.plugin_scripted.map(|c| c.median_us / g.median_us);
        let figure = format!(
            "registration, {}-plugin case, {}: median R/G",
            p.plugins,
            p.plugin.label()
        );
        row(
            figure,
            REGISTRATION_TARGET,
            r.median_us / g.median_us,
            floor,
            None,
        );
    }
    let (rss, _) = plugin_memory(res);
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
        if rss.contains_key(&rust) && rss.contains_key(&go) {
            let go_rss = median_of(&rss, go).max(1) as f64;
            let floor = floor_rss(res, rust).map(|f| f as f64 / go_rss);
            let figure = format!("idle minimal plugin VmRSS, {what}: R/G");
            row(
                figure,
                MEMORY_TARGET,
                median_of(&rss, rust) as f64 / go_rss,
                floor,
                None,
            );
        }
    }
    let p = &res.wasm;
    let (rs, gs) = (lat(&p.rust, |r| r.startup), lat(&p.go, |r| r.startup));
    let (rc, gc) = creates(p);
    if gs.median_us > 0.0 && gc.median_us > 0.0 {
        row(
            "WebAssembly plugin, start-up: median R/G".to_string(),
            WASM_STARTUP_TARGET,
            rs.median_us / gs.median_us,
            None,
            None,
        );
        // The module's own two calls and the work no runtime can skip.
        let floor = p
            .rust
            .module
            .zip(p.rust.wasm_work)
            .map(|(m, w)| (m.median_us + w.median_us) / gc.median_us);
        row(
            "WebAssembly plugin, CreateContainer: median R/G".to_string(),
            WASM_CREATE_TARGET,
            rc.median_us / gc.median_us,
            floor,
            None,
        );
    }
    out.join("\n")
}

fn render_memory(v: &mut Vec<(&'static str, String)>, res: &Results) {
    let (rss, anon) = plugin_memory(res);
    v.push((
        "memory_rows",
        rows(&rss, |(side, values)| {
            Some(format!(
                "| {} | {} | {} KiB | {} KiB | {} KiB | {} KiB |",
                side.label(),
                values.len(),
                median_u64(values),
                values.iter().min().copied().unwrap_or(0),
                values.iter().max().copied().unwrap_or(0),
                median_of(&anon, *side),
            ))
        }),
    ));
    let (go, go_static) = (
        median_of(&rss, Plugin::GoMin),
        median_of(&rss, Plugin::GoMinStatic),
    );
    v.push(("floor_rows", rows(res.rss_floor.iter().filter(|(_, v)| !v.is_empty()), |(plugin, values)| {
        let floor = median_idle(values, |i| i.vm_rss);
        let ours = median_of(&rss, *plugin);
        let blocking = plugin.blocking_of().map_or(0, |b| median_of(&rss, b));
        Some(format!(
            "| {} | {floor} KiB | {} KiB | {ours} KiB | {} KiB | {blocking} KiB | {} KiB | {:.2} | {:.2} |",
            plugin.label(), median_idle(values, |i| i.rss_anon), ours.saturating_sub(floor),
            blocking.saturating_sub(floor), floor as f64 / go.max(1) as f64,
            floor as f64 / go_static.max(1) as f64,
        ))
    })));
    let ratios = [
        (Plugin::RustMinBlocking, Plugin::GoMin, "minimal plugins, each as its toolchain builds it by default (dynamically linked), ours on the blocking stub"),
        (Plugin::RustMin, Plugin::GoMin, "the same, ours on the async stub"),
        (Plugin::RustMinBlockingStatic, Plugin::GoMinStatic, "minimal plugins, both static, default release profile, ours on the blocking stub"),
        (Plugin::RustMinStatic, Plugin::GoMinStatic, "the same, ours on the async stub"),
        (Plugin::RustMinBlockingStatic, Plugin::GoMin, "minimal plugins, ours static as shipped (default release profile) against Go's default build, ours on the blocking stub"),
        (Plugin::RustMinStatic, Plugin::GoMin, "the same, ours on the async stub"),
        (Plugin::RustMinBlockingSmall, Plugin::GoMinStatic, "minimal plugins, both static, ours built for size, on the blocking stub"),
        (Plugin::RustMinSmall, Plugin::GoMinStatic, "the same, ours on the async stub"),
        (Plugin::RustTest, Plugin::GoTest, "test plugins"),
    ];
    v.push(("memory_ratios", rows(ratios, |(rust, go, what)| {
        (rss.contains_key(&rust) && rss.contains_key(&go)).then(|| {
            let ratio = median_of(&rss, rust) as f64 / median_of(&rss, go).max(1) as f64;
            let anon_ratio = median_of(&anon, rust) as f64 / median_of(&anon, go).max(1) as f64;
            format!(
                "* {what}: VmRSS Rust/Go **{}×** — target ≤ {MEMORY_TARGET}×: **{}**; RssAnon Rust/Go {anon_ratio:.2}×",
                against(ratio, MEMORY_TARGET),
                met(ratio <= MEMORY_TARGET)
            )
        })
    })));
    let runtime = res
        .creates
        .iter()
        .filter(|p| p.plugins == MANY && p.plugin != Plugin::RustMinSmall);
    v.push((
        "runtime_memory_rows",
        rows(runtime, |p| {
            let (r, g) = (&p.rust, &p.go);
            let (rc, ra) = (
                r.runtime_rss_kib.unwrap_or(0),
                r.runtime_rss_after_kib.unwrap_or(0),
            );
            let (gc, ga) = (
                g.runtime_rss_kib.unwrap_or(0),
                g.runtime_rss_after_kib.unwrap_or(0),
            );
            Some(format!(
                "| {} | {rc} KiB | {ra} KiB | {gc} KiB | {ga} KiB | {:.2} | {:.2} | {} / {} KiB |",
                p.plugin.label(),
                rc as f64 / gc.max(1) as f64,
                ra as f64 / ga.max(1) as f64,
                r.runtime_anon_kib.unwrap_or(0),
                g.runtime_anon_kib.unwrap_or(0),
            ))
        }),
    ));
}

fn render_lifecycle(v: &mut Vec<(&'static str, String)>, res: &Results) {
    let per_s = |r: &Report| r.lifecycles_per_s.unwrap_or(0.0);
    v.push((
        "lifecycle_rows",
        rows(&res.cycles, |p| {
            let (rt, gt) = (per_s(&p.rust), per_s(&p.go));
            let (rl, gl) = (lat(&p.rust, |r| r.lifecycle), lat(&p.go, |r| r.lifecycle));
            Some(format!(
                "| {} | {rt:.0}/s | {gt:.0}/s | {:.2} | {} | {} | {} | {} |",
                p.plugin.label(),
                rt / gt.max(f64::MIN_POSITIVE),
                ms(rl.median_us),
                ms(rl.p99_us),
                ms(gl.median_us),
                ms(gl.p99_us),
            ))
        }),
    ));
    let find = |side| res.cycles.iter().find(|p| p.plugin == side);
    let all = match (find(Plugin::RustTest), find(Plugin::GoTest)) {
        (Some(r), Some(g)) => {
            let (rt, gt) = (per_s(&r.rust), per_s(&g.go));
            let ratio = rt / gt.max(f64::MIN_POSITIVE);
            format!(
                "All Rust against all Go: **{rt:.0} against {gt:.0} lifecycles/s ({ratio:.2}×)**."
            )
        }
        _ => String::new(),
    };
    v.push(("lifecycle_all", all));
}

fn render_load(v: &mut Vec<(&'static str, String)>, load: &LoadPair) {
    let (rust, go) = (&load.rust, &load.go);
    let windows = rust.load_windows.len().max(go.load_windows.len());
    v.push((
        "load_rows",
        rows(0..windows, |w| {
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
            let start = rust
                .load_windows
                .get(w)
                .or_else(|| go.load_windows.get(w))
                .map_or(0, |x| x.start_s);
            Some(format!(
                "| {start}–{} s {} {} |",
                start + 5,
                cell(rust),
                cell(go)
            ))
        }),
    ));
    let (rl, gl) = (lat(rust, |r| r.lifecycle), lat(go, |r| r.lifecycle));
    let ratio = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    let rss = |what: &str, rust: Option<u64>, go: Option<u64>| {
        let (r, g) = (rust.unwrap_or(0), go.unwrap_or(0));
        format!(
            "| runtime `VmRSS` {what} | {r} KiB | {g} KiB | {:.2} |",
            ratio_kib(rust, go)
        )
    };
    let summary = [
        format!(
            "| lifecycle median, whole run | {} | {} | {:.2} |",
            ms(rl.median_us),
            ms(gl.median_us),
            ratio(rl.median_us, gl.median_us)
        ),
        format!(
            "| lifecycle p99, whole run | {} | {} | {:.2} |",
            ms(rl.p99_us),
            ms(gl.p99_us),
            ratio(rl.p99_us, gl.p99_us)
        ),
        format!(
            "| lifecycles started late | {} | {} | |",
            rust.load_late.unwrap_or(0),
            go.load_late.unwrap_or(0)
        ),
        format!(
            "| unsolicited updates received | {} | {} | |",
            rust.updates_received.unwrap_or(0),
            go.updates_received.unwrap_or(0)
        ),
        rss("after warm-up", rust.runtime_rss_kib, go.runtime_rss_kib),
        rss(
            "at the end",
            rust.runtime_rss_after_kib,
            go.runtime_rss_after_kib,
        ),
        format!(
            "| growth | {:+} KiB | {:+} KiB | |",
            growth(rust),
            growth(go)
        ),
    ];
    v.push(("load_summary_rows", summary.join("\n")));
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

fn render_sync(v: &mut Vec<(&'static str, String)>, res: &Results) {
    v.push(("sync_rows", rows(&res.syncs, |(containers, p)| {
        let (r, g) = (lat(&p.rust, |r| r.sync), lat(&p.go, |r| r.sync));
        let (rs, gs) = (lat(&p.rust, |r| r.sync_from_start), lat(&p.go, |r| r.sync_from_start));
        Some(format!(
            "| {containers} ({} pods) | {:.1} MB | {} | {} (p99 {}) | {} | {} (p99 {}) | {} | {:.2} |",
            p.rust.pods.unwrap_or(0), p.rust.sync_bytes.unwrap_or(0) as f64 / 1e6, p.plugin.label(),
            ms(r.median_us), ms(r.p99_us), ms(rs.median_us), ms(g.median_us), ms(g.p99_us),
            ms(gs.median_us), r.median_us / g.median_us,
        ))
    })));
    let ms_or = |v: Option<f64>| v.map_or("–".to_string(), ms);
    v.push((
        "sync_cpu_rows",
        rows(&res.syncs, |(containers, p)| {
            let go_median = lat(&p.go, |r| r.sync).median_us;
            let scripted = p.rust.sync_scripted.map(|c| c.median_us);
            let floor = scripted.map_or("–".to_string(), |c| format!("{:.2}", c / go_median));
            Some(format!(
                "| {containers} | {} | {} | {} | {} | {} | {} | {floor} |",
                p.plugin.label(),
                ms_or(p.rust.sync_runtime_cpu_us),
                ms_or(p.rust.sync_plugin_cpu_us),
                ms_or(p.go.sync_runtime_cpu_us),
                ms_or(p.go.sync_plugin_cpu_us),
                ms_or(scripted),
            ))
        }),
    ));
    let mut sizes: Vec<usize> = res.syncs.iter().map(|(c, _)| *c).collect();
    sizes.dedup();
    v.push((
        "sync_all_rows",
        rows(sizes, |c| {
            let find = |rust: bool| {
                res.syncs
                    .iter()
                    .find(|(n, p)| *n == c && p.plugin.is_rust() == rust)
            };
            let ((_, r), (_, g)) = (find(true)?, find(false)?);
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
            Some(format!(
                "| {c} | {} | {} | {ratio:.2} | {floor} | {target} |",
                ms(rust.median_us),
                ms(go.median_us)
            ))
        }),
    ));
    let rounds: Vec<String> = res
        .syncs
        .iter()
        .filter(|(_, p)| p.plugin.is_rust())
        .map(|(c, p)| format!("{} for {c}", p.rust.iterations))
        .collect();
    v.push(("sync_rounds", rounds.join(", ")));
}

fn render_registration(v: &mut Vec<(&'static str, String)>, res: &Results) {
    v.push(("registration_rows", rows(res.creates.iter().filter(|p| registered(p)), |p| {
        let (r, g) = (lat(&p.rust, |r| r.registration), lat(&p.go, |r| r.registration));
        let connect = p.rust.plugin_connect.map_or_else(|| "–".to_string(), |c| ms(c.median_us));
        let (scripted, floor) = match p.rust.plugin_scripted {
            Some(c) => (ms(c.median_us), format!("{:.2}", c.median_us / g.median_us)),
            None => ("–".to_string(), "–".to_string()),
        };
        let ratio = r.median_us / g.median_us;
        Some(format!(
            "| {}-plugin case | {} | {} | {} | {} | {} | {ratio:.2} | {connect} | {scripted} | {floor} | {} |",
            p.plugins, p.plugin.label(), ms(r.median_us), ms(r.p99_us), ms(g.median_us),
            ms(g.p99_us), met(ratio <= REGISTRATION_TARGET),
        ))
    })));
}

fn render_hop(v: &mut Vec<(&'static str, String)>, hop: &hop::Hop) {
    v.extend([
        ("hops", hop.iterations.to_string()),
        ("hop_warmup", (hop.iterations / 10).to_string()),
        ("hop_request", hop.request_payload_bytes.to_string()),
        ("hop_out", hop.trunk_bytes.0.to_string()),
        ("hop_back", hop.trunk_bytes.1.to_string()),
        ("hop_go_version", hop.go.go_version.clone()),
        ("hop_gomaxprocs", hop.go.gomaxprocs.to_string()),
    ]);
    let cases = [
        (
            "ttRPC over mux (one hop)",
            hop.rust_ttrpc_over_mux,
            hop.go.ttrpc_over_mux,
        ),
        ("raw socket pair echo", hop.rust_raw, hop.go.raw),
    ];
    v.push((
        "hop_rows",
        rows(cases, |(name, rust, go)| {
            Some(format!(
                "| {name} | {:.2} µs | {:.2} µs | {:.2} µs | {:.2} µs | {:.2} | {:.2} |",
                rust.median_us,
                rust.p99_us,
                go.median_us,
                go.p99_us,
                rust.median_us / go.median_us,
                rust.p99_us / go.p99_us
            ))
        }),
    ));
    let (rust, go) = hop.over_raw();
    let verdict = met(rust <= HOP_TARGET);
    v.push((
        "hop_over_raw",
        format!(
            "One hop over the raw round trip, median: Rust {rust:.2}× ({verdict}), Go {go:.2}×."
        ),
    ));
}

fn render_wasm(v: &mut Vec<(&'static str, String)>, p: &Pair, counts: Counts) {
    let size = std::fs::metadata(nri_interop::wasm_plugin(WASM_MODULE))
        .map_or(0.0, |m| m.len() as f64 / 1e6);
    v.extend([
        ("wasm_mb", format!("{size:.1}")),
        ("wasm_starts", counts.wasm_starts.to_string()),
        ("wasm_calls", counts.create.to_string()),
        ("wasm_warmup", (counts.create / 10).to_string()),
        ("wasm_create_target", WASM_CREATE_TARGET.to_string()),
        ("wasm_startup_target", WASM_STARTUP_TARGET.to_string()),
    ]);
    let (rs, gs) = (lat(&p.rust, |r| r.startup), lat(&p.go, |r| r.startup));
    let (rc, gc) = creates(p);
    let us = |v: f64| format!("{v:.0} µs");
    let row = |name: &str, rust: [String; 2], go: [String; 2], ratio: f64, target: Option<f64>| {
        let target = target.map_or_else(String::new, |t| format!("≤ {t} ({})", met(ratio <= t)));
        let ([rm, rp], [gm, gp]) = (rust, go);
        format!("| {name} | {rm} | {rp} | {gm} | {gp} | {ratio:.3} | {target} |")
    };
    let none = || [String::new(), String::new()];
    let (rf, gf) = (
        p.rust.first_create_us.unwrap_or_default(),
        p.go.first_create_us.unwrap_or(f64::NAN),
    );
    let mut table = vec![
        row(
            "start-up with the plugin",
            [ms(rs.median_us), ms(rs.p99_us)],
            [ms(gs.median_us), ms(gs.p99_us)],
            rs.median_us / gs.median_us,
            Some(WASM_STARTUP_TARGET),
        ),
        row(
            "first CreateContainer",
            [us(rf), String::new()],
            [us(gf), String::new()],
            rf / gf,
            None,
        ),
        row(
            "CreateContainer, steady state",
            [us(rc.median_us), us(rc.p99_us)],
            [us(gc.median_us), us(gc.p99_us)],
            rc.median_us / gc.median_us,
            Some(WASM_CREATE_TARGET),
        ),
    ];
    let mut budget_note = String::new();
    if let Some(m) = p.rust.module {
        table.push(row(
            "the module's two calls alone (nri-wasm, the adaptation's requests)",
            [us(m.median_us), us(m.p99_us)],
            none(),
            m.median_us / gc.median_us,
            None,
        ));
        if let Some(w) = p.rust.wasm_work {
            table.push(row(
                "the work around the two calls that no runtime can skip, alone",
                [us_tenths(w.median_us), us_tenths(w.p99_us)],
                none(),
                w.median_us / gc.median_us,
                None,
            ));
            let both = m.median_us + w.median_us;
            table.push(row(
                "the two together: a runtime that adds nothing else",
                [us(both), String::new()],
                none(),
                both / gc.median_us,
                None,
            ));
        }
        let budget = WASM_CREATE_TARGET * gc.median_us - m.median_us;
        let ours = us_tenths(rc.median_us - m.median_us);
        budget_note = match budget < 0.0 {
            true => format!(
                "* The module's own {} per CreateContainer are already above the target ({} for \
                 the whole call). Ours adds {ours} to them (its median less the module's).",
                us(m.median_us),
                us_tenths(WASM_CREATE_TARGET * gc.median_us),
            ),
            false => format!(
                "* At the target, a runtime may add {} to the module's own {} per \
                 CreateContainer; ours adds {ours} (its median less the module's).",
                us_tenths(budget),
                us(m.median_us),
            ),
        };
    }
    v.push(("wasm_rows", table.join("\n")));
    v.push(("wasm_budget", budget_note));
}

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
