//! End-to-end: Docker Engine 29 (dockerd of moby v2, its own containerd,
//! runc 1.3) two ways: with Docker's own NRI and our plugins, and with full
//! NRI through `nri-runc` and `nri-hostd`. Every effect is checked where it
//! lands: inside the running container (`docker exec`, `/proc/1`), in its
//! cgroup, in the runtime's state; what Docker refuses, at the docker CLI.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use nri_e2e::docker::{runc_dir, Docker, DockerOptions, NriOpts, WAIT};
use nri_e2e::host::{prepare as host_prepare, wait_for, Daemon};
use nri_e2e::plugins::{bin, logged_events, start_external, OWN_POD_LIFECYCLE};
use nri_e2e::podman::{self, Hostd};

fn prepare() -> bool {
    let mut packages: Vec<&str> = nri_e2e::docker::PACKAGES.to_vec();
    packages.extend_from_slice(nri_e2e::image::PACKAGES);
    host_prepare("docker", &packages)
}

/// A temporary directory for a test, once the suite can run here.
fn prepared_dir() -> Option<tempfile::TempDir> {
    prepare().then(|| tempfile::tempdir().unwrap())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn adjust_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nri-e2e-adjust"))
}

/// Waits until process 1 of container `id` has `entry` in its environment
/// (`/proc/1/environ`, read with `docker exec`); the whole environment.
fn wait_for_env(docker: &Docker, id: &str, entry: &str) -> String {
    wait_for(
        &format!("{entry} in the container"),
        Duration::from_secs(10),
        || {
            let environ = docker.cat(id, "/proc/1/environ").ok()?;
            environ.contains(entry).then_some(environ)
        },
    )
    .unwrap()
}

/// The value of `name` in a NUL-separated environment.
fn env_value(environ: &str, name: &str) -> Option<String> {
    environ
        .split(['\0', '\n'])
        .find_map(|e| e.strip_prefix(&format!("{name}=")).map(str::to_owned))
}

