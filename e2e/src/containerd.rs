//! A private containerd for a test: its own root, state, sockets, NRI socket,
//! plugin and drop-in directories under a temporary directory, runc from
//! Debian, images imported from local archives, and `crictl` to drive it
//! through CRI as the kubelet does.
//!
//! ```no_run
//! use nri_e2e::containerd::{Containerd, Options};
//!
//! let ctrd = Containerd::start(Options::default()).unwrap();
//! let crictl = ctrd.crictl();
//! let pod = crictl.run_pod(&nri_e2e::containerd::PodSpec::new("demo")).unwrap();
//! println!("pod {pod}");
//! // Dropping `ctrd` removes every pod, stops containerd and its shims, and
//! // unmounts what it mounted.
//! ```

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};

use crate::host::{cache_dir, lock_file, run, wait_for, Daemon};
use crate::image::{self, ImageArchive};
use crate::{E2eError, Result};

/// Debian packages a containerd test needs besides the image tools.
pub const PACKAGES: &[&str] = &["runc"];

/// The containerd release the suite runs by default.
pub const CONTAINERD_VERSION: &str = "v2.4.2";
/// The oldest containerd the suite runs (NRI off by default there).
pub const CONTAINERD_17_VERSION: &str = "v1.7.35";
/// The crictl release.
pub const CRICTL_VERSION: &str = "v1.37.0";

/// How long a CRI call may take before the test fails.
const CRI_TIMEOUT: Duration = Duration::from_secs(60);

/// A containerd release's binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// Version, e.g. `v2.4.2`.
    pub version: String,
    /// `containerd`.
    pub containerd: PathBuf,
    /// `ctr`.
    pub ctr: PathBuf,
    /// Directory holding `containerd-shim-runc-v2` (put on the daemon's PATH).
    pub bin_dir: PathBuf,
}

impl Binaries {
    /// Whether this is a 1.x release (configuration version 2, NRI off by default).
    pub fn is_v1(&self) -> bool {
        self.version.starts_with("v1.")
    }
}

/// The binaries of containerd `version` (`v2.4.2` or `v1.7.35`), built from
/// the Go module proxy into the cache directory once.
///
/// 2.x builds with `go install`. 1.7's `go.mod` has `exclude` directives, which
/// `go install module@version` refuses; its source is downloaded from the
/// module proxy (`go mod download`) and built as the main module instead.
pub fn binaries(version: &str) -> Result<Binaries> {
    const PROGRAMS: &[&str] = &["containerd", "containerd-shim-runc-v2", "ctr"];
    let key = format!("containerd-{version}");
    let bin_dir = if version.starts_with("v1.") {
        let module = format!("github.com/containerd/containerd@{version}");
        go_build_cached(&key, PROGRAMS, |out| {
            let info = run(go().args(["mod", "download", "-json", &module]))?;
            let info: Value = serde_json::from_slice(&info.stdout)
                .map_err(|e| E2eError::io("parse go mod download", std::io::Error::other(e)))?;
            let src = info["Dir"].as_str().ok_or_else(|| {
                E2eError::Unsupported(format!("go mod download {module}: no Dir"))
            })?;
            let work = out.with_extension("src");
            let _ = fs::remove_dir_all(&work);
            run(Command::new("cp").arg("-r").arg(src).arg(&work))?;
            run(Command::new("chmod").arg("-R").arg("u+w").arg(&work))?;
            let mut build = go();
            build
                .current_dir(&work)
                .env("GOFLAGS", "-mod=mod")
                .arg("build")
                .arg(version_ldflags("github.com/containerd/containerd", version))
                .arg("-o");
            build.arg(format!("{}/", out.display()));
            build.args(PROGRAMS.iter().map(|p| format!("./cmd/{p}")));
            run(&mut build)?;
            let _ = fs::remove_dir_all(&work);
            Ok(())
        })?
    } else {
        let module = "github.com/containerd/containerd/v2";
        go_build_cached(&key, PROGRAMS, |out| {
            run(go()
                .env("GOBIN", out)
                .arg("install")
                .arg(version_ldflags(module, version))
                .args(
                    PROGRAMS
                        .iter()
                        .map(|p| format!("{module}/cmd/{p}@{version}")),
                ))?;
            Ok(())
        })?
    };
    Ok(Binaries {
        version: version.to_owned(),
        containerd: bin_dir.join("containerd"),
        ctr: bin_dir.join("ctr"),
        bin_dir,
    })
}

