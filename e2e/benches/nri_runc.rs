//! The latency nri-runc and nri-hostd add to `create` + `start` + `delete`
//! of a container, against bare runc, with 0, 1 and 8 external plugins
//! (`nri-template`, subscribed to every event). Needs root; writes
//! `docs/PERFORMANCE-oci-engines.md`.
//!
//! ```text
//! cargo bench -p nri-e2e --bench nri_runc          # NRI_RUNC_BENCH_ITERATIONS=100
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nri_e2e::host::{self, Daemon};
use nri_e2e::plugins::{bin, start_external};
use nri_e2e::podman::{binaries, busybox_bundle, Hostd, PACKAGES};
use nri_e2e::workspace::root;

/// One lifecycle through `runtime`, with `env`; its duration: `create` and
/// `start` timed, then (untimed) the wait for `true` to exit, then `delete`
/// timed. Deleting a container still running would measure runc's kill and
/// its wait for the exit instead.
fn lifecycle(
    runtime: &Path,
    runc: &Path,
    root_dir: &Path,
    bundle: &Path,
    id: &str,
    env: &[(&str, &Path)],
) -> Duration {
    let step = |args: &[&str]| {
        let start = Instant::now();
        let status = Command::new(runtime)
            .arg("--root")
            .arg(root_dir)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run the runtime");
        assert!(status.success(), "{} {args:?} failed", runtime.display());
        start.elapsed()
    };
    let b = bundle.to_string_lossy().into_owned();
    let mut total = step(&["create", "--bundle", &b, id]);
    total += step(&["start", id]);
    let stopped = host::wait_for("the container to exit", Duration::from_secs(10), || {
        let out = Command::new(runc)
            .arg("--root")
            .arg(root_dir)
            .args(["state", id])
            .output()
            .ok()?;
        let state: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (state["status"] == "stopped").then_some(())
    });
    stopped.expect("container exits");
    total + step(&["delete", id])
}

/// One way of running containers, and its measured lifecycles.
struct Case {
    label: String,
    runtime: PathBuf,
    config: Option<PathBuf>,
    _hostd: Option<Hostd>,
    _plugins: Vec<Daemon>,
    times: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    if !host::prepare("nri-runc bench", PACKAGES) {
        return;
    }
    let iterations: usize = std::env::var("NRI_RUNC_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().expect("temp dir");
    let bundle = busybox_bundle(dir.path(), &["true"]).expect("bundle");
    let (_, wrapper) = binaries().expect("build nri-runc");
    let template = bin("nri-template").expect("build nri-template");
    let runc_path = Command::new("sh")
        .args(["-c", "command -v runc"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .expect("runc in PATH");
    let root_dir = dir.path().join("runc-root");

    // Every case is set up first, then the cases take turns, lifecycle by
    // lifecycle, so that a busy machine weighs on all of them alike.
    let mut cases: Vec<Case> = vec![Case {
        label: "bare runc".into(),
        runtime: runc_path.clone().into(),
        config: None,
        _hostd: None,
        _plugins: Vec::new(),
        times: Vec::new(),
    }];
    for n in [0usize, 1, 8] {
        let case_dir = dir.path().join(format!("case-{n}"));
        std::fs::create_dir_all(&case_dir).expect("case dir");
        // Logging as in production (`info`), not the suites' `debug`.
        let mut hostd = Hostd::configure(&case_dir, "").expect("configure nri-hostd");
        hostd.log_filter = "info".into();
        // The daemon's default exit check (2 s), not the suites' 500 ms: each
        // check runs `runc list`, which would compete with the measurement.
        let text = std::fs::read_to_string(&hostd.config).expect("read nri-hostd.toml");
        let text = text.replace(
            "exit_poll_interval = \"500ms\"",
            "exit_poll_interval = \"2s\"",
        );
        std::fs::write(&hostd.config, text).expect("write nri-hostd.toml");
        hostd.restart().expect("start nri-hostd");
        let mut plugins = Vec::new();
        for i in 0..n {
            let socket = hostd.nri_socket.to_string_lossy().into_owned();
            let idx = format!("{:02}", 10 + i);
            let name = format!("template{i}");
            let args = ["-idx", &idx, "-name", &name, "-socket", &socket];
            plugins.push(start_external(&name, &template, &args, &case_dir).expect("plugin"));
            hostd
                .wait_registered(&format!("{idx}-{name}"))
                .expect("plugin registers");
        }
        let config = case_dir.join("nri-runc.toml");
        std::fs::write(
            &config,
            format!("control_socket = {:?}\n", hostd.control_socket),
        )
        .expect("write nri-runc.toml");
        cases.push(Case {
            label: format!("nri-runc, {n} plugin{}", if n == 1 { "" } else { "s" }),
            runtime: wrapper.clone(),
            config: Some(config),
            _hostd: Some(hostd),
            _plugins: plugins,
            times: Vec::new(),
        });
    }
    for i in 0..iterations + 5 {
        for (c, case) in cases.iter_mut().enumerate() {
            let id = format!("bench-{}-{c}-{i}", std::process::id());
            let env: Vec<(&str, &Path)> = case
                .config
                .iter()
                .map(|p| ("NRI_RUNC_CONFIG", p.as_path()))
                .collect();
            let t = lifecycle(
                &case.runtime,
                Path::new(&runc_path),
                &root_dir,
                &bundle,
                &id,
                &env,
            );
            if i >= 5 {
                case.times.push(t);
            }
        }
    }
    let mut rows = Vec::new();
    let mut bare_median = None;
    for case in &mut cases {
        case.times.sort();
        let median = percentile(&case.times, 0.5);
        let added = match bare_median {
            Some(bare) => ms(median.saturating_sub(bare)),
            None => {
                bare_median = Some(median);
                "–".to_owned()
            }
        };
        let p90 = percentile(&case.times, 0.9);
        println!(
            "{}: median {} p90 {} added {added}",
            case.label,
            ms(median),
            ms(p90)
        );
        rows.push((case.label.clone(), median, p90, added));
    }

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut doc = String::new();
    let _ = writeln!(
        doc,
        "# Performance: the latency nri-runc adds\n\n\
         Generated by `cargo bench -p nri-e2e --bench nri_runc` (`e2e/benches/nri_runc.rs`), as root.\n\n\
         One lifecycle is `create` + `start` + `delete` of a busybox container running `true`\n\
         (bundle from `umoci unpack`), each command a process as an engine runs it, the three\n\
         commands timed (the wait for `true` to exit before `delete` is not): through bare runc, and through `nri-runc`\n\
         talking to `nri-hostd` (log filter `info`, exit checks every 2 s) with 0, 1 and 8 external plugins (`nri-template`, subscribed to every\n\
         event, logging each to a file). {iterations} measured lifecycles per case after 5 warm-up ones;\n\
         the cases take turns, one lifecycle each, so that other work on the machine weighs on all alike.\n\
         Release build (the bench profile), binaries and plugins alike; `nri-runc` linked statically\n\
         (`-C target-feature=+crt-static`), as its README advises.\n\n\
         Target: under 5 ms added at the median with one plugin.\n\n\
         * CPUs: {}; load average at the end: {}\n\n\
         | case | median | p90 | added at the median |\n|---|---:|---:|---:|",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    );
    for (label, median, p90, added) in &rows {
        let _ = writeln!(
            doc,
            "| {label} | {} | {} | {added} |",
            ms(*median),
            ms(*p90)
        );
    }
    let path = root().join("docs").join("PERFORMANCE-oci-engines.md");
    std::fs::write(&path, doc).expect("write the report");
    println!("wrote {}", path.display());
}