/// The logger, external, on `socket`, named `NN-name` by `idx` and `name`,
/// with extra flags; its process and event log.
fn external_logger(
    dir: &Path,
    socket: &Path,
    idx: &str,
    name: &str,
    extra: &[&str],
) -> (Daemon, PathBuf) {
    let log = dir.join(format!("{name}.events"));
    let mut args: Vec<String> = [
        "-idx",
        idx,
        "-name",
        name,
        "-socket-path",
        &socket.to_string_lossy(),
        "-log-file",
        &log.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let process = start_external(name, &bin("nri-logger").unwrap(), &args, dir).unwrap();
    (process, log)
}

fn events(log: &Path) -> Vec<String> {
    logged_events(&fs::read_to_string(log).unwrap_or_default())
}

// ---------------------------------------------------------------------------
// Docker's own NRI

/// Docker's own NRI with our plugins, pre-installed (the logger with a
/// drop-in configuration) and external (the logger, and a plugin adding a
/// read-only mount): env and mount land in the running container; Docker
/// sends CreateContainer only, names with its leading slash; `docker exec`,
/// `docker inspect` and `docker restart` keep what was applied at create;
/// SIGHUP starts a newly installed pre-installed plugin and forgets the
/// external ones without disconnecting them.
#[test]
fn docker_nri_plugins_adjust_running_containers() {
    let Some(work) = prepared_dir() else {
        return;
    };
    let w = work.path();
    let pre_log = w.join("pre.events");
    let docker = Docker::start(DockerOptions {
        nri: Some(NriOpts { socket: true }),
        plugins: vec![(
            "10-pre".into(),
            bin("nri-logger").unwrap(),
            Some(format!("addEnv: NRI_PRE\nlogFile: {}\n", pre_log.display())),
        )],
        ..Default::default()
    })
    .unwrap();
    docker.wait_plugin("10-pre").unwrap();
    // Docker makes its NRI socket world-writable (dockerd runs with umask
    // 0): only its directory, root's alone here, keeps other users out.
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&docker.nri_socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o777, "{mode:o}");

    let (mut ext, ext_log) =
        external_logger(w, &docker.nri_socket, "30", "ext", &["-add-env", "NRI_EXT"]);
    docker.wait_plugin("30-ext").unwrap();
    let shared = w.join("shared");
    fs::create_dir(&shared).unwrap();
    fs::write(shared.join("marker"), "from-the-host").unwrap();
    let mount = format!("{}:/nri-ro", shared.display());
    let _ro = start_external(
        "ro",
        &adjust_bin(),
        &[
            "--socket",
            &docker.nri_socket.to_string_lossy(),
            "--name",
            "ro",
            "--idx",
            "40",
            "--ro-mount",
            &mount,
        ],
        w,
    )
    .unwrap();
    docker.wait_plugin("40-ro").unwrap();

    let id = docker
        .run_detached(&["--name", "a-run", Docker::BUSYBOX, "sleep", "1000"])
        .unwrap();

    // Environment, from both plugins, in process 1.
    let environ = wait_for_env(&docker, &id, "NRI_EXT=logger-pid-");
    let ext_value = env_value(&environ, "NRI_EXT").unwrap();
    assert!(
        env_value(&environ, "NRI_PRE").is_some_and(|v| v.starts_with("logger-pid-")),
        "{environ:?}"
    );
    // The read-only mount: in the mount table, readable, not writable.
    let mountinfo = docker.cat(&id, "/proc/1/mountinfo").unwrap();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/nri-ro"))
        .unwrap_or_else(|| panic!("no /nri-ro in\n{mountinfo}"));
    let options = line.split(' ').nth(5).unwrap();
    assert!(options.split(',').any(|o| o == "ro"), "{line}");
    assert_eq!(docker.cat(&id, "/nri-ro/marker").unwrap(), "from-the-host");
    let write = docker
        .cmd()
        .args(["exec", &id, "sh", "-c", "echo x > /nri-ro/new"])
        .output()
        .unwrap();
    assert!(!write.status.success());
    assert!(
        stderr(&write).contains("Read-only file system"),
        "{}",
        stderr(&write)
    );

    // Docker applied both to its own container configuration: `docker
    // exec` inherits the variable, `docker inspect` shows both.
    let exec_env = docker.ok(&["exec", &id, "env"]).unwrap();
    assert!(
        exec_env.contains(&format!("NRI_EXT={ext_value}")),
        "{exec_env}"
    );
    let inspect = docker.inspect(&id).unwrap();
    let env = inspect["Config"]["Env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e == &format!("NRI_EXT={ext_value}")),
        "{env:?}"
    );
    let mounts = inspect["HostConfig"]["Mounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["Target"] == "/nri-ro" && m["ReadOnly"] == true && m["Type"] == "bind"),
        "{mounts:?}"
    );

    // What the plugins saw: CreateContainer (after Configure and
    // Synchronize), nothing later in the container's life; each container
    // its own pod, named with Docker's leading slash.
    let seen = events(&ext_log);
    assert!(seen.contains(&"CreateContainer".to_string()), "{seen:?}");
    for never in ["RunPodSandbox", "PostCreateContainer", "StartContainer"] {
        assert!(!seen.contains(&never.to_string()), "{never} in {seen:?}");
    }
    let text = fs::read_to_string(&ext_log).unwrap();
    assert!(text.contains("name: /a-run"), "{text}");

    // `docker restart` runs the same container configuration again: the
    // variable keeps its value and no plugin is asked again.
    let creates = |log: &Path| {
        fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.ends_with("CreateContainer: container:"))
            .count()
    };
    let before = creates(&ext_log);
    assert_eq!(before, 1);
    docker.ok(&["restart", "-t", "0", &id]).unwrap();
    let environ = wait_for_env(&docker, &id, &format!("NRI_EXT={ext_value}"));
    assert!(environ.contains("NRI_PRE=logger-pid-"), "{environ:?}");
    assert_eq!(creates(&ext_log), before);

    // SIGHUP: Docker reads its configuration again and restarts its NRI;
    // a plugin installed meanwhile starts and adjusts the next container.
    let late_log = w.join("late.events");
    docker
        .install_plugin(
            &bin("nri-logger").unwrap(),
            "20-late",
            Some(&format!(
                "addEnv: NRI_LATE\nlogFile: {}\n",
                late_log.display()
            )),
        )
        .unwrap();
    docker.reload().unwrap();
    docker.wait_plugin("20-late").unwrap();
    let id2 = docker
        .run_detached(&["--name", "b-run", Docker::BUSYBOX, "sleep", "1000"])
        .unwrap();
    let environ = wait_for_env(&docker, &id2, "NRI_LATE=logger-pid-");
    assert!(environ.contains("NRI_PRE=logger-pid-"), "{environ:?}");
    assert!(events(&late_log).contains(&"CreateContainer".to_string()));
    // The reload forgot the external plugins without closing their
    // connections (NRI v0.12.3 stops only the plugins it launched): the
    // logger is still connected, to an NRI that no longer calls it.
    assert!(ext.is_running());
    assert!(!environ.contains("NRI_EXT="), "{environ:?}");
    assert_eq!(creates(&ext_log), before);
}