/// The linker flag containerd's release builds set, so the binaries report
/// `vX.Y.Z` as released ones do (a plain build reports `X.Y.Z+unknown`, which
/// NRI's version inference cannot place).
fn version_ldflags(module: &str, version: &str) -> String {
    format!("-ldflags=-X {module}/version.Version={version}")
}

/// `crictl`, built once into the cache directory.
pub fn crictl_binary() -> Result<PathBuf> {
    let dir = go_build_cached(&format!("crictl-{CRICTL_VERSION}"), &["crictl"], |out| {
        run(go()
            .env("GOBIN", out)
            .arg("install")
            .arg(format!("sigs.k8s.io/cri-tools/cmd/crictl@{CRICTL_VERSION}")))?;
        Ok(())
    })?;
    Ok(dir.join("crictl"))
}

/// The Go toolchain (`$NRI_INTEROP_GO`, else `go`), without the caller's
/// `GOFLAGS` or workspace.
fn go() -> Command {
    let mut cmd = Command::new(std::env::var_os("NRI_INTEROP_GO").unwrap_or_else(|| "go".into()));
    cmd.env("GOFLAGS", "").env("GOWORK", "off");
    cmd
}

/// Returns `<cache>/<key>/bin`, first running `build` into a scratch directory
/// unless every one of `expect` is already there. The scratch directory is
/// renamed into place, so an interrupted build never leaves a half-written
/// binary where a later run would trust it. Go's build cache is kept as Go
/// keeps it, so rebuilding a new version reuses what it can.
fn go_build_cached(
    key: &str,
    expect: &[&str],
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = cache_dir()?.join(key);
    let bin = root.join("bin");
    let done = |bin: &Path| expect.iter().all(|e| bin.join(e).is_file());
    if done(&bin) {
        return Ok(bin);
    }
    let _lock = lock_file(&cache_dir()?.join(format!(".{key}.lock")))?;
    if done(&bin) {
        return Ok(bin);
    }
    let scratch = root.join("bin.partial");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)
        .map_err(|e| E2eError::io(format!("create {}", scratch.display()), e))?;
    eprintln!("e2e: building {key} (kept in {})", root.display());
    build(&scratch)?;
    let _ = fs::remove_dir_all(&bin);
    fs::rename(&scratch, &bin)
        .map_err(|e| E2eError::io(format!("move {} into place", scratch.display()), e))?;
    Ok(bin)
}

/// How to configure a test's containerd.
#[derive(Debug, Clone)]
pub struct Options {
    /// containerd release (default [`CONTAINERD_VERSION`]).
    pub version: String,
    /// `plugin_registration_timeout` (default 5s).
    pub registration_timeout: String,
    /// `plugin_request_timeout` (default 2s).
    pub request_timeout: String,
    /// The `default_validator` table: `None` leaves it out; `Some(required)`
    /// enables the built-in validator with these `required_plugins`.
    pub default_validator: Option<Vec<String>>,
    /// Pre-installed plugins: file name in the plugin directory (`NN-name`) to
    /// the file to install there (a binary or a script).
    pub plugins: Vec<(String, PathBuf)>,
    /// Drop-in configurations: file name in conf.d (`NN-name.conf`) to text.
    pub plugin_configs: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            version: CONTAINERD_VERSION.to_owned(),
            registration_timeout: "5s".into(),
            request_timeout: "2s".into(),
            default_validator: None,
            plugins: Vec::new(),
            plugin_configs: Vec::new(),
        }
    }
}

/// The directory layout of one test's containerd.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Everything lives under this directory.
    pub dir: PathBuf,
    /// containerd's gRPC socket (CRI endpoint).
    pub socket: PathBuf,
    /// The NRI socket external plugins connect to.
    pub nri_socket: PathBuf,
    /// Where pre-installed plugins are.
    pub plugin_dir: PathBuf,
    /// Their drop-in configurations.
    pub plugin_config_dir: PathBuf,
    /// Pod and container logs.
    pub log_dir: PathBuf,
    /// The cgroup parent of every pod (cgroupfs driver), unique to the test.
    pub cgroup_parent: String,
}

