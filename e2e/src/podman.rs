//! podman with NRI through `nri-runc` and `nri-hostd`, everything private to
//! a test directory: podman's root, run root, temporary directory,
//! `containers.conf` and `storage.conf`; the daemon's control socket, NRI
//! socket, plugin directories and state file; the wrapper's configuration.
//! Nothing of the host's podman or NRI set-up is touched.
//!
//! ```no_run
//! use nri_e2e::podman::{Hostd, Podman};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let hostd = Hostd::start(dir.path(), "").unwrap();
//! let podman = Podman::with_busybox(dir.path()).unwrap();
//! let out = podman.run(&["--rm", Podman::BUSYBOX, "true"]);
//! assert!(out.status.success());
//! # drop(hostd);
//! ```

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::host::{run, wait_for, Daemon};
use crate::workspace::{build_bins, build_static_bin};
use crate::{image, E2eError, Result};

/// Debian packages the podman suite installs.
pub const PACKAGES: &[&str] = &["podman", "runc"];

/// How long the daemon may take to come up or a plugin to register.
pub const WAIT: Duration = Duration::from_secs(30);

/// `nri-hostd` and `nri-runc`, built once per test process.
pub fn binaries() -> Result<(PathBuf, PathBuf)> {
    static BUILT: OnceLock<std::result::Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let hostd = build_bins(&["nri-hostd"]).map_err(|e| e.to_string())?;
            // Linked statically, as the README advises: an engine runs it for
            // every command, and dynamic loading costs about half a millisecond.
            let runc = build_static_bin("nri-runc", "nri-runc").map_err(|e| e.to_string())?;
            Ok((hostd[0].clone(), runc))
        })
        .clone()
        .map_err(|e| E2eError::Unsupported(format!("building nri-hostd and nri-runc failed: {e}")))
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| E2eError::io(format!("write {}", path.display()), e))
}

fn mkdir(path: &Path) -> Result<()> {
    fs::create_dir_all(path).map_err(|e| E2eError::io(format!("create {}", path.display()), e))
}

/// podman's private directories under `base` (`tmp/`; `root/` and
/// `runroot/` as `storage.conf` names them) and its `containers.conf`:
/// `containers` (TOML tables placed first), then cgroupfs, events in a
/// file and runc as the default runtime.
pub fn write_private_config(base: &Path, containers: &str) -> Result<()> {
    mkdir(&base.join("tmp"))?;
    write(
        &base.join("containers.conf"),
        &format!(
            "{containers}[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
             runtime = \"runc\"\n"
        ),
    )?;
    write(
        &base.join("storage.conf"),
        &format!(
            "[storage]\ndriver = \"overlay\"\nrunroot = {:?}\ngraphroot = {:?}\n",
            base.join("runroot"),
            base.join("root")
        ),
    )
}

/// An OCI bundle `<dir>/bundle` of the busybox image (`umoci unpack`), its
/// process `args`, without a terminal: for driving a runtime directly.
pub fn busybox_bundle(dir: &Path, args: &[&str]) -> Result<PathBuf> {
    let bundle = dir.join("bundle");
    let archive = image::busybox()?;
    let layout = format!("{}:b", dir.join("layout").display());
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("docker-archive:{}", archive.path.display()),
        &format!("oci:{layout}"),
    ]))?;
    run(Command::new("umoci")
        .args(["unpack", "--image", &layout])
        .arg(&bundle))?;
    let config = bundle.join("config.json");
    let text = fs::read(&config).map_err(|e| E2eError::io("read config.json", e))?;
    let mut spec: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| E2eError::Unsupported(format!("umoci wrote a bad config.json: {e}")))?;
    spec["process"]["args"] = serde_json::json!(args);
    spec["process"]["terminal"] = false.into();
    let text = serde_json::to_vec_pretty(&spec)
        .map_err(|e| E2eError::Unsupported(format!("config.json: {e}")))?;
    fs::write(&config, text).map_err(|e| E2eError::io("write config.json", e))?;
    Ok(bundle)
}

/// A running `nri-hostd` with its paths under `<dir>/hostd`.
#[derive(Debug)]
pub struct Hostd {
    /// The process, once started.
    pub daemon: Option<Daemon>,
    /// How often it was started.
    starts: u32,
    /// Its log filter (`NRI_HOSTD_LOG`): `debug`, unless changed.
    pub log_filter: String,
    /// Its configuration file.
    pub config: PathBuf,
    /// The control socket.
    pub control_socket: PathBuf,
    /// The NRI socket external plugins connect to.
    pub nri_socket: PathBuf,
    /// The pre-installed plugin directory.
    pub plugin_dir: PathBuf,
    /// Their configuration directory.
    pub plugin_config_dir: PathBuf,
    /// The state file.
    pub state_file: PathBuf,
}

