//! A private Docker Engine for a test: `dockerd` (moby v2) with its own
//! `--data-root`, `--exec-root`, `--pidfile`, `-H unix://...` and
//! configuration file under a temporary directory, talking to a private
//! containerd (the suite's containerd release, its root, state and sockets
//! under the same directory, its own NRI and CRI off), runc 1.3 as its
//! runtime, and a docker CLI for it. Nothing of a host Docker is used:
//! not `/var/run/docker.sock`, `/var/lib/docker` or `/etc/docker`. The
//! shims put their sockets in `/run/containerd/s` whatever the
//! configuration says; the directories are removed again when the last
//! daemon of the tests stops, if the tests made them.
//!
//! ```no_run
//! use nri_e2e::docker::{Docker, DockerOptions};
//!
//! let docker = Docker::start(DockerOptions::default()).unwrap();
//! let out = docker.run(&["--rm", "--network", "none", Docker::BUSYBOX, "true"]);
//! assert!(out.status.success());
//! // Dropping `docker` removes its containers, stops dockerd, containerd and
//! // the shims by pid, and unmounts what they mounted.
//! ```

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::containerd::{self, CONTAINERD_VERSION};
use crate::gobuild::{go, go_build_cached};
use crate::host::{
    kill_processes_mentioning, remove_cgroups, run, unmount_below, wait_for, Daemon,
};
use crate::image;
use crate::{E2eError, Result};

/// The moby module `dockerd` is built from (Docker Engine 29; vendors NRI
/// v0.12.3).
pub const MOBY_VERSION: &str = "v2.0.0-beta.24";
/// The runc release Docker runs (moby v2 puts a time namespace into every
/// spec, which Debian's runc 1.1 refuses).
pub const RUNC_VERSION: &str = "v1.3.7";

/// Debian packages the Docker suite installs: runc is built with seccomp
/// (`libseccomp-dev`, found with `pkg-config`).
pub const PACKAGES: &[&str] = &["libseccomp-dev", "pkg-config"];

/// How long dockerd may take to answer, a plugin to register.
pub const WAIT: Duration = Duration::from_secs(60);

/// `dockerd` of [`MOBY_VERSION`], built once into the cache directory
/// (about eleven minutes on two busy cores).
pub fn dockerd_binary() -> Result<PathBuf> {
    let dir = go_build_cached(&format!("dockerd-{MOBY_VERSION}"), &["dockerd"], |out| {
        run(go().env("GOBIN", out).arg("install").arg(format!(
            "github.com/moby/moby/v2/cmd/dockerd@{MOBY_VERSION}"
        )))?;
        Ok(())
    })?;
    Ok(dir.join("dockerd"))
}

/// `runc` of [`RUNC_VERSION`] with seccomp, built once into the cache
/// directory; its directory (put first on the daemons' `PATH`).
pub fn runc_dir() -> Result<PathBuf> {
    crate::host::install_packages(PACKAGES)?;
    go_build_cached(&format!("runc-{RUNC_VERSION}"), &["runc"], |out| {
        run(go()
            .env("GOBIN", out)
            .env("CGO_ENABLED", "1")
            .args(["install", "-tags", "seccomp"])
            .arg(format!("github.com/opencontainers/runc@{RUNC_VERSION}")))?;
        Ok(())
    })
}

/// The docker CLI: `$NRI_E2E_DOCKER_CLI`, else `docker` on `PATH` (the
/// test machines have the Docker 28 client, and no engine).
///
/// It is not built here: `github.com/docker/cli` v29 needs modules the Go
/// module proxy does not serve (`github.com/moby/swarmkit/v2` v2.1.3), and
/// Debian 12's `docker.io` package brings a second engine with it. moby v2
/// answers API versions from 1.40 up, so any client since Docker 19.03
/// works.
pub fn cli_binary() -> Result<PathBuf> {
    let cli = std::env::var_os("NRI_E2E_DOCKER_CLI")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("docker"))
                    .find(|p| p.is_file())
            })
        })
        .ok_or_else(|| {
            E2eError::Unsupported(
                "no docker CLI (set NRI_E2E_DOCKER_CLI or put `docker` on PATH)".into(),
            )
        })?;
    run(Command::new(&cli).args(["--version"]))?;
    Ok(cli)
}

/// Docker's own NRI (`nri-opts` in `daemon.json`).
#[derive(Debug, Clone, Default)]
pub struct NriOpts {
    /// Whether the socket for external plugins is on (`socket-path`).
    pub socket: bool,
}