/// Under Docker's NRI, the logger asked for an annotation and a variable
/// leaves the annotation out and says so at Configure, and the container
/// runs with the variable; a plugin that adjusts without looking at its
/// runtime fails `docker run` with Docker's own text, and no container is
/// left behind. With the socket off, an external plugin cannot connect and
/// says where it tried.
#[test]
fn docker_nri_refusals_and_socket_off() {
    let Some(work) = prepared_dir() else {
        return;
    };
    let w = work.path();
    let annotate_log = w.join("annotate.events");
    let docker = Docker::start(DockerOptions {
        nri: Some(NriOpts { socket: false }),
        plugins: vec![(
            "10-annotate".into(),
            bin("nri-logger").unwrap(),
            Some(format!(
                "addAnnotation: logger.nri-rs.dev/seen\naddEnv: NRI_ANNOTATE\nlogFile: {}\n",
                annotate_log.display()
            )),
        )],
        ..Default::default()
    })
    .unwrap();
    docker.wait_plugin("10-annotate").unwrap();

    let id = docker
        .run_detached(&[Docker::BUSYBOX, "sleep", "1000"])
        .unwrap();
    wait_for_env(&docker, &id, "NRI_ANNOTATE=logger-pid-");
    let said = fs::read_to_string(&annotate_log).unwrap();
    assert!(said.contains("does not apply annotations"), "{said}");
    docker.ok(&["rm", "-f", &id]).unwrap();

    // A plugin that adjusts an annotation regardless, pre-installed and
    // started by a reload.
    nri_e2e::cri::write_plugin_wrapper(
        &docker.plugin_dir,
        "20-blunt",
        &adjust_bin(),
        &["--annotation", "blunt.nri-rs.dev/seen=yes"],
    )
    .unwrap();
    docker.reload().unwrap();
    docker.wait_plugin("20-blunt").unwrap();
    let out = docker.run(&["--rm", "--network", "none", Docker::BUSYBOX, "true"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("Error response from daemon: unsupported container adjustments: annotations"),
        "{err}"
    );
    assert_eq!(docker.ok(&["ps", "-aq"]).unwrap(), "");

    // No socket for external plugins: a plugin pointed at where it would be
    // fails at once and names the path.
    assert!(!docker.nri_socket.exists());
    let (mut plugin, ext_log) =
        external_logger(w, &docker.nri_socket, "30", "ext", &["-no-reconnect"]);
    wait_for("the plugin to give up", WAIT, || {
        (!plugin.is_running()).then_some(())
    })
    .unwrap();
    // The logger writes its error where it logs (`-log-file`).
    let said = format!(
        "{}{}",
        plugin.log(),
        fs::read_to_string(&ext_log).unwrap_or_default()
    );
    eprintln!("the plugin said: {said}");
    assert!(
        said.contains(&docker.nri_socket.to_string_lossy().into_owned()),
        "{said}"
    );
}

// ---------------------------------------------------------------------------
// nri-runc under Docker

/// A wrapper `<dir>/rt/<name>` (a link to `nri-runc`) running runc 1.3
/// with `extra` TOML; its path.
fn wrapper(dir: &Path, name: &str, hostd: &Hostd, extra: &str) -> PathBuf {
    let (_, nri_runc) = podman::binaries().unwrap();
    let rt = dir.join("rt");
    fs::create_dir_all(&rt).unwrap();
    let link = rt.join(name);
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&nri_runc, &link).unwrap();
    fs::write(
        rt.join(format!("{name}.toml")),
        format!(
            "runtime = {:?}\ncontrol_socket = {:?}\n{extra}",
            runc_dir().unwrap().join("runc"),
            hostd.control_socket
        ),
    )
    .unwrap();
    link
}