impl Hostd {
    /// The paths of a daemon under `dir`, its configuration written with
    /// `extra` TOML appended (top-level NRI keys, e.g. a
    /// `[default_validator]` table); not started.
    pub fn configure(dir: &Path, extra: &str) -> Result<Hostd> {
        let base = dir.join("hostd");
        let plugin_dir = base.join("plugins");
        let plugin_config_dir = base.join("conf.d");
        mkdir(&plugin_dir)?;
        mkdir(&plugin_config_dir)?;
        let control_socket = base.join("control.sock");
        let nri_socket = base.join("nri.sock");
        let state_file = base.join("state/state.json");
        let config = base.join("nri-hostd.toml");
        write(
            &config,
            &format!(
                "socket_path = {nri:?}\nplugin_path = {pp:?}\nplugin_config_path = {pc:?}\n\
                 plugin_request_timeout = \"5s\"\n{extra}\n\
                 [hostd]\ncontrol_socket = {cs:?}\nstate_file = {sf:?}\nexit_poll_interval = \"500ms\"\n",
                nri = nri_socket,
                pp = plugin_dir,
                pc = plugin_config_dir,
                cs = control_socket,
                sf = state_file,
            ),
        )?;
        Ok(Hostd {
            daemon: None,
            starts: 0,
            log_filter: "debug".into(),
            config,
            control_socket,
            nri_socket,
            plugin_dir,
            plugin_config_dir,
            state_file,
        })
    }

    /// Configures (see [`configure`](Self::configure)) and starts a daemon,
    /// waiting for its control socket.
    pub fn start(dir: &Path, extra: &str) -> Result<Hostd> {
        let mut hostd = Self::configure(dir, extra)?;
        hostd.restart()?;
        Ok(hostd)
    }

    /// Starts the daemon (again), after stopping a running one; the log of
    /// the n-th start is `<dir>/hostd/hostd.<n>.log`.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        let _ = fs::remove_file(&self.control_socket);
        let (bin, _) = binaries()?;
        self.starts += 1;
        let config = self.config.to_string_lossy().into_owned();
        self.daemon = Some(Daemon::spawn(
            "nri-hostd",
            &bin,
            &["--config", &config],
            &[("NRI_HOSTD_LOG", self.log_filter.as_ref())],
            &self
                .config
                .with_file_name(format!("hostd.{}.log", self.starts)),
        )?);
        let socket = self.control_socket.clone();
        wait_for("the nri-hostd control socket", WAIT, || {
            socket.exists().then_some(())
        })
    }

    /// The logger sample, external, registered as `10-logger` with this
    /// daemon: it adds the variable `NRI_LOGGER` and the annotation
    /// `logger.nri-rs.dev/seen` (both `logger-pid-<pid>`) to new containers
    /// and logs its events to `<dir>/logger.events`. The process and the
    /// log's path.
    pub fn start_logger(&self, dir: &Path) -> Result<(Daemon, PathBuf)> {
        let log = dir.join("logger.events");
        let socket = self.nri_socket.to_string_lossy().into_owned();
        let l = log.to_string_lossy().into_owned();
        let args = [
            "-idx",
            "10",
            "-name",
            "logger",
            "-socket-path",
            &socket,
            "-add-env",
            "NRI_LOGGER",
            "-add-annotation",
            "logger.nri-rs.dev/seen",
            "-log-file",
            &l,
        ];
        let process = crate::plugins::start_external(
            "logger",
            &crate::plugins::bin("nri-logger")?,
            &args,
            dir,
        )?;
        self.wait_registered("10-logger")?;
        Ok((process, log))
    }

    /// Stops the daemon (SIGTERM), if it runs.
    pub fn stop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.stop(Duration::from_secs(10));
        }
    }

    /// Kills the daemon at once (SIGKILL), as a crash would.
    pub fn crash(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.crash();
        }
    }

    /// What the running daemon logged so far.
    pub fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }

    /// Waits until plugin `name` (`NN-name`) has registered.
    pub fn wait_registered(&self, name: &str) -> Result<()> {
        let needle = format!("plugin registered plugin={name}");
        wait_for(&format!("plugin {name} to register"), WAIT, || {
            self.log().contains(&needle).then_some(())
        })
    }

    /// Makes the next start serve `/metrics` on an ephemeral loopback port
    /// (`metrics_address` in `[hostd]`, the last table of the file).
    pub fn enable_metrics(&self) -> Result<()> {
        let text = fs::read_to_string(&self.config)
            .map_err(|e| E2eError::io(format!("read {}", self.config.display()), e))?;
        write(
            &self.config,
            &format!("{text}metrics_address = \"127.0.0.1:0\"\n"),
        )
    }

    /// The `/metrics` text of the running daemon: the address is the one
    /// it announced at start (the port is ephemeral).
    pub fn metrics(&self) -> Result<String> {
        let log = self.log();
        let addr = log
            .split("metrics on http://")
            .nth(1)
            .and_then(|rest| rest.split("/metrics").next())
            .ok_or_else(|| E2eError::Unsupported("the daemon announced no metrics address".into()))?
            .to_string();
        let mut conn = std::net::TcpStream::connect(&addr)
            .map_err(|e| E2eError::io(format!("connect to {addr}"), e))?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .map_err(|e| E2eError::io("send the metrics request", e))?;
        let mut reply = String::new();
        conn.read_to_string(&mut reply)
            .map_err(|e| E2eError::io("read the metrics reply", e))?;
        match reply.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
            _ => Err(E2eError::Unsupported(format!("bad metrics reply: {reply}"))),
        }
    }

    /// Installs workspace binary `program` as pre-installed plugin
    /// `NN-name`, with an optional drop-in configuration.
    pub fn install_plugin(&self, program: &Path, name: &str, config: Option<&str>) -> Result<()> {
        let target = self.plugin_dir.join(name);
        fs::copy(program, &target)
            .map_err(|e| E2eError::io(format!("install {}", target.display()), e))?;
        if let Some(text) = config {
            write(&self.plugin_config_dir.join(format!("{name}.conf")), text)?;
        }
        Ok(())
    }
}

