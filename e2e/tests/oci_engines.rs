//! End-to-end: the `nri-runc` set-ups of docs/oci-engines.md besides podman
//! and Docker's runtime: containerd with its own NRI off and `nri-runc` as
//! the runc shim's `BinaryName`, and a CRI-O runtime handler with CRI-O's
//! NRI off; and crun instead of runc under `nri-runc`, run by podman.
//! Plugins run in `nri-hostd`; each effect is checked inside the running
//! container and in the real runtime's own state.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nri_e2e::containerd::Containerd;
use nri_e2e::cri::{ContainerSpec, CriRuntime, Options, PodSpec};
use nri_e2e::crio::Crio;
use nri_e2e::host::{prepare as host_prepare, run, wait_for, Daemon};
use nri_e2e::plugins::{logged_events, OWN_POD_LIFECYCLE};
use nri_e2e::podman::{self, Hostd};

const WAIT: Duration = Duration::from_secs(60);

fn prepare(suite: &str, packages: &[&str]) -> bool {
    let mut all = packages.to_vec();
    all.extend_from_slice(nri_e2e::image::PACKAGES);
    host_prepare(suite, &all)
}

/// nri-hostd under `dir` with the logger ([`Hostd::start_logger`]); the
/// daemon, the logger and its event log.
fn hostd_with_logger(dir: &Path) -> (Hostd, Daemon, PathBuf) {
    let hostd = Hostd::start(dir, "").unwrap();
    let (logger, log) = hostd.start_logger(dir).unwrap();
    (hostd, logger, log)
}

/// A wrapper `<dir>/rt/<name>` (a link to `nri-runc`, configured by
/// `<name>.toml` next to it) running `runtime`.
fn wrapper(dir: &Path, name: &str, runtime: &Path, hostd: &Hostd) -> PathBuf {
    let (_, nri_runc) = podman::binaries().unwrap();
    let rt = dir.join("rt");
    fs::create_dir_all(&rt).unwrap();
    let link = rt.join(name);
    std::os::unix::fs::symlink(&nri_runc, &link).unwrap();
    fs::write(
        rt.join(format!("{name}.toml")),
        format!(
            "runtime = {runtime:?}\ncontrol_socket = {:?}\n",
            hostd.control_socket
        ),
    )
    .unwrap();
    link
}

/// nri-hostd with the logger and a wrapper `nri-runc` running runc with
/// its state under the test's directory (fields drop in this order).
struct RuncUnderHostd {
    _logger: Daemon,
    _hostd: Hostd,
    /// The logger's event log.
    log: PathBuf,
    /// The wrapper, for the runtime's configuration.
    link: PathBuf,
    /// runc's state root.
    runc_root: PathBuf,
    _work: tempfile::TempDir,
}

impl RuncUnderHostd {
    /// `None` where `suite` cannot run (see [`prepare`]).
    fn start(suite: &str, packages: &[&str]) -> Option<RuncUnderHostd> {
        if !prepare(suite, packages) {
            return None;
        }
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let (hostd, logger, log) = hostd_with_logger(w);
        let link = wrapper(w, "nri-runc", Path::new("/usr/sbin/runc"), &hostd);
        Some(RuncUnderHostd {
            _logger: logger,
            _hostd: hostd,
            log,
            link,
            runc_root: w.join("runc"),
            _work: work,
        })
    }
}

fn events(log: &Path) -> Vec<String> {
    logged_events(&fs::read_to_string(log).unwrap_or_default())
}

