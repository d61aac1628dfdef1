//! End-to-end: podman 4 (Debian) and runc, with NRI given by `nri-runc`
//! and `nri-hostd`; and `nri-runc` driven directly through runc's command
//! line. Every effect is checked where it lands: inside the running
//! container, in its cgroup, in the runtime's state.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nri_e2e::host::{prepare as host_prepare, run, wait_for};
use nri_e2e::plugins::{bin, logged_events, start_external, OWN_POD_LIFECYCLE as LIFECYCLE};
use nri_e2e::podman::{binaries, busybox_bundle, Hostd, Podman, PACKAGES, WAIT};

fn prepare() -> bool {
    host_prepare("podman", PACKAGES)
}

/// A temporary directory for a test, once the suite can run here.
fn prepared_dir() -> Option<tempfile::TempDir> {
    prepare().then(|| tempfile::tempdir().unwrap())
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The events in the logger's log `log` once the last is RemovePodSandbox.
fn logged_until_removal(log: &Path) -> Vec<String> {
    wait_for("the logger to see the removal", WAIT, || {
        let events = logged_events(&fs::read_to_string(log).unwrap_or_default());
        (events.last().map(String::as_str) == Some("RemovePodSandbox")).then_some(events)
    })
    .unwrap()
}

/// Waits until the container's process 1 has `entry` in its environment
/// (read with `podman exec`).
fn wait_for_env(podman: &Podman, id: &str, entry: &str) {
    wait_for(
        &format!("{entry} in the container"),
        Duration::from_secs(10),
        || {
            let environ = podman.cat(id, "/proc/1/environ").ok()?;
            environ.contains(entry).then_some(())
        },
    )
    .unwrap();
}

/// The soft and hard `nofile` limits of the container's process 1, from
/// `/proc/1/limits` read with `podman exec`.
fn nofile(podman: &Podman, id: &str) -> (String, String) {
    let limits = podman.cat(id, "/proc/1/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

/// The real runtime's view of a container (`runc state`).
fn runc_state(id: &str) -> serde_json::Value {
    let out = run(Command::new("runc").args(["state", id])).unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The probe plugin (a binary of this crate), external, recording its
/// events as JSON lines.
struct Probe {
    _process: nri_e2e::host::Daemon,
    record: std::path::PathBuf,
}

impl Probe {
    fn start(dir: &Path, hostd: &Hostd) -> Probe {
        let record = dir.join("probe.jsonl");
        let socket = hostd.nri_socket.to_string_lossy().into_owned();
        let r = record.to_string_lossy().into_owned();
        let args = [
            "--socket", &socket, "--name", "probe", "--idx", "50", "--record", &r,
        ];
        let exe = Path::new(env!("CARGO_BIN_EXE_nri-e2e-probe"));
        let process = start_external("probe", exe, &args, dir).unwrap();
        hostd.wait_registered("50-probe").unwrap();
        Probe {
            _process: process,
            record,
        }
    }

    /// The records of `event`, in order.
    fn events(&self, event: &str) -> Vec<serde_json::Value> {
        fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["event"] == event)
            .collect()
    }
}

/// nri-hostd with the probe plugin and podman, under a directory of their
/// own (fields drop in this order: containers first, the directory last).
struct ProbeRun {
    podman: Podman,
    probe: Probe,
    hostd: Hostd,
    _dir: tempfile::TempDir,
}

impl ProbeRun {
    /// `None` where the suite cannot run (see [`prepare`]).
    fn start() -> Option<ProbeRun> {
        if !prepare() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let hostd = Hostd::start(dir.path(), "").unwrap();
        let probe = Probe::start(dir.path(), &hostd);
        let podman = Podman::with_busybox(dir.path()).unwrap();
        Some(ProbeRun {
            podman,
            probe,
            hostd,
            _dir: dir,
        })
    }

    /// A container `c0` running `sleep`, with podman's options `extra` and
    /// the probe's instruction `annotation`; its id.
    fn run_c0(&self, extra: &[&str], annotation: &str) -> String {
        let mut args = vec!["--hostname", "c0"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--annotation", annotation, Podman::BUSYBOX, "sleep", "1000"]);
        self.podman.run_detached(&args).unwrap()
    }

    /// The runtime's answer to the probe's first UpdateContainers.
    fn first_update_result(&self) -> serde_json::Value {
        wait_for("the probe's update to be answered", WAIT, || {
            self.probe
                .events("UpdateContainersResult")
                .into_iter()
                .next()
        })
        .unwrap()
    }
}

// ---------------------------------------------------------------------------

/// The logger (external: env and annotation) and the ulimit adjuster
/// (pre-installed: rlimit from an annotation) change a podman container;
/// the logger sees its whole lifecycle in order.
#[test]
fn samples_adjust_podman_containers_and_see_the_lifecycle() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let mut hostd = Hostd::configure(dir.path(), "").unwrap();
    hostd
        .install_plugin(
            &bin("nri-ulimit-adjuster").unwrap(),
            "20-ulimit-adjuster",
            None,
        )
        .unwrap();
    hostd.enable_metrics().unwrap();
    hostd.restart().unwrap();
    let (_logger, log) = hostd.start_logger(dir.path()).unwrap();
    hostd.wait_registered("20-ulimit-adjuster").unwrap();
    let podman = Podman::with_busybox(dir.path()).unwrap();

    let id = podman
        .run_detached(&[
            "--hostname",
            "web",
            "--annotation",
            // podman reads the flag as CSV (commas and newlines split values):
            // the whole value is quoted.
            "\"ulimits.noderesource.dev/container.web=[{type: nofile, hard: 16384, soft: 8192}]\"",
            Podman::BUSYBOX,
            "sleep",
            "1000",
        ])
        .unwrap();

    wait_for_env(&podman, &id, "NRI_LOGGER=logger-pid-");
    assert_eq!(nofile(&podman, &id), ("8192".into(), "16384".into()));
    let state = runc_state(&id);
    assert!(
        state["annotations"]["logger.nri-rs.dev/seen"]
            .as_str()
            .is_some_and(|v| v.starts_with("logger-pid-")),
        "{state}"
    );

    // The daemon's /metrics counted the plugin's CreateContainer call.
    let metrics = hostd.metrics().unwrap();
    assert!(
        metrics.contains(
            r#"nri_plugin_invocations_total{plugin="20-ulimit-adjuster",operation="CreateContainer",status="success",error=""} 1"#
        ),
        "{metrics}"
    );

    podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
    let mut expected = vec!["Synchronize"];
    expected.extend_from_slice(LIFECYCLE);
    assert_eq!(logged_until_removal(&log), expected);
}

/// The built-in default validator (the `[default_validator]` table) rejects
/// a container whose required plugin is missing: `podman run` fails with
/// the validator's message.
#[test]
fn validator_rejection_fails_podman_run_with_its_message() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let _hostd = Hostd::start(dir.path(), "[default_validator]\nenable = true\n").unwrap();
    let podman = Podman::with_busybox(dir.path()).unwrap();
    let out = podman.run(&[
        "--rm",
        "--annotation",
        "required-plugins.noderesource.dev=[gatekeeper]",
        Podman::BUSYBOX,
        "true",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("rejected by NRI"), "{err}");
    assert!(err.contains("gatekeeper"), "{err}");
    // Nothing was left running.
    assert_eq!(podman.ok(&["ps", "-aq"]).unwrap(), "");
}

/// A plugin's unsolicited UpdateContainers reaches the container's cgroup
/// through the real runtime's `update`.
#[test]
fn unsolicited_update_changes_the_cgroup() {
    let Some(run) = ProbeRun::start() else {
        return;
    };
    let id = run.run_c0(&["--cpu-shares", "256"], "e2e.nri-rs.dev/cpu-shares.c0=777");
    let result = run.first_update_result();
    assert_eq!(result["failed"], 0, "{result}");
    let shares = fs::read_to_string(format!(
        "/sys/fs/cgroup/cpu/libpod_parent/libpod-{id}/cpu.shares"
    ))
    .unwrap();
    assert_eq!(shares.trim(), "777");
    run.podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
}

/// `podman update` goes through the wrapper's `update` as UpdateContainer
/// and PostUpdateContainer; the new value lands in the container's cgroup.
#[test]
fn podman_update_is_an_nri_update() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let hostd = Hostd::start(dir.path(), "").unwrap();
    let (_logger, log) = hostd.start_logger(dir.path()).unwrap();
    let podman = Podman::with_busybox(dir.path()).unwrap();
    let id = podman
        .run_detached(&["--cpu-shares", "256", Podman::BUSYBOX, "sleep", "1000"])
        .unwrap();
    let cgroup = format!("/sys/fs/cgroup/cpu/libpod_parent/libpod-{id}/cpu.shares");
    assert_eq!(fs::read_to_string(&cgroup).unwrap().trim(), "256");
    podman.ok(&["update", "--cpu-shares", "512", &id]).unwrap();
    assert_eq!(fs::read_to_string(&cgroup).unwrap().trim(), "512");
    podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
    let events = logged_until_removal(&log);
    let start = events
        .iter()
        .position(|e| e == "PostStartContainer")
        .unwrap();
    assert_eq!(
        events[start + 1..start + 3],
        ["UpdateContainer", "PostUpdateContainer"],
        "{events:?}"
    );
}

/// A plugin's eviction becomes the real runtime's `kill`: the container
/// stops, and plugins get StopContainer.
#[test]
fn eviction_kills_the_container() {
    let Some(run) = ProbeRun::start() else {
        return;
    };
    let id = run.run_c0(&[], "e2e.nri-rs.dev/evict.c0=out of memory budget");
    let result = run.first_update_result();
    assert_eq!(
        (result["evicted"].as_u64(), result["failed"].as_u64()),
        (Some(1), Some(0)),
        "{result}"
    );
    // The real runtime's own view: the container is no longer running.
    // (Once podman has cleaned up after the exit, runc knows it no more.)
    wait_for("the evicted container to stop", WAIT, || {
        let out = Command::new("runc").args(["state", &id]).output().ok()?;
        let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (state["status"] != "running").then_some(())
    })
    .unwrap();
    let stop = wait_for("StopContainer at the probe", WAIT, || {
        run.probe.events("StopContainer").into_iter().next()
    })
    .unwrap();
    assert_eq!(stop["container"], id.as_str(), "{stop}");
    run.podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
}

/// The daemon killed while containers run; one container removed while it
/// is down; restarted, it synchronizes plugins with exactly the container
/// still running.
#[test]
fn restarted_daemon_resynchronizes_plugins() {
    // Kept whole: its fields drop in their order, the directory last.
    let Some(mut run) = ProbeRun::start() else {
        return;
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(
            run.podman
                .run_detached(&[Podman::BUSYBOX, "sleep", "1000"])
                .unwrap(),
        );
    }
    run.hostd.crash();
    // Removed while the daemon is down: the wrapper passes through.
    run.podman.ok(&["rm", "-f", "-t", "0", &ids[1]]).unwrap();
    run.hostd.restart().unwrap();
    let sync = wait_for("the probe to resynchronize", WAIT, || {
        run.probe.events("Synchronize").into_iter().nth(1)
    })
    .unwrap();
    assert_eq!(sync["containers"], serde_json::json!([ids[0]]), "{sync}");
    assert_eq!(sync["pods"], serde_json::json!([ids[0]]), "{sync}");
    // The daemon still follows the survivor: its removal reaches the probe.
    run.podman.ok(&["rm", "-f", "-t", "0", &ids[0]]).unwrap();
    wait_for("RemoveContainer after the restart", WAIT, || {
        run.probe.events("RemoveContainer").into_iter().next()
    })
    .unwrap();
}

/// No daemon: `pass-through` runs containers unchanged, `fail` refuses
/// them, and a container with required plugins is refused under both.
#[test]
fn daemon_down_policies() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let podman = Podman::with_busybox(dir.path()).unwrap();
    let out = podman.run(&["--rm", Podman::BUSYBOX, "sh", "-c", "echo ran"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ran");

    let out = podman.run(&[
        "--rm",
        "--annotation",
        "required-plugins.noderesource.dev=[gatekeeper]",
        Podman::BUSYBOX,
        "true",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("needs required NRI plugins"),
        "{}",
        stderr(&out)
    );

    let strict = podman
        .wrapper(
            "nri-runc-strict",
            &format!(
                "control_socket = {:?}\non_unreachable = \"fail\"\n",
                dir.path().join("hostd/control.sock")
            ),
        )
        .unwrap();
    let out = podman.run_with(&strict, &["--rm", Podman::BUSYBOX, "true"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cannot connect to nri-hostd"), "{err}");
    assert!(err.contains("on_unreachable"), "{err}");
    // podman takes "no such file or directory" in a runtime's error output
    // for the runtime binary missing (exit 127, "OCI runtime attempted to
    // invoke a command that was not found"): a stopped daemon must read as
    // what it is.
    assert!(err.contains("is nri-hostd running?"), "{err}");
    assert!(
        !err.to_ascii_lowercase()
            .contains("no such file or directory"),
        "{err}"
    );
    assert!(
        !err.contains("attempted to invoke a command that was not found"),
        "{err}"
    );
    assert_ne!(out.status.code(), Some(127), "{err}");
}

/// `nri-runc` driven through runc's command line, on a bundle made with
/// `umoci unpack`: create, start, kill, delete with the adjustment inside
/// the container; a rejection leaves the bundle byte for byte as it was;
/// other commands and their exit statuses pass through.
#[test]
fn runc_command_line_without_podman() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let hostd = Hostd::start(dir.path(), "[default_validator]\nenable = true\n").unwrap();
    let (_logger, log) = hostd.start_logger(dir.path()).unwrap();
    let (_, wrapper) = binaries().unwrap();
    let root = dir.path().join("runc-root");
    let bundle = busybox_bundle(dir.path(), &["sleep", "1000"]).unwrap();
    let config = bundle.join("config.json");
    let spec: serde_json::Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();

    let env = [("NRI_RUNC_CONFIG", dir.path().join("nri-runc.toml"))];
    fs::write(
        &env[0].1,
        format!("control_socket = {:?}\n", hostd.control_socket),
    )
    .unwrap();
    // Output goes to files: a created container holds on to the runtime's
    // standard output and error, pipes would never reach their end.
    let nri_runc = |args: &[&str]| {
        let (out, err) = (dir.path().join("out"), dir.path().join("err"));
        let status = Command::new(&wrapper)
            .arg("--root")
            .arg(&root)
            .args(args)
            .envs(env.iter().cloned())
            .stdin(std::process::Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap())
            .status()
            .unwrap();
        std::process::Output {
            status,
            stdout: fs::read(&out).unwrap(),
            stderr: fs::read(&err).unwrap(),
        }
    };
    let id = format!("nri-runc-e2e-{}", std::process::id());
    let b = bundle.to_string_lossy().into_owned();

    // A rejection: non-zero exit, the validator's message, bundle untouched.
    let mut rejected = spec.clone();
    rejected["annotations"] =
        serde_json::json!({"required-plugins.noderesource.dev": "[gatekeeper]"});
    fs::write(&config, serde_json::to_vec_pretty(&rejected).unwrap()).unwrap();
    let before = fs::read(&config).unwrap();
    let out = nri_runc(&["create", "--bundle", &b, &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("gatekeeper"), "{}", stderr(&out));
    assert_eq!(fs::read(&config).unwrap(), before, "the bundle was changed");
    assert!(
        !nri_runc(&["state", &id]).status.success(),
        "the container exists"
    );

    // Accepted: the adjustment is in the container's process.
    fs::write(&config, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
    let out = nri_runc(&["create", "--bundle", &b, &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nri_runc(&["start", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let state: serde_json::Value =
        serde_json::from_slice(&nri_runc(&["state", &id]).stdout).unwrap();
    assert_eq!(state["status"], "running");
    let pid = state["pid"].as_u64().unwrap();
    // `start` returns before runc's init has exec'd the container's
    // process (whose environment it is): wait for the exec.
    wait_for("the container's process", Duration::from_secs(10), || {
        let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
        String::from_utf8_lossy(&environ)
            .contains("NRI_LOGGER=logger-pid-")
            .then_some(())
    })
    .unwrap();
    // Everything else passes through, exit statuses included.
    let out = nri_runc(&["ps", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let real = Command::new("runc")
        .arg("--root")
        .arg(&root)
        .arg("frobnicate")
        .output()
        .unwrap();
    let ours = nri_runc(&["frobnicate"]);
    assert_eq!(ours.status.code(), real.status.code());
    // The same message (runc's, with its time stamp left out).
    let message =
        |o: &std::process::Output| stderr(o).split_once("level=").map(|(_, m)| m.to_owned());
    assert_eq!(message(&ours), message(&real));
    assert!(message(&ours).is_some_and(|m| m.contains("frobnicate")));

    let out = nri_runc(&["kill", &id, "KILL"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the container to stop", Duration::from_secs(10), || {
        let s: serde_json::Value =
            serde_json::from_slice(&nri_runc(&["state", &id]).stdout).ok()?;
        (s["status"] == "stopped").then_some(())
    })
    .unwrap();
    let out = nri_runc(&["delete", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut expected = vec![
        "Synchronize",
        // Rejected by the validator: the creation is undone for plugins.
        "RunPodSandbox",
        "CreateContainer",
        "ValidateContainerAdjustment",
        "StopContainer",
        "RemoveContainer",
        "StopPodSandbox",
        "RemovePodSandbox",
    ];
    expected.extend_from_slice(LIFECYCLE);
    assert_eq!(logged_until_removal(&log), expected);
}

/// The Go reference plugin (`nri-ref-plugin` of the interop harness, on the
/// official Go stub): its environment variable, annotation and rlimit
/// inside the running podman container, and its own lifecycle log; then, as
/// a rejecting validator, `podman run` failing with its reason.
#[test]
fn go_reference_plugin_adjusts_and_rejects_podman_containers() {
    let Some(dir) = prepared_dir() else {
        return;
    };
    let hostd = Hostd::start(dir.path(), "").unwrap();
    let go_plugin = nri_interop::harness_bin("nri-ref-plugin");
    let start = |name: &str, idx: &str, config: serde_json::Value| {
        let file = nri_interop::write_json(dir.path(), &format!("{name}.json"), &config).unwrap();
        let log = dir.path().join(format!("{name}.jsonl"));
        let socket = hostd.nri_socket.to_string_lossy().into_owned();
        let (f, l) = (
            file.to_string_lossy().into_owned(),
            log.to_string_lossy().into_owned(),
        );
        let args = [
            "-name", name, "-idx", idx, "-socket", &socket, "-config", &f, "-log", &l,
        ];
        let process = start_external(name, &go_plugin, &args, dir.path()).unwrap();
        hostd.wait_registered(&format!("{idx}-{name}")).unwrap();
        (process, log)
    };
    let (_adjuster, log) = start(
        "goref",
        "30",
        serde_json::json!({"adjust": {
            "env": [{"key": "GO_NRI", "value": "reference"}],
            "annotations": {"go.nri-rs.dev/ref": "yes"},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 12345, "soft": 6789}]
        }}),
    );
    let podman = Podman::with_busybox(dir.path()).unwrap();
    let id = podman
        .run_detached(&[Podman::BUSYBOX, "sleep", "1000"])
        .unwrap();
    wait_for_env(&podman, &id, "GO_NRI=reference");
    assert_eq!(nofile(&podman, &id), ("6789".into(), "12345".into()));
    assert_eq!(runc_state(&id)["annotations"]["go.nri-rs.dev/ref"], "yes");
    podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
    let events = wait_for("the Go plugin to see the removal", WAIT, || {
        let events = nri_interop::read_event_log(&log).ok()?;
        nri_interop::event_names(&events)
            .contains(&"RemovePodSandbox")
            .then_some(events)
    })
    .unwrap();
    let lifecycle: Vec<&str> = nri_interop::event_names(&events)
        .into_iter()
        .filter(|e| LIFECYCLE.contains(e))
        .collect();
    assert_eq!(lifecycle, LIFECYCLE);

    let (_validator, _) = start(
        "gogate",
        "90",
        serde_json::json!({"reject": true, "reason": "the Go gate says no"}),
    );
    let out = podman.run(&["--rm", Podman::BUSYBOX, "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the Go gate says no"),
        "{}",
        stderr(&out)
    );
}