/// podman with its own storage and configuration under `<dir>/podman`,
/// running containers through `nri-runc`.
#[derive(Debug)]
pub struct Podman {
    base: PathBuf,
    /// The wrapper podman runs (a link to `nri-runc` with its own
    /// `nri-runc.toml` next to it).
    pub runtime: PathBuf,
}

impl Podman {
    /// The busybox image's name (see [`image::busybox`]).
    pub const BUSYBOX: &'static str = "docker.io/nri-e2e/busybox:1";

    /// podman under `dir`, its wrapper talking to the daemon configured
    /// under `dir` ([`Hostd::configure`]) with the default policy.
    pub fn new(dir: &Path) -> Result<Podman> {
        let base = dir.join("podman");
        write_private_config(
            &base,
            "[containers]\n\
             default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n",
        )?;
        let podman = Podman {
            runtime: base.join("nri-runc"),
            base,
        };
        podman.wrapper(
            "nri-runc",
            &format!("control_socket = {:?}\n", dir.join("hostd/control.sock")),
        )?;
        Ok(podman)
    }

    /// Adds a wrapper `name` (a link to `nri-runc`) with configuration
    /// `toml`; returns its path, for `--runtime`.
    pub fn wrapper(&self, name: &str, toml: &str) -> Result<PathBuf> {
        let (_, bin) = binaries()?;
        let link = self.base.join(name);
        let _ = fs::remove_file(&link);
        symlink(&bin, &link).map_err(|e| E2eError::io(format!("link {}", link.display()), e))?;
        write(&self.base.join(format!("{name}.toml")), toml)?;
        Ok(link)
    }

    /// A podman command with the private storage and configuration.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.arg("--root")
            .arg(self.base.join("root"))
            .arg("--runroot")
            .arg(self.base.join("runroot"))
            .arg("--tmpdir")
            .arg(self.base.join("tmp"))
            .env("CONTAINERS_CONF", self.base.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.base.join("storage.conf"))
            .stdin(Stdio::null());
        cmd
    }

    /// [`new`](Self::new), with the busybox image loaded.
    pub fn with_busybox(dir: &Path) -> Result<Podman> {
        let podman = Self::new(dir)?;
        podman.load_busybox()?;
        Ok(podman)
    }

    /// `podman run -d ARGS` through the wrapper, which must succeed; the
    /// container's id.
    pub fn run_detached(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.cmd();
        cmd.args(["run", "-d", "--runtime"])
            .arg(&self.runtime)
            .args(args);
        let out = run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Loads the busybox image archive.
    pub fn load_busybox(&self) -> Result<()> {
        let archive = image::busybox()?;
        run(self
            .cmd()
            .arg("load")
            .arg("-q")
            .arg("-i")
            .arg(&archive.path))
        .map(|_| ())
    }

    /// `podman run --runtime <wrapper> ARGS` (pass or fail: the output).
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(&self.runtime, args)
    }

    /// `podman run --runtime RUNTIME ARGS`.
    pub fn run_with(&self, runtime: &Path, args: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.arg("run").arg("--runtime").arg(runtime).args(args);
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run podman: {e}"))
    }

    /// `podman ARGS`, which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> Result<String> {
        let out = run(self.cmd().args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// A file of a running container, read with `podman exec ... cat`.
    pub fn cat(&self, id: &str, path: &str) -> Result<String> {
        self.ok(&["exec", id, "cat", path])
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Containers still running would keep the storage busy.
        let _ = self.cmd().args(["rm", "-af", "-t", "0"]).output();
        let _ = self
            .cmd()
            .args(["system", "reset", "-f"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