/// The memory limit of a container's cgroup (cgroup v1), read on the host
/// through its process 1.
fn memory_limit(pid: u32) -> String {
    nri_e2e::host::cgroup_v1_file(pid, "memory", "memory.limit_in_bytes").unwrap()
}

/// Docker with `nri-runc` as a runtime (`--runtime nri`) and as its
/// default runtime: what Docker's own NRI refuses (an annotation, a memory
/// limit, a device, an rlimit) lands in the running container; `docker
/// exec` and `docker inspect` do not see it, `docker restart` applies it
/// again; the logger sees the whole lifecycle; with nri-hostd down the
/// container runs unchanged (pass-through) or the docker CLI shows
/// nri-runc's refusal (fail).
#[test]
fn nri_runc_under_docker() {
    let Some(work) = prepared_dir() else {
        return;
    };
    let w = work.path();
    let mut hostd = Hostd::configure(w, "").unwrap();
    hostd
        .install_plugin(
            &bin("nri-ulimit-adjuster").unwrap(),
            "20-ulimit-adjuster",
            None,
        )
        .unwrap();
    hostd
        .install_plugin(
            &bin("nri-device-injector").unwrap(),
            "30-device-injector",
            None,
        )
        .unwrap();
    hostd.restart().unwrap();
    hostd.wait_registered("20-ulimit-adjuster").unwrap();
    hostd.wait_registered("30-device-injector").unwrap();
    let (_logger, log) = hostd.start_logger(w).unwrap();
    let _mem = start_external(
        "mem",
        &adjust_bin(),
        &[
            "--socket",
            &hostd.nri_socket.to_string_lossy(),
            "--name",
            "mem",
            "--idx",
            "60",
            "--memory-limit",
            "67108864",
        ],
        w,
    )
    .unwrap();
    hostd.wait_registered("60-mem").unwrap();

    let nri = wrapper(w, "nri", &hostd, "");
    let strict = wrapper(w, "nri-fail", &hostd, "on_unreachable = \"fail\"\n");
    let docker = Docker::start(DockerOptions {
        runtimes: vec![("nri".into(), nri), ("nri-fail".into(), strict)],
        default_runtime: Some("nri".into()),
        ..Default::default()
    })
    .unwrap();

    let id = docker
        .run_detached(&[
            "--runtime",
            "nri",
            "--hostname",
            "web",
            "--annotation",
            "ulimits.noderesource.dev/container.web=[{type: nofile, hard: 16384, soft: 8192}]",
            "--annotation",
            "devices.noderesource.dev/container.web=- path: /dev/nri-null\n  type: c\n  major: 1\n  minor: 3",
            Docker::BUSYBOX,
            "sleep",
            "1000",
        ])
        .unwrap();
    let environ = wait_for_env(&docker, &id, "NRI_LOGGER=logger-pid-");
    let value = env_value(&environ, "NRI_LOGGER").unwrap();
    // The annotation, in the real runtime's state.
    let state = docker.runc_state(&id).unwrap();
    assert!(
        state["annotations"]["logger.nri-rs.dev/seen"]
            .as_str()
            .is_some_and(|v| v.starts_with("logger-pid-")),
        "{state}"
    );
    // The rlimit and the device, inside the container.
    let limits = docker.cat(&id, "/proc/1/limits").unwrap();
    let nofile: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!((nofile[3], nofile[4]), ("8192", "16384"), "{limits}");
    let device = docker
        .ok(&["exec", &id, "stat", "-c", "%F %t:%T", "/dev/nri-null"])
        .unwrap();
    assert_eq!(device, "character special file 1:3");
    // The memory limit, in its cgroup.
    let pid = docker.pid(&id).unwrap();
    assert_eq!(memory_limit(pid), "67108864");
    // Docker knows none of it: `docker exec` builds its process from
    // Docker's own configuration, `docker inspect` shows that.
    let exec_env = docker.ok(&["exec", &id, "env"]).unwrap();
    assert!(!exec_env.contains("NRI_LOGGER"), "{exec_env}");
    let inspect = docker.inspect(&id).unwrap();
    assert_eq!(inspect["HostConfig"]["Runtime"], "nri");
    assert_eq!(inspect["HostConfig"]["Memory"], 0);
    let env = inspect["Config"]["Env"].as_array().unwrap();
    assert!(!env
        .iter()
        .any(|e| e.as_str().unwrap_or("").starts_with("NRI_LOGGER")));
    // `docker restart` creates the container again through the runtime:
    // plugins are asked again and their new values land.
    docker.ok(&["restart", "-t", "0", &id]).unwrap();
    let environ = wait_for_env(&docker, &id, "NRI_LOGGER=logger-pid-");
    assert_eq!(env_value(&environ, "NRI_LOGGER"), Some(value));
    assert_eq!(memory_limit(docker.pid(&id).unwrap()), "67108864");

    // The default runtime is nri-runc too.
    let dflt = docker
        .run_detached(&["--hostname", "dflt", Docker::BUSYBOX, "sleep", "1000"])
        .unwrap();
    wait_for_env(&docker, &dflt, "NRI_LOGGER=logger-pid-");
    assert_eq!(
        docker.inspect(&dflt).unwrap()["HostConfig"]["Runtime"],
        "nri"
    );
    docker.ok(&["rm", "-f", &id, &dflt]).unwrap();

    // The whole lifecycle of one container, as the logger logged it.
    wait_for("the earlier containers' removal", WAIT, || {
        (events(&log).last().map(String::as_str) == Some("RemovePodSandbox")).then_some(())
    })
    .unwrap();
    let offset = fs::read_to_string(&log).unwrap().len();
    let life = docker
        .run_detached(&["--hostname", "life", Docker::BUSYBOX, "sleep", "1000"])
        .unwrap();
    docker.ok(&["rm", "-f", &life]).unwrap();
    let seen = wait_for("the logger to see the removal", WAIT, || {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let seen = logged_events(&text[offset..]);
        (seen.last().map(String::as_str) == Some("RemovePodSandbox")).then_some(seen)
    })
    .unwrap();
    assert_eq!(seen, OWN_POD_LIFECYCLE);

    // nri-hostd down: pass-through runs the container unchanged, fail
    // refuses it with nri-runc's message at the docker CLI.
    hostd.stop();
    let out = docker.run(&[
        "--rm",
        "--network",
        "none",
        "--runtime",
        "nri",
        Docker::BUSYBOX,
        "cat",
        "/proc/1/environ",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NRI_LOGGER"));
    let out = docker.run(&[
        "--rm",
        "--network",
        "none",
        "--runtime",
        "nri-fail",
        Docker::BUSYBOX,
        "true",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cannot connect to nri-hostd"), "{err}");
    assert!(err.contains("on_unreachable"), "{err}");
}
