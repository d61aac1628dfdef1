//! Our plugins on a real containerd, driven through CRI with `crictl` as the
//! kubelet would, with runc from Debian. Every assertion looks where the effect
//! lands: inside the running container (`crictl exec`), in its cgroup files,
//! or in containerd's own view (`crictl inspect`, `crictl pods`/`ps`).
//!
//! Each test has a containerd of its own (see `nri_e2e::containerd`). The
//! containerd 1.7 variants run the same bodies on the oldest release we claim
//! (NRI off by default there, enabled in its configuration).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nri_e2e::containerd::{Containerd, CONTAINERD_17_VERSION, CONTAINERD_VERSION, PACKAGES};
use nri_e2e::cri::{write_plugin_wrapper, ContainerSpec, CriRuntime, Options, PodSpec};
use nri_e2e::crio::Crio;
use nri_e2e::host::{self, wait_for, Daemon};
use nri_e2e::plugins::{bin, logged_events, start_external};

const WAIT: Duration = Duration::from_secs(60);

fn prepare() -> bool {
    let mut packages = PACKAGES.to_vec();
    packages.extend_from_slice(nri_e2e::image::PACKAGES);
    host::prepare("containerd", &packages)
}

fn prepare_crio() -> bool {
    let mut packages = nri_e2e::crio::PACKAGES.to_vec();
    packages.extend_from_slice(nri_e2e::image::PACKAGES);
    host::prepare("cri-o", &packages)
}

/// Which runtime a shared test body runs on.
#[derive(Clone, Copy)]
enum Runtime {
    Containerd(&'static str),
    Crio,
}

impl Runtime {
    fn prepare(self) -> bool {
        match self {
            Runtime::Containerd(_) => prepare(),
            Runtime::Crio => prepare_crio(),
        }
    }

