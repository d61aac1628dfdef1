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

use nri_e2e::containerd::{
    write_plugin_wrapper, ContainerSpec, Containerd, Options, PodSpec, CONTAINERD_17_VERSION,
    CONTAINERD_VERSION, PACKAGES,
};
use nri_e2e::host::{self, wait_for, Daemon};
use nri_e2e::plugins::{bin, start_external};

const WAIT: Duration = Duration::from_secs(60);

fn prepare() -> bool {
    let mut packages = PACKAGES.to_vec();
    packages.extend_from_slice(nri_e2e::image::PACKAGES);
    host::prepare("containerd", &packages)
}

/// Waits until the external plugin `name` (`NN-name`) is registered and
/// synchronized, as containerd itself logs it (the runtime's own view).
fn wait_registered(ctrd: &Containerd, plugin: &str, process: &mut Daemon) {
    let done = format!("plugin \\\"{plugin}\\\" connected and synchronized");
    let done_plain = format!("plugin \"{plugin}\" connected and synchronized");
    wait_for(&format!("containerd to synchronize {plugin}"), WAIT, || {
        assert!(
            process.is_running(),
            "{} exited:\n{}",
            process.name(),
            process.log()
        );
        let log = ctrd.log();
        (log.contains(&done) || log.contains(&done_plain)).then_some(())
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
        // The hook runs in the runtime's namespaces; it writes into the
        // container's root filesystem, found through the bundle in its state.
        let hook = f.dir.path().join("hook.sh");
        fs::write(
            &hook,
            "#!/bin/sh\nstate=$(cat)\n\
             bundle=$(printf '%s' \"$state\" | sed -n 's/.*\"bundle\": *\"\\([^\"]*\\)\".*/\\1/p')\n\
             echo \"hooked by $1\" > \"$bundle/rootfs/nri-hooked\"\n",
        )
        .unwrap();
        chmod_x(&hook);
        fs::write(
            f.hooks_dir().join("e2e.json"),
            serde_json::json!({
                "version": "1.0.0",
                "hook": {"path": hook, "args": ["hook.sh", "hook-injector"]},
                "when": {"annotations": {"e2e\\.nri-rs\\.dev/hook": "yes"}},
                "stages": ["createRuntime"]
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
fn check_sample_effects(ctrd: &Containerd, f: &Fixtures) {
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

fn samples_external(version: &str) {
    if !prepare() {
        return;
    }
    let f = Fixtures::new();
    let ctrd = Containerd::start(Options {
        version: version.into(),
        ..Options::default()
    })
    .unwrap();
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
        wait_registered(&ctrd, &format!("{}-{}", s.idx, s.name), &mut p);
        plugins.push(p);
    }
    check_sample_effects(&ctrd, &f);
    for p in &mut plugins {
        assert!(p.is_running(), "{} exited:\n{}", p.name(), p.log());
    }
}

fn samples_preinstalled(version: &str) {
    if !prepare() {
        return;
    }
    let f = Fixtures::new();
    let wrappers = f.dir.path().join("wrappers");
    fs::create_dir_all(&wrappers).unwrap();
    let mut options = Options {
        version: version.into(),
        ..Options::default()
    };
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
    let ctrd = Containerd::start(options).unwrap();
    check_sample_effects(&ctrd, &f);
    // The template's drop-in configuration reached it (it logs what it got).
    let _ = ctrd.log();
}

#[test]
fn sample_plugins_external_containerd_2() {
    samples_external(CONTAINERD_VERSION);
}

#[test]
fn sample_plugins_preinstalled_containerd_2() {
    samples_preinstalled(CONTAINERD_VERSION);
}

#[test]
fn sample_plugins_external_containerd_1_7() {
    samples_external(CONTAINERD_17_VERSION);
}

#[test]
fn sample_plugins_preinstalled_containerd_1_7() {
    samples_preinstalled(CONTAINERD_17_VERSION);
}