/// How to start a test's Docker.
#[derive(Debug, Clone, Default)]
pub struct DockerOptions {
    /// Docker's own NRI: `None` leaves it off.
    pub nri: Option<NriOpts>,
    /// Extra runtimes (`runtimes` in `daemon.json`): name and path.
    pub runtimes: Vec<(String, PathBuf)>,
    /// `default-runtime`, if not `runc`.
    pub default_runtime: Option<String>,
    /// Pre-installed plugins, installed before dockerd starts: file name
    /// (`NN-name`), program, and the drop-in configuration if any.
    pub plugins: Vec<(String, PathBuf, Option<String>)>,
}

/// A running private Docker. Dropping it removes its containers, stops
/// dockerd and containerd (SIGTERM, then SIGKILL) and every shim by pid,
/// unmounts what they mounted and removes the cgroup parent.
#[derive(Debug)]
pub struct Docker {
    dir: PathBuf,
    cli: PathBuf,
    socket: PathBuf,
    /// Docker's NRI socket for external plugins (when enabled).
    pub nri_socket: PathBuf,
    /// Docker's pre-installed plugin directory (`plugin-path`).
    pub plugin_dir: PathBuf,
    /// Their configuration directory (`plugin-config-path`).
    pub plugin_config_dir: PathBuf,
    /// The exec root: runc's state is in `<exec root>/runtime-runc`.
    pub exec_root: PathBuf,
    cgroup_parent: String,
    made_run_docker: bool,
    dockerd: Option<Daemon>,
    containerd: Option<Daemon>,
    // Dropped after the daemons are stopped (fields drop after `Drop::drop`).
    _shim_dir: containerd::ShimSocketDir,
    _tmp: tempfile::TempDir,
}

impl Docker {
    /// The busybox image's name (see [`image::busybox`]).
    pub const BUSYBOX: &'static str = "docker.io/nri-e2e/busybox:1";

    /// Builds what is missing, writes the configuration, starts containerd
    /// and dockerd, waits until dockerd answers and loads the busybox image.
    pub fn start(options: DockerOptions) -> Result<Docker> {
        let dockerd = dockerd_binary()?;
        let runc = runc_dir()?;
        let cli = cli_binary()?;
        let ctrd = containerd::binaries(CONTAINERD_VERSION)?;
        let busybox = image::busybox()?;
        // dockerd makes /run/docker/plugins (the directory of legacy plugin
        // sockets, not configurable): removed at the end if it was not there.
        let made_run_docker = !Path::new("/run/docker").exists();

        // Short: unix socket paths below it must stay under 108 bytes.
        let mut tmp = tempfile::Builder::new()
            .prefix("nri-e2e-dkr-")
            .tempdir_in("/tmp")
            .map_err(|e| E2eError::io("create temp dir", e))?;
        if std::env::var_os("NRI_E2E_KEEP").is_some() {
            tmp.disable_cleanup(true);
            eprintln!("e2e: keeping {}", tmp.path().display());
        }
        let dir = tmp.path().to_owned();
        let nri_dir = dir.join("nri");
        let mk = |p: &Path| {
            fs::create_dir_all(p).map_err(|e| E2eError::io(format!("create {}", p.display()), e))
        };
        let plugin_dir = nri_dir.join("plugins");
        let plugin_config_dir = nri_dir.join("conf.d");
        for d in [&plugin_dir, &plugin_config_dir, &dir.join("cli")] {
            mk(d)?;
        }
        // The NRI socket's directory is root's alone (Docker makes the
        // socket itself world-writable).
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&nri_dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| E2eError::io("chmod the NRI directory", e))?;
        let exec_root = dir.join("exec");
        let cgroup_parent = format!(
            "/nri-e2e-{}",
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let mut docker = Docker {
            cli,
            socket: dir.join("docker.sock"),
            nri_socket: nri_dir.join("nri.sock"),
            plugin_dir,
            plugin_config_dir,
            exec_root,
            cgroup_parent,
            made_run_docker,
            dockerd: None,
            containerd: None,
            _shim_dir: containerd::ShimSocketDir::claim(),
            dir,
            _tmp: tmp,
        };
        let path = format!(
            "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            runc.display(),
            ctrd.bin_dir.display()
        );
        for (name, program, config) in &options.plugins {
            docker.install_plugin(program, name, config.as_deref())?;
        }
        docker.start_containerd(&ctrd.containerd, &path)?;
        docker.write_config(&options)?;
        docker.start_dockerd(&dockerd, &path)?;
        docker.ok(&["load", "-q", "-i", &busybox.path.to_string_lossy()])?;
        Ok(docker)
    }

    fn containerd_socket(&self) -> PathBuf {
        self.dir.join("ctrd").join("containerd.sock")
    }

