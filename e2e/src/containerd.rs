//! A private containerd for a test: its own root, state, sockets, NRI socket,
//! plugin and drop-in directories under a temporary directory, runc from
//! Debian, images imported from local archives, and `crictl` to drive it
//! through CRI as the kubelet does.
//!
//! ```no_run
//! use nri_e2e::containerd::Containerd;
//! use nri_e2e::cri::{CriRuntime, Options, PodSpec};
//!
//! let ctrd = Containerd::start(Options::default()).unwrap();
//! let crictl = ctrd.crictl();
//! let pod = crictl.run_pod(&PodSpec::new("demo")).unwrap();
//! println!("pod {pod}");
//! // Dropping `ctrd` removes every pod, stops containerd and its shims, and
//! // unmounts what it mounted.
//! ```

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cri::{free_port, start_daemon, CriRuntime, Layout, Options};
use crate::gobuild::{build_from_source, go, go_build_cached};
use crate::host::{run, wait_for, Daemon};
use crate::image::{self, ImageArchive};
use crate::{E2eError, Result};

/// Debian packages a containerd test needs besides the image tools.
pub const PACKAGES: &[&str] = &["runc"];

/// The containerd release the suite runs by default.
pub const CONTAINERD_VERSION: &str = "v2.4.2";
/// The oldest containerd the suite runs (NRI off by default there).
pub const CONTAINERD_17_VERSION: &str = "v1.7.35";

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
        go_build_cached(&key, PROGRAMS, |out| {
            let programs: Vec<String> = PROGRAMS.iter().map(|p| format!("cmd/{p}")).collect();
            let programs: Vec<&str> = programs.iter().map(String::as_str).collect();
            build_from_source(
                "github.com/containerd/containerd",
                version,
                &programs,
                &[version_ldflags("github.com/containerd/containerd", version)],
                out,
                |_| Ok(()),
            )
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

/// A running containerd of a test. Dropping it removes every pod through
/// CRI, stops containerd, kills its shims, and unmounts and removes its
/// directories.
#[derive(Debug)]
pub struct Containerd {
    layout: Layout,
    bins: Binaries,
    config: PathBuf,
    daemon: Option<Daemon>,
    starts: u32,
    // Dropped after the daemon and its shims are stopped (fields drop after
    // `Drop::drop`).
    _shim_dir: ShimSocketDir,
    _tmp: tempfile::TempDir,
}

/// The directory containerd's shims put their sockets in whatever the
/// configuration says (`/run/containerd/s`, a constant of 1.7 and 2.4 alike).
const SHIM_SOCKET_DIR: &str = "/run/containerd/s";

/// Claims on [`SHIM_SOCKET_DIR`] held by this process's daemons.
static SHIM_DIR_USERS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// Where the test processes note which of [`SHIM_SOCKET_DIR`] and its
/// parent one of their daemons found absent (one path a line). Test
/// processes run side by side, so the last to stop removes them.
fn shim_dir_marker() -> PathBuf {
    std::env::temp_dir().join("nri-e2e-created-shim-socket-dir")
}

/// A claim on [`SHIM_SOCKET_DIR`], taken before a daemon starts: the
/// directories it finds absent are noted in [`shim_dir_marker`]. When the
/// last claim of the process ends (its daemons stopped), the noted
/// directories are removed again if they are empty, so the host keeps no
/// trace of the tests; directories another test process still uses stay
/// noted for that process to remove.
#[derive(Debug)]
pub(crate) struct ShimSocketDir;

impl ShimSocketDir {
    pub(crate) fn claim() -> ShimSocketDir {
        let mut users = SHIM_DIR_USERS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = Path::new(SHIM_SOCKET_DIR);
        let absent: String = [Some(dir), dir.parent()]
            .into_iter()
            .flatten()
            .filter(|d| !d.exists())
            .map(|d| format!("{}\n", d.display()))
            .collect();
        if !absent.is_empty() {
            use std::io::Write;
            let _ = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(shim_dir_marker())
                .and_then(|mut f| f.write_all(absent.as_bytes()));
        }
        *users += 1;
        ShimSocketDir
    }
}

impl Drop for ShimSocketDir {
    fn drop(&mut self) {
        let mut users = SHIM_DIR_USERS.lock().unwrap_or_else(|e| e.into_inner());
        *users -= 1;
        if *users > 0 {
            return;
        }
        let marker = shim_dir_marker();
        let Ok(noted) = fs::read_to_string(&marker) else {
            return;
        };
        let dir = Path::new(SHIM_SOCKET_DIR);
        // Innermost first; `remove_dir` leaves a directory that is not empty.
        let mut left = false;
        for created in [Some(dir), dir.parent()].into_iter().flatten() {
            if !noted.lines().any(|l| Path::new(l) == created) {
                continue;
            }
            if created == dir {
                clear_shim_sockets(dir);
            }
            let _ = fs::remove_dir(created);
            left |= created.exists();
        }
        if !left {
            let _ = fs::remove_file(marker);
        }
    }
}

/// Waits (at most 10 s) until the shim socket directory the tests created
/// is empty: a shim removes its socket when it exits, which can be after its
/// containerd stopped. A socket nobody listens on any more (its shim was
/// killed) is removed; a live one is left alone, and then the directory too.
fn clear_shim_sockets(dir: &Path) {
    let _ = wait_for("the shims' sockets to go", Duration::from_secs(10), || {
        let live = fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(
                |entry| match std::os::unix::net::UnixStream::connect(entry.path()) {
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        let _ = fs::remove_file(entry.path());
                        false
                    }
                    _ => true,
                },
            )
            .count();
        (live == 0).then_some(())
    });
}

impl Containerd {
    /// Builds what is missing, writes the configuration, starts containerd
    /// (`options.version`, default [`CONTAINERD_VERSION`]), waits until CRI
    /// answers and imports the busybox and pause images.
    pub fn start(options: Options) -> Result<Containerd> {
        Self::start_with_config(options, |text| text)
    }

    /// [`start`](Self::start), with the configuration file's text passed
    /// through `edit` before containerd reads it (e.g. to turn its NRI off
    /// and run another runtime binary).
    pub fn start_with_config(
        mut options: Options,
        edit: impl FnOnce(String) -> String,
    ) -> Result<Containerd> {
        if options.version.is_empty() {
            options.version = CONTAINERD_VERSION.to_owned();
        }
        let bins = binaries(&options.version)?;
        let busybox = image::busybox()?;
        let pause = image::pause()?;
        let shim_dir = ShimSocketDir::claim();
        let (tmp, layout) = Layout::create("nri-e2e-ctrd-", "containerd.sock", &options)?;
        let config = layout.dir.join("config.toml");
        let text = edit(config_toml(&layout, &bins, &options, &pause.name)?);
        fs::write(&config, text)
            .map_err(|e| E2eError::io(format!("write {}", config.display()), e))?;
        let mut ctrd = Containerd {
            layout,
            bins,
            config,
            daemon: None,
            starts: 0,
            _shim_dir: shim_dir,
            _tmp: tmp,
        };
        ctrd.start_daemon()?;
        for img in [&busybox, &pause] {
            ctrd.import(img)?;
        }
        Ok(ctrd)
    }

    /// The containerd release.
    pub fn version(&self) -> &str {
        &self.bins.version
    }

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
        let daemon = start_daemon(
            "containerd",
            &self.bins.containerd,
            &[OsStr::new("--config"), self.config.as_os_str()],
            &[("PATH", OsStr::new(&path))],
            &log,
            &self.layout,
        )?;
        self.daemon = Some(daemon);
        Ok(())
    }

    /// Stops containerd (SIGTERM, as a service manager does) and starts it
    /// again with the same state; containers keep running in their shims.
    pub fn restart(&mut self) -> Result<()> {
        if let Some(mut d) = self.daemon.take() {
            d.stop(Duration::from_secs(30));
        }
        self.start_daemon()
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
}

impl CriRuntime for Containerd {
    fn describe(&self) -> String {
        format!("containerd {}", self.bins.version)
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.layout.stop_runtime(self.daemon.take());
    }
}

fn config_toml(layout: &Layout, bins: &Binaries, o: &Options, sandbox: &str) -> Result<String> {
    let d = layout.dir.display();
    let port = free_port()?;
    let common = |nri_table: &str| {
        let validator = match &o.default_validator {
            None => String::new(),
            Some(required) => format!(
                "\n[{nri_table}.default_validator]\n  enable = true\n  required_plugins = {}\n",
                serde_json::to_string(required).unwrap_or_else(|_| "[]".into()),
            ),
        };
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
             [{cri}.containerd.runtimes.runc.options]\n  BinaryName = \"{runc}\"\n  Root = \"{d}/runc\"\n  SystemdCgroup = false\n",
            common("plugins.\"io.containerd.nri.v1.nri\""),
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
             [{rt}.containerd.runtimes.runc.options]\n  BinaryName = \"{runc}\"\n  Root = \"{d}/runc\"\n  SystemdCgroup = false\n\
             [plugins.'io.containerd.grpc.v1.cri']\n  disable_tcp_service = true\n\
             \x20 stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"{port}\"\n",
            common("plugins.'io.containerd.nri.v1.nri'"),
        )
    };
    Ok(text)
}