/// A running containerd of a test. Dropping it removes every pod through
/// CRI, stops containerd, kills its shims, and unmounts and removes its
/// directories.
#[derive(Debug)]
pub struct Containerd {
    layout: Layout,
    bins: Binaries,
    crictl: PathBuf,
    config: PathBuf,
    daemon: Option<Daemon>,
    starts: u32,
    _tmp: tempfile::TempDir,
}

impl Containerd {
    /// Builds what is missing, writes the configuration, starts containerd,
    /// waits until CRI answers and imports the busybox and pause images.
    pub fn start(options: Options) -> Result<Containerd> {
        let bins = binaries(&options.version)?;
        let crictl = crictl_binary()?;
        let busybox = image::busybox()?;
        let pause = image::pause()?;
        let tmp = tempfile::Builder::new()
            .prefix("nri-e2e-ctrd-")
            .tempdir_in(std::env::temp_dir())
            .map_err(|e| E2eError::io("create temp dir", e))?;
        let dir = tmp.path().to_owned();
        let layout = Layout {
            socket: dir.join("containerd.sock"),
            nri_socket: dir.join("nri").join("nri.sock"),
            plugin_dir: dir.join("nri").join("plugins"),
            plugin_config_dir: dir.join("nri").join("conf.d"),
            log_dir: dir.join("logs"),
            cgroup_parent: format!(
                "/nri-e2e-{}",
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            dir,
        };
        for d in [
            &layout.plugin_dir,
            &layout.plugin_config_dir,
            &layout.log_dir,
        ] {
            fs::create_dir_all(d)
                .map_err(|e| E2eError::io(format!("create {}", d.display()), e))?;
        }
        for (name, file) in &options.plugins {
            install_plugin(&layout.plugin_dir, name, file)?;
        }
        for (name, text) in &options.plugin_configs {
            let path = layout.plugin_config_dir.join(name);
            fs::write(&path, text)
                .map_err(|e| E2eError::io(format!("write {}", path.display()), e))?;
        }
        let config = layout.dir.join("config.toml");
        let text = config_toml(&layout, &bins, &options, &pause.name)?;
        fs::write(&config, text)
            .map_err(|e| E2eError::io(format!("write {}", config.display()), e))?;
        let crictl_config = layout.dir.join("crictl.yaml");
        let endpoint = format!("unix://{}", layout.socket.display());
        fs::write(
            &crictl_config,
            format!(
                "runtime-endpoint: {endpoint}\nimage-endpoint: {endpoint}\ntimeout: {}\n",
                CRI_TIMEOUT.as_secs()
            ),
        )
        .map_err(|e| E2eError::io("write crictl.yaml", e))?;
        let mut ctrd = Containerd {
            layout,
            bins,
            crictl,
            config,
            daemon: None,
            starts: 0,
            _tmp: tmp,
        };
        ctrd.start_daemon()?;
        for img in [&busybox, &pause] {
            ctrd.import(img)?;
        }
        Ok(ctrd)
    }

    /// The layout of its directories.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The containerd release.
    pub fn version(&self) -> &str {
        &self.bins.version
    }

    /// Starts (or restarts) the daemon and waits until CRI answers.
    fn start_daemon(&mut self) -> Result<()> {
        self.starts += 1;
        let log = self
            .layout
            .dir
            .join(format!("containerd.{}.log", self.starts));
        let path = format!(
            "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            self.bins.bin_dir.display()
        );
        let daemon = Daemon::spawn(
            "containerd",
            &self.bins.containerd,
            &[OsStr::new("--config"), self.config.as_os_str()],
            &[("PATH", OsStr::new(&path))],
            &log,
        )?;
        self.daemon = Some(daemon);
        let crictl = self.crictl();
        let result = wait_for("containerd to answer CRI", CRI_TIMEOUT, || {
            if let Some(d) = self.daemon.as_mut() {
                if !d.is_running() {
                    return Some(Err(E2eError::Command {
                        command: "containerd".into(),
                        status: "exited".into(),
                        output: d.log(),
                    }));
                }
            }
            crictl
                .cmd(&["version"])
                .output()
                .ok()?
                .status
                .success()
                .then_some(Ok(()))
        });
        match result {
            Ok(inner) => inner,
            Err(e) => Err(E2eError::Command {
                command: "containerd".into(),
                status: e.to_string(),
                output: self.log(),
            }),
        }
    }

    /// Stops containerd (SIGTERM, as a service manager does) and starts it
    /// again with the same state; containers keep running in their shims.
    pub fn restart(&mut self) -> Result<()> {
        if let Some(mut d) = self.daemon.take() {
            d.stop(Duration::from_secs(30));
        }
        self.start_daemon()
    }

    /// containerd's log (of its current run).
    pub fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }

    /// A `crictl` for this containerd.
    pub fn crictl(&self) -> Crictl {
        Crictl {
            bin: self.crictl.clone(),
            config: self.layout.dir.join("crictl.yaml"),
            layout: self.layout.clone(),
        }
    }

    /// Imports an image archive into the CRI namespace (`ctr images import`).
    pub fn import(&self, image: &ImageArchive) -> Result<()> {
        run(Command::new(&self.bins.ctr)
            .arg("--address")
            .arg(&self.layout.socket)
            .args(["-n", "k8s.io", "images", "import"])
            .arg(&image.path))?;
        Ok(())
    }

    fn cleanup(&mut self) {
        if self.daemon.is_some() {
            let crictl = self.crictl();
            for args in [&["rmp", "-f", "-a"][..], &["rmi", "--prune"][..]] {
                let _ = crictl.cmd(args).output();
            }
        }
        if let Some(mut d) = self.daemon.take() {
            d.stop(Duration::from_secs(30));
        }
        kill_processes_mentioning(&self.layout.dir);
        unmount_below(&self.layout.dir);
        remove_cgroups(&self.layout.cgroup_parent);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Copies `file` into `dir` as `name`, executable.
pub fn install_plugin(dir: &Path, name: &str, file: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.join(name);
    fs::copy(file, &to)
        .map_err(|e| E2eError::io(format!("copy {} to {}", file.display(), to.display()), e))?;
    fs::set_permissions(&to, fs::Permissions::from_mode(0o755))
        .map_err(|e| E2eError::io(format!("chmod {}", to.display()), e))
}

/// Writes an executable shell script `name` into `dir` that runs `program`
/// with `args`: how a pre-installed plugin gets flags, since the runtime
/// starts it without any.
pub fn write_plugin_wrapper(dir: &Path, name: &str, program: &Path, args: &[&str]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut script = format!("#!/bin/sh\nexec '{}'", program.display());
    for a in args {
        let _ = write!(script, " '{}'", a.replace('\'', r"'\''"));
    }
    script.push('\n');
    let to = dir.join(name);
    fs::write(&to, script).map_err(|e| E2eError::io(format!("write {}", to.display()), e))?;
    fs::set_permissions(&to, fs::Permissions::from_mode(0o755))
        .map_err(|e| E2eError::io(format!("chmod {}", to.display()), e))
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| E2eError::io("bind a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| E2eError::io("read a free port", e))
}

fn config_toml(layout: &Layout, bins: &Binaries, o: &Options, sandbox: &str) -> Result<String> {
    let d = layout.dir.display();
    let port = free_port()?;
    let validator = match &o.default_validator {
        None => String::new(),
        Some(required) => format!(
            "\n[{nri}.default_validator]\n  enable = true\n  required_plugins = {}\n",
            serde_json::to_string(required).unwrap_or_else(|_| "[]".into()),
            nri = "NRI"
        ),
    };
    let nri = |table: &str| table.to_owned();
    let common = |nri_table: &str| {
        format!(
            "root = \"{d}/root\"\nstate = \"{d}/state\"\n\
             [grpc]\n  address = \"{sock}\"\n\
             [ttrpc]\n  address = \"{sock}.ttrpc\"\n\
             [debug]\n  address = \"{d}/debug.sock\"\n  level = \"info\"\n\
             [{nri_table}]\n  disable = false\n  socket_path = \"{nri_sock}\"\n\
             \x20 plugin_path = \"{plugins}\"\n  plugin_config_path = \"{confd}\"\n\
             \x20 plugin_registration_timeout = \"{reg}\"\n  plugin_request_timeout = \"{req}\"\n\
             \x20 disable_connections = false\n{validator}",
            sock = layout.socket.display(),
            nri_sock = layout.nri_socket.display(),
            plugins = layout.plugin_dir.display(),
            confd = layout.plugin_config_dir.display(),
            reg = o.registration_timeout,
            req = o.request_timeout,
            validator = validator.replace("NRI", nri_table),
        )
    };
    let runc = "/usr/sbin/runc";
    let text = if bins.is_v1() {
        let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
        format!(
            "version = 2\n{}\n\
             [{cri}]\n  sandbox_image = \"{sandbox}\"\n  restrict_oom_score_adj = true\n\
             \x20 disable_tcp_service = true\n  stream_server_address = \"127.0.0.1\"\n\
             \x20 stream_server_port = \"{port}\"\n  enable_selinux = false\n\
             [{cri}.cni]\n  conf_dir = \"{d}/cni/net.d\"\n  bin_dir = \"{d}/cni/bin\"\n\
             [{cri}.containerd]\n  snapshotter = \"overlayfs\"\n  default_runtime_name = \"runc\"\n\
             [{cri}.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
             [{cri}.containerd.runtimes.runc.options]\n  BinaryName = \"{runc}\"\n  SystemdCgroup = false\n",
            common(&nri("plugins.\"io.containerd.nri.v1.nri\"")),
        )
    } else {
        let images = "plugins.'io.containerd.cri.v1.images'";
        let rt = "plugins.'io.containerd.cri.v1.runtime'";
        format!(
            "version = 3\n{}\n\
             [{images}]\n  snapshotter = \"overlayfs\"\n\
             [{images}.pinned_images]\n  sandbox = \"{sandbox}\"\n\
             [{rt}]\n  restrict_oom_score_adj = true\n  enable_selinux = false\n\
             [{rt}.cni]\n  conf_dir = \"{d}/cni/net.d\"\n  bin_dirs = [\"{d}/cni/bin\"]\n\
             [{rt}.containerd]\n  default_runtime_name = \"runc\"\n\
             [{rt}.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
             [{rt}.containerd.runtimes.runc.options]\n  BinaryName = \"{runc}\"\n  SystemdCgroup = false\n\
             [plugins.'io.containerd.grpc.v1.cri']\n  disable_tcp_service = true\n\
             \x20 stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"{port}\"\n",
            common(&nri("plugins.'io.containerd.nri.v1.nri'")),
        )
    };
    Ok(text)
}

/// Kills every process whose command line mentions `dir` (the shims of a
/// test's containerd name its socket there), by pid.
fn kill_processes_mentioning(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
}

/// Lazily unmounts every mount point below `dir`, deepest first.
fn unmount_below(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH);
    }
}

/// Removes the test's cgroup parent in every v1 hierarchy (empty by now).
fn remove_cgroups(parent: &str) {
    let Ok(entries) = fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path().join(parent.trim_start_matches('/'));
        if dir.is_dir() {
            // Children first; cgroup directories are removed with rmdir.
            if let Ok(children) = fs::read_dir(&dir) {
                for child in children.flatten() {
                    if child.path().is_dir() {
                        let _ = fs::remove_dir(child.path());
                    }
                }
            }
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// A pod to run: name, annotations and the cgroup parent of its containerd.
#[derive(Debug, Clone)]
pub struct PodSpec {
    /// Pod name (also used for its uid).
    pub name: String,
    /// Namespace (default `default`).
    pub namespace: String,
    /// Pod annotations.
    pub annotations: BTreeMap<String, String>,
}

impl PodSpec {
    /// A pod named `name` in namespace `default`, without annotations.
    pub fn new(name: &str) -> PodSpec {
        PodSpec {
            name: name.to_owned(),
            namespace: "default".into(),
            annotations: BTreeMap::new(),
        }
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> PodSpec {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    fn config(&self, layout: &Layout) -> Value {
        json!({
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "uid": format!("uid-{}", self.name), "attempt": 0},
            "log_directory": layout.log_dir.join(&self.name),
            "annotations": self.annotations,
            "linux": {
                "cgroup_parent": layout.cgroup_parent,
                "security_context": {"namespace_options": {"network": 2, "pid": 1}}
            }
        })
    }
}

/// A container to create in a pod.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// Container name.
    pub name: String,
    /// Command (default: a shell that sleeps until SIGTERM).
    pub command: Vec<String>,
    /// Environment.
    pub env: Vec<(String, String)>,
    /// Container annotations.
    pub annotations: BTreeMap<String, String>,
    /// Linux resources in CRI's JSON form, e.g. `{"cpu_shares": 512}`.
    pub resources: Value,
}

impl ContainerSpec {
    /// A busybox container named `name` that sleeps until stopped.
    pub fn new(name: &str) -> ContainerSpec {
        ContainerSpec {
            name: name.to_owned(),
            command: vec![
                "/bin/sh".into(),
                "-c".into(),
                "trap 'exit 0' TERM; while :; do sleep 1; done".into(),
            ],
            env: Vec::new(),
            annotations: BTreeMap::new(),
            resources: json!({}),
        }
    }

    /// Adds a container annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> ContainerSpec {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets Linux resources (CRI's JSON form).
    pub fn resources(mut self, resources: Value) -> ContainerSpec {
        self.resources = resources;
        self
    }

    fn config(&self) -> Value {
        let envs: Vec<Value> = self
            .env
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        json!({
            "metadata": {"name": self.name},
            "image": {"image": image_name("busybox")},
            "command": self.command,
            "envs": envs,
            "annotations": self.annotations,
            "log_path": format!("{}.log", self.name),
            "linux": {
                "resources": self.resources,
                "security_context": {"namespace_options": {"network": 2, "pid": 1}}
            }
        })
    }
}

fn image_name(name: &str) -> String {
    format!("docker.io/nri-e2e/{name}:1")
}

/// `crictl` talking to one test's containerd.
#[derive(Debug, Clone)]
pub struct Crictl {
    bin: PathBuf,
    config: PathBuf,
    layout: Layout,
}

/// A CRI call that failed: what `crictl` printed.
#[derive(Debug, Clone)]
pub struct CriFailure {
    /// Standard error of `crictl`, which carries the runtime's error text.
    pub stderr: String,
}

impl Crictl {
    /// A `crictl` command with this containerd's configuration.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--config").arg(&self.config).args(args);
        cmd
    }

    /// Runs `crictl ARGS`; its standard output, trimmed.
    pub fn call(&self, args: &[&str]) -> Result<String> {
        let out = run(&mut self.cmd(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Runs `crictl ARGS` and returns its standard output, or what it printed
    /// on failure (to compare a plugin's error word for word).
    pub fn try_call(&self, args: &[&str]) -> std::result::Result<String, CriFailure> {
        match self.cmd(args).output() {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            }
            Ok(out) => Err(CriFailure {
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Err(e) => Err(CriFailure {
                stderr: format!("run crictl: {e}"),
            }),
        }
    }

    fn write_config(&self, name: &str, value: &Value) -> Result<PathBuf> {
        let path = self.layout.dir.join(name);
        let text = serde_json::to_vec_pretty(value)
            .map_err(|e| E2eError::io("encode CRI config", std::io::Error::other(e)))?;
        fs::write(&path, text).map_err(|e| E2eError::io(format!("write {}", path.display()), e))?;
        Ok(path)
    }

    /// `crictl runp`: runs a pod, returns its id.
    pub fn run_pod(&self, pod: &PodSpec) -> Result<String> {
        self.try_run_pod(pod).map_err(|f| E2eError::Command {
            command: format!("crictl runp ({})", pod.name),
            status: "failed".into(),
            output: f.stderr,
        })
    }

    /// `crictl runp`, failures returned as the CRI client saw them.
    pub fn try_run_pod(&self, pod: &PodSpec) -> std::result::Result<String, CriFailure> {
        let path = self
            .write_config(&format!("pod-{}.json", pod.name), &pod.config(&self.layout))
            .map_err(|e| CriFailure {
                stderr: e.to_string(),
            })?;
        let p = path.to_string_lossy().into_owned();
        self.try_call(&["runp", &p])
    }

    /// `crictl create` + `crictl start`: returns the container id.
    pub fn run_container(
        &self,
        pod_id: &str,
        pod: &PodSpec,
        ctr: &ContainerSpec,
    ) -> Result<String> {
        let id = self
            .try_create_container(pod_id, pod, ctr)
            .map_err(|f| E2eError::Command {
                command: format!("crictl create ({})", ctr.name),
                status: "failed".into(),
                output: f.stderr,
            })?;
        self.call(&["start", &id])?;
        Ok(id)
    }

    /// `crictl create`, failures returned as the CRI client saw them.
    pub fn try_create_container(
        &self,
        pod_id: &str,
        pod: &PodSpec,
        ctr: &ContainerSpec,
    ) -> std::result::Result<String, CriFailure> {
        let err = |e: E2eError| CriFailure {
            stderr: e.to_string(),
        };
        let pod_path = self
            .write_config(&format!("pod-{}.json", pod.name), &pod.config(&self.layout))
            .map_err(err)?;
        let ctr_path = self
            .write_config(
                &format!("ctr-{}-{}.json", pod.name, ctr.name),
                &ctr.config(),
            )
            .map_err(err)?;
        let c = ctr_path.to_string_lossy().into_owned();
        let p = pod_path.to_string_lossy().into_owned();
        self.try_call(&["create", pod_id, &c, &p])
    }

    /// `crictl exec -s ID CMD...`: runs a command in the container (ExecSync,
    /// no streaming server) and returns its standard output without the
    /// trailing line breaks crictl adds.
    pub fn exec(&self, id: &str, command: &[&str]) -> Result<String> {
        let mut args = vec!["exec", "-s", id];
        args.extend_from_slice(command);
        let out = run(&mut self.cmd(&args))?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_owned())
    }

    /// `crictl inspect ID` as JSON.
    pub fn inspect(&self, id: &str) -> Result<Value> {
        let out = self.call(&["inspect", "-o", "json", id])?;
        serde_json::from_str(&out)
            .map_err(|e| E2eError::io("parse crictl inspect", std::io::Error::other(e)))
    }

    /// The ids of running pods (`crictl pods -q --state ready`).
    pub fn ready_pods(&self) -> Result<Vec<String>> {
        Ok(lines(&self.call(&["pods", "-q", "--state", "ready"])?))
    }

    /// The ids of running containers (`crictl ps -q`).
    pub fn running_containers(&self) -> Result<Vec<String>> {
        Ok(lines(&self.call(&["ps", "-q", "--state", "running"])?))
    }

    /// The process id of a container's init process, from `crictl inspect`.
    pub fn pid(&self, id: &str) -> Result<u32> {
        let v = self.inspect(id)?;
        v.pointer("/info/pid")
            .and_then(Value::as_u64)
            .map(|p| p as u32)
            .ok_or_else(|| E2eError::Unsupported(format!("no pid in crictl inspect {id}")))
    }

    /// Reads a cgroup v1 file of a container (`controller`, e.g. `cpu`, and
    /// file, e.g. `cpu.shares`) through its init process's cgroup.
    pub fn cgroup_file(&self, id: &str, controller: &str, file: &str) -> Result<String> {
        let pid = self.pid(id)?;
        let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .map_err(|e| E2eError::io(format!("read /proc/{pid}/cgroup"), e))?;
        let path = cgroups
            .lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let _ = parts.next()?;
                let controllers = parts.next()?;
                let path = parts.next()?;
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then(|| path.to_owned())
            })
            .ok_or_else(|| {
                E2eError::Unsupported(format!("no {controller} cgroup for pid {pid}:\n{cgroups}"))
            })?;
        let mount = fs::read_dir("/sys/fs/cgroup")
            .map_err(|e| E2eError::io("read /sys/fs/cgroup", e))?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .map(|n| n.to_string_lossy().split(',').any(|c| c == controller))
                    .unwrap_or(false)
            })
            .ok_or_else(|| {
                E2eError::Unsupported(format!("no cgroup v1 hierarchy for {controller}"))
            })?;
        let file_path = mount.join(path.trim_start_matches('/')).join(file);
        fs::read_to_string(&file_path)
            .map(|s| s.trim().to_owned())
            .map_err(|e| E2eError::io(format!("read {}", file_path.display()), e))
    }
}

fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}