/// A pod with one container through CRI, on a runtime whose own NRI is
/// off and whose runtime is `nri-runc`: the logger's variable is in the
/// container's process 1, its annotation in runc's state (root
/// `runc_root`); the logger sees the real pod (RunPodSandbox for the
/// sandbox with the sandbox's id) and, after the pod's removal, RemovePodSandbox.
fn pod_through_nri_runc(rt: &dyn CriRuntime, log: &Path, runc_root: &Path) {
    assert!(
        !rt.layout().nri_socket.exists(),
        "{} opened its own NRI socket",
        rt.describe()
    );
    let crictl = rt.crictl();
    let pod = PodSpec::new("wrapped");
    let pod_id = crictl.run_pod(&pod).unwrap();
    let id = crictl
        .run_container(&pod_id, &pod, &ContainerSpec::new("app"))
        .unwrap();
    let environ = wait_for("the logger's variable in the container", WAIT, || {
        let environ = crictl.exec(&id, &["cat", "/proc/1/environ"]).ok()?;
        environ
            .contains("NRI_LOGGER=logger-pid-")
            .then_some(environ)
    })
    .unwrap();
    assert!(environ.contains("NRI_LOGGER=logger-pid-"));
    let state = run(Command::new("/usr/sbin/runc")
        .arg("--root")
        .arg(runc_root)
        .args(["state", &id]))
    .unwrap();
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    assert!(
        state["annotations"]["logger.nri-rs.dev/seen"]
            .as_str()
            .is_some_and(|v| v.starts_with("logger-pid-")),
        "{state}"
    );
    let seen = events(log);
    // After the Synchronize of its registration, the sandbox's RunPodSandbox.
    assert_eq!(
        seen.get(..2),
        Some(&["Synchronize".to_string(), "RunPodSandbox".to_string()][..]),
        "{seen:?}"
    );
    assert!(seen.contains(&"StartContainer".to_string()), "{seen:?}");
    // The CRI pod itself: RunPodSandbox carries the sandbox's id, and the
    // container's events name its own id.
    let text = fs::read_to_string(log).unwrap();
    assert!(
        text.contains(&format!("RunPodSandbox:    id: {pod_id}")),
        "no RunPodSandbox of {pod_id}"
    );
    assert!(
        text.contains(&format!("CreateContainer:    id: {id}")),
        "no CreateContainer of {id}"
    );

    crictl.call(&["rmp", "-f", &pod_id]).unwrap();
    wait_for("the logger to see the pod's removal", WAIT, || {
        (events(log).last().map(String::as_str) == Some("RemovePodSandbox")).then_some(())
    })
    .unwrap();
}

/// containerd 2.4 with its own NRI disabled and `nri-runc` as the runc
/// shim's `BinaryName` (docs/oci-engines.md, "containerd").
#[test]
fn containerd_with_nri_runc_as_binary_name() {
    // Kept whole to the end: its logger and daemon must outlive the runtime.
    let Some(set_up) =
        RuncUnderHostd::start("oci-engines containerd", nri_e2e::containerd::PACKAGES)
    else {
        return;
    };
    let (log, link, runc_root) = (&set_up.log, &set_up.link, &set_up.runc_root);
    let ctrd = Containerd::start_with_config(Options::default(), |text| {
        let runc = "BinaryName = \"/usr/sbin/runc\"";
        let nri = "[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n";
        assert!(text.contains(runc) && text.contains(nri), "{text}");
        // The runc options have a state root already; this test's replaces it.
        let text: String = text
            .lines()
            .map(|line| match line.trim_start().starts_with("Root = ") {
                true => format!("  Root = {runc_root:?}\n"),
                false => format!("{line}\n"),
            })
            .collect();
        assert!(text.contains(&format!("Root = {runc_root:?}")), "{text}");
        text.replace(runc, &format!("BinaryName = {link:?}"))
            .replace(
                nri,
                "[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n",
            )
    })
    .unwrap();
    // The shim adds containerd's namespace to the runtime root.
    pod_through_nri_runc(&ctrd, log, &runc_root.join("k8s.io"));
}