    fn start(self, options: Options) -> Box<dyn CriRuntime> {
        match self {
            Runtime::Containerd(version) => Box::new(
                Containerd::start(Options {
                    version: version.into(),
                    ..options
                })
                .unwrap(),
            ),
            Runtime::Crio => Box::new(Crio::start(options).unwrap()),
        }
    }
}

/// Waits until the external plugin `name` (`NN-name`) is registered and
/// synchronized, as containerd itself logs it (the runtime's own view).
fn wait_registered(ctrd: &dyn CriRuntime, plugin: &str, process: &mut Daemon) {
    wait_for(&format!("containerd to synchronize {plugin}"), WAIT, || {
        assert!(
            process.is_running(),
            "{} exited:\n{}\n{} log:\n{}",
            process.name(),
            process.log(),
            ctrd.describe(),
            ctrd.log()
        );
        ctrd.plugin_synchronized(plugin).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\ncontainerd log:\n{}", ctrd.log()));
}

// ---------------------------------------------------------------------------
// Item 1: every sample plugin that can work here, external and pre-installed.

/// Files the sample plugins use: hook directory and hook, v0.1 configuration
/// and plugin directory, a host directory to bind-mount.
struct Fixtures {
    dir: tempfile::TempDir,
}

impl Fixtures {
    fn new() -> Fixtures {
        let mut dir = tempfile::tempdir().unwrap();
        if std::env::var_os("NRI_E2E_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("e2e: keeping {}", dir.path().display());
        }
        let f = Fixtures { dir };
        fs::create_dir_all(f.hooks_dir()).unwrap();
        fs::create_dir_all(f.v01_bin_dir()).unwrap();
        fs::create_dir_all(f.mount_source()).unwrap();
        fs::write(
            f.mount_source().join("marker"),
            "mounted by device-injector\n",
        )
        .unwrap();
        // The hook runs in the runtime's namespaces once the container
        // started (poststart); it writes into the container's root through
        // /proc/<pid>/root, the pid coming from the state on its standard input.
        let hook = f.dir.path().join("hook.sh");
        fs::write(
            &hook,
            r#"#!/bin/sh
pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
echo "hooked by $1" > "/proc/$pid/root/nri-hooked"
"#,
        )
        .unwrap();
        chmod_x(&hook);
        fs::write(
            f.hooks_dir().join("e2e.json"),
            serde_json::json!({
                "version": "1.0.0",
                "hook": {"path": hook, "args": ["hook.sh", "hook-injector"]},
                "when": {"annotations": {"e2e\\.nri-rs\\.dev/hook": "yes"}},
                "stages": ["poststart"]
            })
            .to_string(),
        )
        .unwrap();
        fs::copy(
            bin("nri-v010-test-clearcfs").unwrap(),
            f.v01_bin_dir().join("clearcfs"),
        )
        .unwrap();
        fs::write(
            f.v01_conf(),
            r#"{"version": "0.1", "plugins": [{"type": "clearcfs", "conf": {}}]}"#,
        )
        .unwrap();
        f
    }
    fn hooks_dir(&self) -> PathBuf {
        self.dir.path().join("hooks.d")
    }
    fn v01_bin_dir(&self) -> PathBuf {
        self.dir.path().join("v01-bin")
    }
    fn v01_conf(&self) -> PathBuf {
        self.dir.path().join("conf.json")
    }
    fn mount_source(&self) -> PathBuf {
        self.dir.path().join("mount-source")
    }
    fn logger_log(&self) -> PathBuf {
        self.dir.path().join("logger.log")
    }
}

/// The socket flag every sample plugin accepts.
fn socket_flag(bin: &str) -> &'static str {
    match bin {
        "nri-device-injector" | "nri-hook-injector" => "-socket-path",
        _ => "-socket",
    }
}

fn chmod_x(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// One sample plugin: how it runs and what it needs.
struct Sample {
    /// Index and name (`NN-name` when pre-installed).
    idx: &'static str,
    name: &'static str,
    bin: &'static str,
    /// Flags (beyond identity and socket) it needs.
    flags: Vec<String>,
    /// Its drop-in configuration, for the pre-installed variant; when `None`
    /// and `flags` is not empty, a wrapper script passes the flags.
    config: Option<String>,
}

fn samples(f: &Fixtures) -> Vec<Sample> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        Sample {
            idx: "10",
            name: "logger",
            bin: "nri-logger",
            flags: vec![
                "-add-env".into(),
                "NRI_LOGGER".into(),
                "-add-annotation".into(),
                "logger.e2e.nri-rs.dev/seen-by".into(),
                "-log-file".into(),
                s(f.logger_log()),
            ],
            config: Some(format!(
                "addEnv: NRI_LOGGER\naddAnnotation: logger.e2e.nri-rs.dev/seen-by\nlogFile: {}\n",
                f.logger_log().display()
            )),
        },
        Sample {
            idx: "20",
            name: "ulimit-adjuster",
            bin: "nri-ulimit-adjuster",
            flags: vec![],
            config: None,
        },
        Sample {
            idx: "30",
            name: "device-injector",
            bin: "nri-device-injector",
            flags: vec![],
            config: None,
        },
        Sample {
            idx: "40",
            name: "hook-injector",
            bin: "nri-hook-injector",
            flags: vec!["-hooks-dir".into(), s(f.hooks_dir())],
            config: None,
        },
        Sample {
            idx: "50",
            name: "v010-adapter",
            bin: "nri-v010-adapter",
            flags: vec![
                "-conf".into(),
                s(f.v01_conf()),
                "-bin-dir".into(),
                s(f.v01_bin_dir()),
            ],
            config: None,
        },
        Sample {
            idx: "60",
            name: "template",
            bin: "nri-template",
            flags: vec![],
            config: Some("cfgParam1: from conf.d\n".into()),
        },
        Sample {
            idx: "70",
            name: "writable-cgroups",
            bin: "nri-writable-cgroups",
            flags: vec!["-host-mount-file".into(), "/proc/1/mountinfo".into()],
            config: None,
        },
        // The minimal plugin on the blocking stub (`nri_stub::blocking`, no
        // async runtime); its annotation is keyed by the name it is given.
        Sample {
            idx: "80",
            name: "min-blocking",
            bin: "nri-rs-min-blocking-plugin",
            flags: vec!["-name".into(), "min-blocking".into()],
            config: None,
        },
    ]
}

const ULIMITS: &str = "- type: nofile\n  soft: 1234\n  hard: 4321\n- type: RLIMIT_MEMLOCK\n  soft: 65536\n  hard: 131072\n";

fn sample_pod(f: &Fixtures) -> PodSpec {
    PodSpec::new("samples")
        .annotation("ulimits.noderesource.dev/container.c0", ULIMITS)
        .annotation(
            "devices.noderesource.dev/container.c0",
            "- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3\n  file_mode: 0640\n",
        )
        .annotation(
            "mounts.noderesource.dev/container.c0",
            &format!(
                "- source: {}\n  destination: /mnt/e2e\n  type: bind\n  options: [bind, ro]\n",
                f.mount_source().display()
            ),
        )
        .annotation("e2e.nri-rs.dev/hook", "yes")
        .annotation("writable-cgroups.noderesource.dev", "true")
}

/// Runs a container through every sample plugin and checks each effect where
/// it lands.
fn check_sample_effects(ctrd: &dyn CriRuntime, f: &Fixtures) {
    let crictl = ctrd.crictl();
    let pod = sample_pod(f);
    let pod_id = crictl.run_pod(&pod).unwrap();
    // A CFS quota the v0.1 plugin clears once the container started.
    // The v0.1 clearcfs plugin reads `qos.class` from the container's annotations.
    let ctr = ContainerSpec::new("c0")
        .annotation("qos.class", "ls")
        .resources(serde_json::json!({"cpu_quota": 20000, "cpu_period": 100000}));
    let id = crictl
        .run_container(&pod_id, &pod, &ctr)
        .unwrap_or_else(|e| {
            panic!("{e}\ncontainerd log:\n{}", ctrd.log());
        });

    // logger: environment of PID 1 and the annotation in the runtime's spec.
    let environ = crictl.exec(&id, &["cat", "/proc/1/environ"]).unwrap();
    let env: Vec<&str> = environ.split('\0').collect();
    assert!(
        env.iter().any(|e| e.starts_with("NRI_LOGGER=logger-pid-")),
        "logger's variable missing from /proc/1/environ: {env:?}"
    );
    let inspect = crictl.inspect(&id).unwrap();
    let annotations = &inspect["info"]["runtimeSpec"]["annotations"];
    assert!(
        annotations["logger.e2e.nri-rs.dev/seen-by"]
            .as_str()
            .is_some_and(|v| v.starts_with("logger-pid-")),
        "logger's annotation missing from the runtime spec: {annotations}"
    );

    // The plugin on the blocking stub: its annotation in the runtime's spec.
    assert_eq!(
        annotations["bench.nri.io/plugin-min-blocking"], "on",
        "the blocking plugin's annotation is missing from the runtime spec: {annotations}"
    );

    // ulimit-adjuster: the rlimits of PID 1.
    let limits = crictl.exec(&id, &["cat", "/proc/1/limits"]).unwrap();
    let limit = |name: &str| -> Vec<String> {
        let line = limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in /proc/1/limits:\n{limits}"));
        line[name.len()..]
            .split_whitespace()
            .take(2)
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(limit("Max open files"), ["1234", "4321"], "{limits}");
    assert_eq!(limit("Max locked memory"), ["65536", "131072"], "{limits}");

    // device-injector: the device node and the bind mount.
    let stat = crictl
        .exec(&id, &["stat", "-c", "%F %t:%T %a", "/dev/nri-null"])
        .unwrap();
    assert_eq!(stat.trim(), "character special file 1:3 640");
    let marker = crictl.exec(&id, &["cat", "/mnt/e2e/marker"]).unwrap();
    assert_eq!(marker, "mounted by device-injector");
    let mounts = crictl.exec(&id, &["cat", "/proc/self/mounts"]).unwrap();
    let e2e_mount = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/mnt/e2e"))
        .unwrap_or_else(|| panic!("/mnt/e2e not mounted:\n{mounts}"));
    assert!(
        e2e_mount.contains(" ro,") || e2e_mount.contains(" ro "),
        "{e2e_mount}"
    );

    // hook-injector: the hook ran and wrote into the container's root.
    let hooked = crictl.exec(&id, &["cat", "/nri-hooked"]).unwrap();
    assert_eq!(hooked, "hooked by hook-injector");

    // v010-adapter with the v0.1 clearcfs plugin: the CFS quota of the
    // container's cgroup is cleared (the runtime set 20000 from CRI).
    assert_eq!(
        crictl.cgroup_file(&id, "cpu", "cpu.cfs_quota_us").unwrap(),
        "-1"
    );

    // writable-cgroups: this host has cgroup v1 (no nsdelegate), so the plugin
    // must leave /sys/fs/cgroup read-only.
    let cgroup_mount = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/sys/fs/cgroup"))
        .unwrap_or_else(|| panic!("no /sys/fs/cgroup mount:\n{mounts}"));
    assert!(cgroup_mount.contains("ro"), "{cgroup_mount}");

    crictl.call(&["rmp", "-f", &pod_id]).unwrap();
}

fn samples_external(runtime: Runtime) {
    if !runtime.prepare() {
        return;
    }
    let f = Fixtures::new();
    let ctrd = runtime.start(Options::default());
    let ctrd = ctrd.as_ref();
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let mut plugins: Vec<Daemon> = Vec::new();
    for s in samples(&f) {
        let mut args: Vec<String> = vec![
            "-idx".into(),
            s.idx.into(),
            "-name".into(),
            s.name.into(),
            socket_flag(s.bin).into(),
            socket.clone(),
        ];
        args.extend(s.flags.iter().cloned());
        let mut p = start_external(s.name, &bin(s.bin).unwrap(), &args, f.dir.path()).unwrap();
        wait_registered(ctrd, &format!("{}-{}", s.idx, s.name), &mut p);
        plugins.push(p);
    }
    // differ registers at two indices around every other plugin and logs what
    // the plugins between them changed (external only: one process, two
    // connections).
    let differ_log = f.dir.path().join("differ-diffs.log");
    let mut differ = start_external(
        "differ",
        &bin("nri-differ").unwrap(),
        &[
            "-indices",
            "05,95",
            "-socket-path",
            &socket,
            "-log-file",
            &differ_log.to_string_lossy(),
        ],
        f.dir.path(),
    )
    .unwrap();
    wait_registered(ctrd, "05-differ", &mut differ);
    wait_registered(ctrd, "95-differ", &mut differ);
    plugins.push(differ);
    check_sample_effects(ctrd, &f);
    let diffs = fs::read_to_string(&differ_log).unwrap_or_default();
    assert!(
        diffs.lines().any(
            |l| l.contains("[95] CreateContainer: container: create: [env")
                && l.contains("NRI_LOGGER=logger-pid-")
        ),
        "differ did not show the logger's variable added between 05 and 95:\n{diffs}"
    );
    for p in &mut plugins {
        assert!(p.is_running(), "{} exited:\n{}", p.name(), p.log());
    }
}

fn samples_preinstalled(runtime: Runtime) {
    if !runtime.prepare() {
        return;
    }
    let f = Fixtures::new();
    let wrappers = f.dir.path().join("wrappers");
    fs::create_dir_all(&wrappers).unwrap();
    let mut options = Options::default();
    for s in samples(&f) {
        let file = format!("{}-{}", s.idx, s.name);
        let program = bin(s.bin).unwrap();
        match &s.config {
            Some(config) => {
                options.plugins.push((file.clone(), program));
                options
                    .plugin_configs
                    .push((format!("{file}.conf"), config.clone()));
            }
            None if s.flags.is_empty() => options.plugins.push((file, program)),
            None => {
                let flags: Vec<&str> = s.flags.iter().map(String::as_str).collect();
                write_plugin_wrapper(&wrappers, &file, &program, &flags).unwrap();
                options.plugins.push((file.clone(), wrappers.join(&file)));
            }
        }
    }
    let ctrd = runtime.start(options);
    check_sample_effects(ctrd.as_ref(), &f);
}

/// A `#[test]` for each named case: `name => function(runtime)`.
macro_rules! runtime_tests {
    ($($name:ident => $case:ident($runtime:expr);)+) => {
        $(
            #[test]
            fn $name() {
                $case($runtime);
            }
        )+
    };
}

runtime_tests! {
    sample_plugins_external_containerd_2 => samples_external(Runtime::Containerd(CONTAINERD_VERSION));
    sample_plugins_preinstalled_containerd_2 => samples_preinstalled(Runtime::Containerd(CONTAINERD_VERSION));
    sample_plugins_external_containerd_1_7 => samples_external(Runtime::Containerd(CONTAINERD_17_VERSION));
    sample_plugins_preinstalled_containerd_1_7 => samples_preinstalled(Runtime::Containerd(CONTAINERD_17_VERSION));
    sample_plugins_external_crio => samples_external(Runtime::Crio);
    sample_plugins_preinstalled_crio => samples_preinstalled(Runtime::Crio);
}

// ---------------------------------------------------------------------------
// Item 1 (errors): a plugin's error reaches the CRI client word for word.

#[test]
fn plugin_errors_reach_the_cri_client() {
    if !prepare() {
        return;
    }
    let f = Fixtures::new();
    let ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let validator_config = f.dir.path().join("validator.yaml");
    fs::write(&validator_config, "rejectOCIHookAdjustment: true\n").unwrap();
    let v = validator_config.to_string_lossy().into_owned();
    let hooks = f.hooks_dir().to_string_lossy().into_owned();
    let mut plugins = Vec::new();
    for (idx, name, program, extra) in [
        ("20", "ulimit-adjuster", "nri-ulimit-adjuster", vec![]),
        ("25", "netdev", "nri-network-device-injector", vec![]),
        (
            "40",
            "hook-injector",
            "nri-hook-injector",
            vec!["-hooks-dir", &hooks],
        ),
        (
            "90",
            "validator",
            "nri-default-validator",
            vec!["-config", &v],
        ),
    ] {
        let mut args = vec!["-idx", idx, "-name", name, socket_flag(program), &socket];
        args.extend(extra);
        let mut p = start_external(name, &bin(program).unwrap(), &args, f.dir.path()).unwrap();
        wait_registered(&ctrd, &format!("{idx}-{name}"), &mut p);
        plugins.push(p);
    }

    // ulimit-adjuster refuses an unknown rlimit type.
    let pod = PodSpec::new("bad-ulimit").annotation(
        "ulimits.noderesource.dev/container.c0",
        "- type: ULIMIT_NOFILE\n  hard: 10\n",
    );
    let pod_id = crictl.run_pod(&pod).unwrap();
    let err = crictl
        .try_create_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .expect_err("the container must not be created");
    assert!(
        err.stderr
            .contains(r#"failed to parse type: \"ULIMIT_NOFILE\""#),
        "{}",
        err.stderr
    );
    assert!(crictl.call(&["ps", "-a", "-q"]).unwrap().is_empty());

    // network-device-injector refuses a device for a pod on the host network.
    let pod =
        PodSpec::new("bad-netdev").annotation("netdevice.noderesource.dev", "- name: e2e-none0\n");
    let err = crictl
        .try_run_pod(&pod)
        .expect_err("the pod must not start");
    assert!(
        err.stderr
            .contains("trying to inject network device on host network Pod"),
        "{}",
        err.stderr
    );

    // The default validator, as a plugin, rejects the hook-injector's hook.
    let pod = PodSpec::new("hooked").annotation("e2e.nri-rs.dev/hook", "yes");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let err = crictl
        .try_create_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .expect_err("the validator must reject the container");
    assert!(
        err.stderr.contains(
            r#"validation error: plugin \"40-hook-injector\" attempted restricted OCI hook injection"#
        ),
        "{}",
        err.stderr
    );
}

// ---------------------------------------------------------------------------
// Item 2: the logger sees every event of a full lifecycle, in order.

fn logger_lifecycle(runtime: Runtime, expected: &[&str]) {
    if !runtime.prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctrd = runtime.start(Options::default());
    let ctrd = ctrd.as_ref();
    let crictl = ctrd.crictl();
    let log = dir.path().join("events.log");
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let mut logger = start_external(
        "logger",
        &bin("nri-logger").unwrap(),
        &[
            "-idx",
            "10",
            "-name",
            "logger",
            "-socket",
            &socket,
            "-log-file",
            &log.to_string_lossy(),
        ],
        dir.path(),
    )
    .unwrap();
    wait_registered(ctrd, "10-logger", &mut logger);

    let pod = PodSpec::new("lifecycle");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let id = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .unwrap();
    crictl.call(&["update", "--cpu-share", "512", &id]).unwrap();
    assert_eq!(crictl.cgroup_file(&id, "cpu", "cpu.shares").unwrap(), "512");
    crictl.call(&["stop", &id]).unwrap();
    crictl.call(&["rm", &id]).unwrap();
    crictl.call(&["stopp", &pod_id]).unwrap();
    crictl.call(&["rmp", &pod_id]).unwrap();

    let last = *expected.last().unwrap();
    let events = wait_for("the logger to log the pod's removal", WAIT, || {
        let text = fs::read_to_string(&log).ok()?;
        let events = logged_events(&text);
        events.iter().any(|e| e == last).then_some(events)
    })
    .unwrap();
    assert_eq!(events, expected, "{}", ctrd.describe());
}

/// Every event of one pod and container lifecycle, in the order the logger
/// sees them, without those in `left_out` (ValidateContainerAdjustment exists
/// from NRI v0.10 on).
fn lifecycle(left_out: &[&str]) -> Vec<&'static str> {
    let left_out = [
        &["Configure", "UpdatePodSandbox", "PostUpdatePodSandbox"][..],
        left_out,
    ]
    .concat();
    nri_interop::events_without(&nri_interop::LIFECYCLE_V012, &left_out)
}

fn lifecycle_without_validation() -> Vec<&'static str> {
    lifecycle(&["ValidateContainerAdjustment"])
}

#[test]
fn logger_sees_a_full_lifecycle_in_order_containerd_2() {
    logger_lifecycle(Runtime::Containerd(CONTAINERD_VERSION), &lifecycle(&[]));
}

#[test]
fn logger_sees_a_full_lifecycle_in_order_containerd_1_7() {
    // NRI v0.8 (containerd 1.7) has no validation.
    logger_lifecycle(
        Runtime::Containerd(CONTAINERD_17_VERSION),
        &lifecycle_without_validation(),
    );
}

#[test]
fn logger_sees_a_full_lifecycle_in_order_crio() {
    // CRI-O 1.34.0 vendors a pre-release of NRI v0.9.1 (no validation).
    logger_lifecycle(Runtime::Crio, &lifecycle_without_validation());
}

// ---------------------------------------------------------------------------
// The probe plugin (a binary of this crate): records events as JSON lines.

struct Probe {
    process: Daemon,
    record: PathBuf,
}

impl Probe {
    fn start(ctrd: &dyn CriRuntime, dir: &Path, name: &str, extra: &[&str]) -> Probe {
        let record = dir.join(format!("{name}.jsonl"));
        let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
        let r = record.to_string_lossy().into_owned();
        let mut args = vec![
            "--socket", &socket, "--name", name, "--idx", "50", "--record", &r,
        ];
        args.extend_from_slice(extra);
        let process = start_external(
            name,
            Path::new(env!("CARGO_BIN_EXE_nri-e2e-probe")),
            &args,
            dir,
        )
        .unwrap();
        Probe { process, record }
    }