    fn start_containerd(&mut self, program: &Path, path: &str) -> Result<()> {
        let d = self.dir.join("ctrd");
        let sock = self.containerd_socket();
        let config = d.join("config.toml");
        fs::create_dir_all(&d).map_err(|e| E2eError::io(format!("create {}", d.display()), e))?;
        // containerd's own NRI and CRI are off: Docker talks to it directly.
        let text = format!(
            "version = 3\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
             disabled_plugins = [\"io.containerd.nri.v1.nri\", \"io.containerd.grpc.v1.cri\", \
             \"io.containerd.cri.v1.images\", \"io.containerd.cri.v1.runtime\", \
             \"io.containerd.podsandbox.controller.v1.podsandbox\"]\n\
             [grpc]\n  address = \"{sock}\"\n\
             [ttrpc]\n  address = \"{sock}.ttrpc\"\n\
             [debug]\n  address = \"{d}/debug.sock\"\n  level = \"info\"\n",
            d = d.display(),
            sock = sock.display(),
        );
        fs::write(&config, text)
            .map_err(|e| E2eError::io(format!("write {}", config.display()), e))?;
        let mut daemon = Daemon::spawn(
            "containerd",
            program,
            &[OsStr::new("--config"), config.as_os_str()],
            &[("PATH", OsStr::new(path))],
            &d.join("containerd.log"),
        )?;
        let answered = wait_for("containerd's socket", WAIT, || {
            if !daemon.is_running() {
                return Some(false);
            }
            sock.exists().then_some(true)
        });
        match answered {
            Ok(true) => {
                self.containerd = Some(daemon);
                Ok(())
            }
            other => Err(E2eError::Command {
                command: "containerd".into(),
                status: format!("{other:?}"),
                output: daemon.log(),
            }),
        }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("daemon.json")
    }

    /// Writes `daemon.json` for `options` (read again on [`reload`](Self::reload)).
    pub fn write_config(&self, options: &DockerOptions) -> Result<()> {
        let mut config = json!({
            "data-root": self.dir.join("data"),
            "exec-root": self.exec_root,
            "pidfile": self.dir.join("docker.pid"),
            "containerd": self.containerd_socket(),
            "cgroup-parent": self.cgroup_parent,
            "userland-proxy": false,
            "bridge": "none",
            "iptables": false,
            "ip6tables": false,
            "ip-forward": false,
            "ip-masq": false,
            "storage-driver": "overlayfs",
            "log-level": "debug",
        });
        if let Some(nri) = &options.nri {
            let mut opts = json!({
                "enable": true,
                "plugin-path": self.plugin_dir,
                "plugin-config-path": self.plugin_config_dir,
            });
            if nri.socket {
                opts["socket-path"] = json!(self.nri_socket);
            }
            config["nri-opts"] = opts;
        }
        if !options.runtimes.is_empty() {
            let runtimes: serde_json::Map<String, Value> = options
                .runtimes
                .iter()
                .map(|(name, path)| (name.clone(), json!({"path": path})))
                .collect();
            config["runtimes"] = Value::Object(runtimes);
        }
        if let Some(default) = &options.default_runtime {
            config["default-runtime"] = json!(default);
        }
        let text = serde_json::to_vec_pretty(&config)
            .map_err(|e| E2eError::io("encode daemon.json", std::io::Error::other(e)))?;
        fs::write(self.config_path(), text).map_err(|e| E2eError::io("write daemon.json", e))
    }

    fn start_dockerd(&mut self, program: &Path, path: &str) -> Result<()> {
        let host = format!("unix://{}", self.socket.display());
        let config = self.config_path();
        let mut daemon = Daemon::spawn(
            "dockerd",
            program,
            &[
                OsStr::new("--config-file"),
                config.as_os_str(),
                OsStr::new("-H"),
                OsStr::new(&host),
            ],
            &[("PATH", OsStr::new(path))],
            &self.dir.join("dockerd.log"),
        )?;
        let answered = wait_for("dockerd to answer", WAIT, || {
            if !daemon.is_running() {
                return Some(false);
            }
            self.cmd()
                .args(["version", "--format", "{{.Server.Version}}"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .ok()?
                .success()
                .then_some(true)
        });
        match answered {
            Ok(true) => {
                self.dockerd = Some(daemon);
                Ok(())
            }
            other => Err(E2eError::Command {
                command: "dockerd".into(),
                status: format!("{other:?}"),
                output: daemon.log(),
            }),
        }
    }

    /// The test's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A docker CLI command for this daemon (its own `DOCKER_CONFIG`).
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(&self.cli);
        cmd.arg("-H")
            .arg(format!("unix://{}", self.socket.display()))
            .env("DOCKER_CONFIG", self.dir.join("cli"))
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_CONTEXT")
            .stdin(Stdio::null());
        cmd
    }

    /// `docker ARGS`, which must succeed; its standard output, trimmed.
    pub fn ok(&self, args: &[&str]) -> Result<String> {
        let out = run(self.cmd().args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// `docker run ARGS`, pass or fail: its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd()
            .arg("run")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run the docker CLI: {e}"))
    }

    /// `docker run -d --network none ARGS`, which must succeed; the
    /// container's id.
    pub fn run_detached(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["run", "-d", "--network", "none"];
        all.extend_from_slice(args);
        self.ok(&all)
    }

    /// A file of a running container, read with `docker exec ... cat`.
    pub fn cat(&self, id: &str, path: &str) -> Result<String> {
        self.ok(&["exec", id, "cat", path])
    }

    /// `docker inspect ID` (the first object).
    pub fn inspect(&self, id: &str) -> Result<Value> {
        let out = self.ok(&["inspect", id])?;
        let v: Value = serde_json::from_str(&out)
            .map_err(|e| E2eError::io("parse docker inspect", std::io::Error::other(e)))?;
        Ok(v[0].clone())
    }

    /// The host pid of a container's process 1.
    pub fn pid(&self, id: &str) -> Result<u32> {
        self.ok(&["inspect", "--format", "{{.State.Pid}}", id])?
            .parse()
            .map_err(|e| E2eError::Unsupported(format!("docker inspect {id}: pid: {e}")))
    }

    /// What dockerd logged so far.
    pub fn log(&self) -> String {
        self.dockerd.as_ref().map(Daemon::log).unwrap_or_default()
    }

    /// What containerd logged so far.
    pub fn containerd_log(&self) -> String {
        self.containerd
            .as_ref()
            .map(Daemon::log)
            .unwrap_or_default()
    }

    /// Whether Docker's NRI logged that plugin `NN-name` was synchronized
    /// (external: "connected and synchronized", pre-installed:
    /// "synchronization success"; dockerd's log escapes the quotes).
    pub fn plugin_synchronized(&self, plugin: &str) -> bool {
        let log = self.log();
        log.contains(&format!("\\\"{plugin}\\\" connected and synchronized"))
            || log.contains(&format!("\\\"{plugin}\\\" synchronization success"))
    }

    /// Waits until Docker's NRI synchronized plugin `NN-name`.
    pub fn wait_plugin(&self, plugin: &str) -> Result<()> {
        wait_for(&format!("plugin {plugin} in Docker's NRI"), WAIT, || {
            self.plugin_synchronized(plugin).then_some(())
        })
    }

    /// Sends SIGHUP to dockerd (it reads `daemon.json` again and restarts
    /// its NRI) and waits until it logged the reload.
    pub fn reload(&self) -> Result<()> {
        let count = |log: &str| log.matches("Reloaded configuration").count();
        let before = count(&self.log());
        if let Some(d) = &self.dockerd {
            d.signal(rustix::process::Signal::HUP);
        }
        wait_for("dockerd to reload its configuration", WAIT, || {
            (count(&self.log()) > before).then_some(())
        })
    }

    /// Installs `program` as Docker's pre-installed plugin `NN-name`, with an
    /// optional drop-in configuration (`NN-name.conf`).
    pub fn install_plugin(&self, program: &Path, name: &str, config: Option<&str>) -> Result<()> {
        crate::cri::install_plugin(&self.plugin_dir, name, program)?;
        if let Some(text) = config {
            let path = self.plugin_config_dir.join(format!("{name}.conf"));
            fs::write(&path, text)
                .map_err(|e| E2eError::io(format!("write {}", path.display()), e))?;
        }
        Ok(())
    }

    /// The real runtime's view of a container (`runc state`, in Docker's
    /// runtime root).
    pub fn runc_state(&self, id: &str) -> Result<Value> {
        let runc = runc_dir()?.join("runc");
        let out = run(Command::new(runc)
            .arg("--root")
            .arg(self.exec_root.join("runtime-runc").join("moby"))
            .args(["state", id]))?;
        serde_json::from_slice(&out.stdout)
            .map_err(|e| E2eError::io("parse runc state", std::io::Error::other(e)))
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        if self.dockerd.is_some() {
            if let Ok(ids) = self.ok(&["ps", "-aq"]) {
                let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
                if !ids.is_empty() {
                    let mut args = vec!["rm", "-f"];
                    args.extend(ids);
                    let _ = self.cmd().args(&args).output();
                }
            }
        }
        if let Some(mut d) = self.dockerd.take() {
            d.stop(Duration::from_secs(30));
        }
        if let Some(mut d) = self.containerd.take() {
            d.stop(Duration::from_secs(15));
        }
        kill_processes_mentioning(&self.dir);
        unmount_below(&self.dir);
        remove_cgroups(&self.cgroup_parent);
        if self.made_run_docker {
            // Only if empty: another test's dockerd may have put a socket there.
            let _ = fs::remove_dir("/run/docker/plugins");
            let _ = fs::remove_dir("/run/docker");
        }
    }
}