/// CRI-O 1.34 with a runtime handler running `nri-runc` as its default
/// runtime and CRI-O's own NRI off (docs/oci-engines.md, "CRI-O").
#[test]
fn crio_with_an_nri_runc_runtime_handler() {
    // Kept whole to the end: its logger and daemon must outlive the runtime.
    let Some(set_up) = RuncUnderHostd::start("oci-engines cri-o", nri_e2e::crio::PACKAGES) else {
        return;
    };
    let (log, link, runc_root) = (&set_up.log, &set_up.link, &set_up.runc_root);
    let crio = Crio::start_with_config(Options::default(), |text| {
        let default = "default_runtime = \"runc\"";
        let nri = "enable_nri = true";
        assert!(text.contains(default) && text.contains(nri), "{text}");
        format!(
            "{}[crio.runtime.runtimes.nri-runc]\nruntime_path = {link:?}\n\
             runtime_type = \"oci\"\nruntime_root = {runc_root:?}\n\
             monitor_path = \"/usr/bin/conmon\"\n",
            text.replace(default, "default_runtime = \"nri-runc\"")
                .replace(nri, "enable_nri = false")
        )
    })
    .unwrap();
    pod_through_nri_runc(&crio, log, runc_root);
}

/// crun (Debian 12's 1.8.1) as the real runtime under `nri-runc`, run by
/// podman: the logger's variable is in the container's process 1 and its
/// annotation in crun's own state, and the logger sees the container's
/// lifecycle (docs/oci-engines.md, "Any OCI runtime").
///
/// crun 1.8.1 refuses every command on a cgroup v1 host whose cgroup v2
/// hierarchy (`/sys/fs/cgroup/unified`) still holds a controller, as these
/// machines' does (`cgroups in hybrid mode not supported`). The runtime
/// `nri-runc` runs here is therefore a script that starts crun in a mount
/// namespace of its own without that mount, where crun sees cgroup v1 and
/// runs; the host's mounts stay as they are. crun's state is kept under the
/// test's directory (`--root`).
#[test]
fn podman_with_crun_under_nri_runc() {
    let mut packages = podman::PACKAGES.to_vec();
    packages.push("crun");
    if !prepare("oci-engines crun", &packages) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (hostd, _logger, log) = hostd_with_logger(w);
    let crun_root = w.join("crun");
    let script = w.join("crun-v1");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             exec unshare --mount --propagation private /bin/sh -c \
             'umount /sys/fs/cgroup/unified 2>/dev/null; exec /usr/bin/crun --root {crun_root:?} \"$@\"' \
             crun \"$@\"\n"
        ),
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let podman = podman::Podman::with_busybox(w).unwrap();
    let runtime = podman
        .wrapper(
            "nri-crun",
            &format!(
                "runtime = {script:?}\ncontrol_socket = {:?}\n",
                hostd.control_socket
            ),
        )
        .unwrap();
    let out = podman.run_with(&runtime, &["-d", podman::Podman::BUSYBOX, "sleep", "1000"]);
    assert!(
        out.status.success(),
        "podman run through nri-runc and crun failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();

    let environ = wait_for("the logger's variable in the container", WAIT, || {
        let environ = podman.cat(&id, "/proc/1/environ").ok()?;
        environ
            .contains("NRI_LOGGER=logger-pid-")
            .then_some(environ)
    })
    .unwrap();
    assert!(environ.contains("NRI_LOGGER=logger-pid-"));
    // crun's own view: the container is crun's, with the logger's annotation.
    let state = run(Command::new(&script).args(["state", &id])).unwrap();
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(state["status"], "running", "{state}");
    assert!(
        state["annotations"]["logger.nri-rs.dev/seen"]
            .as_str()
            .is_some_and(|v| v.starts_with("logger-pid-")),
        "{state}"
    );

    podman.ok(&["rm", "-f", "-t", "0", &id]).unwrap();
    let seen = wait_for("the logger to see the removal", WAIT, || {
        let seen = events(&log);
        (seen.last().map(String::as_str) == Some("RemovePodSandbox")).then_some(seen)
    })
    .unwrap();
    let mut expected = vec!["Synchronize"];
    expected.extend_from_slice(OWN_POD_LIFECYCLE);
    assert_eq!(seen, expected);
}