    fn records(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn events(&self, event: &str) -> Vec<serde_json::Value> {
        self.records()
            .into_iter()
            .filter(|r| r["event"] == event)
            .collect()
    }
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------
// Item 3: an unsolicited UpdateContainers changes a running container's cgroup.

#[test]
fn unsolicited_update_changes_the_cgroup() {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let mut probe = Probe::start(&ctrd, dir.path(), "probe", &[]);
    wait_registered(&ctrd, "50-probe", &mut probe.process);

    let pod = PodSpec::new("updated").annotation("e2e.nri-rs.dev/cpu-shares.c0", "777");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let id = crictl
        .run_container(
            &pod_id,
            &pod,
            &ContainerSpec::new("c0").resources(serde_json::json!({"cpu_shares": 256})),
        )
        .unwrap();
    let result = wait_for("the probe's update to be answered", WAIT, || {
        probe.events("UpdateContainersResult").into_iter().next()
    })
    .unwrap();
    assert_eq!(result["failed"], 0, "{result}");
    assert_eq!(result["container"], id.as_str());
    // The runtime applied it before answering: the cgroup holds the value.
    assert_eq!(crictl.cgroup_file(&id, "cpu", "cpu.shares").unwrap(), "777");
}

// ---------------------------------------------------------------------------
// Item 4: the default validator with required_plugins.

/// Runs a pod on `ctrd` and checks that creating a container in it fails
/// because required plugin `plugin` is absent, leaving no container. Returns
/// the pod, for creating containers once the plugin is there.
fn assert_refused_for_missing(ctrd: &Containerd, pod: &PodSpec, plugin: &str) -> String {
    let crictl = ctrd.crictl();
    let pod_id = crictl.run_pod(pod).unwrap();
    let err = crictl
        .try_create_container(&pod_id, pod, &ContainerSpec::new("c0"))
        .expect_err("no container while a required plugin is absent");
    assert!(
        err.stderr.contains(&format!(
            r#"validation error: required plugin \"{plugin}\" not present"#
        )),
        "{}",
        err.stderr
    );
    assert!(crictl.call(&["ps", "-a", "-q"]).unwrap().is_empty());
    pod_id
}

#[test]
fn required_plugin_gates_container_creation() {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctrd = Containerd::start(Options {
        default_validator: Some(vec!["e2e-required".into()]),
        ..Options::default()
    })
    .unwrap();
    let crictl = ctrd.crictl();
    let pod = PodSpec::new("gated");
    let pod_id = assert_refused_for_missing(&ctrd, &pod, "e2e-required");

    let mut probe = Probe::start(&ctrd, dir.path(), "e2e-required", &[]);
    wait_registered(&ctrd, "50-e2e-required", &mut probe.process);
    let id = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .unwrap();
    assert_eq!(crictl.running_containers().unwrap(), [id]);
}

/// The default-validator sample as a pre-installed plugin, configured by its
/// drop-in file, refuses a container whose required plugin is absent.
#[test]
fn default_validator_plugin_preinstalled_with_its_configuration() {
    if !prepare() {
        return;
    }
    let ctrd = Containerd::start(Options {
        plugins: vec![(
            "90-default-validator".into(),
            bin("nri-default-validator").unwrap(),
        )],
        plugin_configs: vec![(
            "90-default-validator.conf".into(),
            "requiredPlugins:\n  - e2e-absent\n".into(),
        )],
        ..Options::default()
    })
    .unwrap();
    assert_refused_for_missing(&ctrd, &PodSpec::new("validated"), "e2e-absent");
}

// ---------------------------------------------------------------------------
// Item 5: containerd restarted; plugins reconnect and resynchronize.

#[test]
fn restarted_containerd_resynchronizes_reconnecting_plugins() {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let mut probe = Probe::start(&ctrd, dir.path(), "probe", &[]);
    wait_registered(&ctrd, "50-probe", &mut probe.process);
    // A sample plugin with its defaults: it reconnects.
    let mut logger = start_external(
        "logger",
        &bin("nri-logger").unwrap(),
        &[
            "-idx",
            "10",
            "-name",
            "logger",
            "-socket",
            &socket,
            "-add-env",
            "NRI_LOGGER",
        ],
        dir.path(),
    )
    .unwrap();
    wait_registered(&ctrd, "10-logger", &mut logger);

    let kept = PodSpec::new("kept");
    let kept_id = crictl.run_pod(&kept).unwrap();
    let kept_ctr = crictl
        .run_container(&kept_id, &kept, &ContainerSpec::new("c0"))
        .unwrap();
    let gone = PodSpec::new("gone");
    let gone_id = crictl.run_pod(&gone).unwrap();
    crictl
        .run_container(&gone_id, &gone, &ContainerSpec::new("c0"))
        .unwrap();
    crictl.call(&["rmp", "-f", &gone_id]).unwrap();
    // A container created and stopped stays known to the runtime, not running.
    let stopped = crictl
        .run_container(&kept_id, &kept, &ContainerSpec::new("stopped"))
        .unwrap();
    crictl.call(&["stop", &stopped]).unwrap();

    assert_eq!(probe.events("Synchronize").len(), 1);
    ctrd.restart().unwrap();
    wait_registered(&ctrd, "50-probe", &mut probe.process);
    wait_registered(&ctrd, "10-logger", &mut logger);

    let syncs = probe.events("Synchronize");
    assert_eq!(syncs.len(), 2, "{syncs:?}");
    let pods = crictl.ready_pods().unwrap();
    assert_eq!(pods, std::slice::from_ref(&kept_id));
    assert_eq!(ids(&syncs[1]["pods"]), pods, "{}", syncs[1]);
    // Exactly the running containers: neither the removed pod's nor the
    // stopped one (which containerd still has).
    let running = crictl.running_containers().unwrap();
    assert_eq!(running, std::slice::from_ref(&kept_ctr));
    assert_eq!(ids(&syncs[1]["containers"]), running, "{}", syncs[1]);
    let all = crictl.call(&["ps", "-a", "-q"]).unwrap();
    assert!(
        all.contains(&stopped),
        "the stopped container still exists: {all}"
    );

    // The logger is back in the chain: a new container gets its variable.
    let id = crictl
        .run_container(&kept_id, &kept, &ContainerSpec::new("after"))
        .unwrap();
    let environ = crictl.exec(&id, &["cat", "/proc/1/environ"]).unwrap();
    assert!(
        environ.split('\0').any(|e| e.starts_with("NRI_LOGGER=")),
        "{environ:?}"
    );
}

// ---------------------------------------------------------------------------
// Item 6: a plugin killed or hung mid-call.

/// What containerd does with the CreateContainer during which a plugin hangs
/// or dies, and with the ones after it.
fn faulty_plugin(kill_instead_of_timeout: bool) {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let mut probe = Probe::start(
        &ctrd,
        dir.path(),
        "stuck",
        &["--hang-create", "c0", "--once"],
    );
    wait_registered(&ctrd, "50-stuck", &mut probe.process);
    let pod = PodSpec::new("faulty");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let create = {
        let crictl = crictl.clone();
        let pod = pod.clone();
        let pod_id = pod_id.clone();
        std::thread::spawn(move || {
            crictl.try_create_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        })
    };
    // The plugin got the request and does not answer.
    wait_for("the plugin to be called", WAIT, || {
        (!probe.events("CreateContainer").is_empty()).then_some(())
    })
    .unwrap();
    if kill_instead_of_timeout {
        probe.process.crash();
    }
    // A plugin that is not a validator: containerd drops it and creates the
    // container without it (after the 2 s request timeout when it hangs).
    let c0 = create
        .join()
        .unwrap()
        .expect("c0 is created without the plugin");
    crictl.call(&["start", &c0]).unwrap();
    let c1 = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("c1"))
        .unwrap();
    let mut running = vec![c0, c1];
    running.sort();
    assert_eq!(crictl.running_containers().unwrap(), running);
    let reason = if kill_instead_of_timeout {
        "ttrpc: closed"
    } else {
        "context deadline exceeded"
    };
    let log = ctrd.log();
    assert!(
        log.contains(&format!(
            "closing plugin 50-stuck, failed to handle CreateContainer request: {reason}"
        )),
        "{log}"
    );
}

#[test]
fn hung_plugin_is_dropped_and_containers_are_created() {
    faulty_plugin(false);
}

#[test]
fn killed_plugin_is_dropped_and_containers_are_created() {
    faulty_plugin(true);
}

/// A plugin subscribed to ValidateContainerAdjustment that dies or hangs mid-call
/// (`nri-misbehave`, which subscribes to every event): containerd fails the
/// CreateContainer in flight with `validator plugin ... failed`, then creates
/// the next ones without the plugin.
fn faulty_validator(fault: &str, at: &str, reason: &str) {
    if !prepare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctrd = Containerd::start(Options::default()).unwrap();
    let crictl = ctrd.crictl();
    let socket = ctrd.layout().nri_socket.to_string_lossy().into_owned();
    let mut plugin = start_external(
        "bad",
        &bin("nri-misbehave").unwrap(),
        &[
            "--fault", fault, "--at", at, "--name", "bad", "--index", "10", "--socket", &socket,
        ],
        dir.path(),
    )
    .unwrap();
    wait_registered(&ctrd, "10-bad", &mut plugin);
    let pod = PodSpec::new("validated");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let err = crictl
        .try_create_container(&pod_id, &pod, &ContainerSpec::new("c0"))
        .expect_err("the creation in flight fails");
    assert!(
        err.stderr.contains(&format!(
            "failed to get NRI adjustment for container: validator plugin 10-bad failed: {reason}"
        )),
        "{}",
        err.stderr
    );
    let c1 = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("c1"))
        .unwrap();
    assert_eq!(crictl.running_containers().unwrap(), [c1]);
}

#[test]
fn validator_dying_in_create_fails_that_creation_only() {
    faulty_validator("exit", "CreateContainer", "ttrpc: closed");
}

#[test]
fn validator_hanging_in_validation_fails_that_creation_only() {
    faulty_validator(
        "hang",
        "ValidateContainerAdjustment",
        "context deadline exceeded",
    );
}
