//! What every CRI runtime of the suites shares: the directory layout of a
//! test's runtime, the options it is started with, pods and containers to
//! run, and `crictl` to drive them as the kubelet does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::gobuild::{go, go_build_cached};
use crate::host::{kill_processes_mentioning, remove_cgroups, run, unmount_below};
use crate::{E2eError, Result};

/// The crictl release.
pub const CRICTL_VERSION: &str = "v1.37.0";

/// How long a CRI call may take before the test fails.
pub const CRI_TIMEOUT: Duration = Duration::from_secs(60);

/// A runtime of a test, driven through CRI.
pub trait CriRuntime {
    /// Name and version, e.g. `containerd v2.4.2`.
    fn describe(&self) -> String;
    /// The layout of its directories.
    fn layout(&self) -> &Layout;
    /// Its log (of the current run).
    fn log(&self) -> String;
    /// A `crictl` for it.
    fn crictl(&self) -> Crictl {
        Crictl::new(self.layout())
    }
    /// Whether the runtime's log says that plugin `NN-name` registered and was
    /// synchronized (containerd and CRI-O log it alike).
    fn plugin_synchronized(&self, plugin: &str) -> bool {
        let log = self.log();
        log.contains(&format!(
            "plugin \\\"{plugin}\\\" connected and synchronized"
        )) || log.contains(&format!("plugin \"{plugin}\" connected and synchronized"))
    }
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

/// How to configure a test's runtime.
#[derive(Debug, Clone)]
pub struct Options {
    /// Release to run; empty for the runtime's default.
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
            version: String::new(),
            registration_timeout: "5s".into(),
            request_timeout: "2s".into(),
            default_validator: None,
            plugins: Vec::new(),
            plugin_configs: Vec::new(),
        }
    }
}

/// The directory layout of one test's runtime.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Everything lives under this directory.
    pub dir: PathBuf,
    /// The runtime's CRI socket.
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
    /// The `crictl` binary.
    pub crictl: PathBuf,
}

impl Layout {
    /// Makes the layout under a new temporary directory (`prefix`...): the
    /// CRI socket `socket_name`, NRI socket, plugin and drop-in directories
    /// with `options`' plugins installed, logs, and crictl's configuration.
    pub fn create(
        prefix: &str,
        socket_name: &str,
        options: &Options,
    ) -> Result<(tempfile::TempDir, Layout)> {
        let crictl = crictl_binary()?;
        let mut tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(std::env::temp_dir())
            .map_err(|e| E2eError::io("create temp dir", e))?;
        if std::env::var_os("NRI_E2E_KEEP").is_some() {
            // For a look afterwards: logs, configuration, the runtime's state.
            tmp.disable_cleanup(true);
            eprintln!("e2e: keeping {}", tmp.path().display());
        }
        let dir = tmp.path().to_owned();
        let layout = Layout {
            socket: dir.join(socket_name),
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
            crictl,
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
        let endpoint = format!("unix://{}", layout.socket.display());
        fs::write(
            layout.dir.join("crictl.yaml"),
            format!(
                "runtime-endpoint: {endpoint}\nimage-endpoint: {endpoint}\ntimeout: {}\n",
                CRI_TIMEOUT.as_secs()
            ),
        )
        .map_err(|e| E2eError::io("write crictl.yaml", e))?;
        Ok((tmp, layout))
    }

    /// [`Layout::teardown`] of a runtime run by `daemon`, stopped with SIGTERM
    /// (SIGKILL after 30 s).
    pub fn stop_runtime(&self, daemon: Option<crate::host::Daemon>) {
        self.teardown(daemon.is_some(), || {
            if let Some(mut d) = daemon {
                d.stop(Duration::from_secs(30));
            }
        });
    }

    /// Tears a test's runtime down, pass or fail: removes every pod through
    /// CRI (while `running`), then `stop` stops the daemon; processes naming
    /// the directory (shims, monitors) are killed by pid, mounts below it
    /// unmounted and the cgroup parent removed.
    pub fn teardown(&self, running: bool, stop: impl FnOnce()) {
        if running {
            let crictl = Crictl::new(self);
            let _ = crictl.cmd(&["rmp", "-f", "-a"]).output();
        }
        stop();
        kill_processes_mentioning(&self.dir);
        unmount_below(&self.dir);
        remove_cgroups(&self.cgroup_parent);
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

pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| E2eError::io("bind a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| E2eError::io("read a free port", e))
}

/// A pod to run: name, namespace and annotations.
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

    fn uid(&self) -> String {
        format!("uid-{}", self.name)
    }

    /// The labels the kubelet gives a pod (and, with the container name, each
    /// of its containers). CRI-O takes the name of a container it reports to
    /// NRI plugins from `io.kubernetes.container.name`.
    fn kubelet_labels(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            ("io.kubernetes.pod.name", self.name.clone()),
            ("io.kubernetes.pod.namespace", self.namespace.clone()),
            ("io.kubernetes.pod.uid", self.uid()),
        ])
    }

    fn config(&self, layout: &Layout) -> Value {
        json!({
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "uid": self.uid(), "attempt": 0},
            "labels": self.kubelet_labels(),
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

    fn config(&self, pod: &PodSpec) -> Value {
        let mut labels = pod.kubelet_labels();
        labels.insert("io.kubernetes.container.name", self.name.clone());
        let envs: Vec<Value> = self
            .env
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        json!({
            "metadata": {"name": self.name},
            "labels": labels,
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

pub fn image_name(name: &str) -> String {
    format!("docker.io/nri-e2e/{name}:1")
}

/// `crictl` talking to one test's runtime.
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
    /// A `crictl` for the runtime of `layout`.
    pub fn new(layout: &Layout) -> Crictl {
        Crictl {
            bin: layout.crictl.clone(),
            config: layout.dir.join("crictl.yaml"),
            layout: layout.clone(),
        }
    }

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
                &ctr.config(pod),
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
        crate::host::cgroup_v1_file(self.pid(id)?, controller, file)
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

/// Starts a runtime daemon (`name`: for messages) and waits until it answers
/// CRI on the socket of `layout`; fails with its log if it exits first.
pub fn start_daemon(
    name: &str,
    program: &Path,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
    log: &Path,
    layout: &Layout,
) -> Result<crate::host::Daemon> {
    let mut daemon = crate::host::Daemon::spawn(name, program, args, env, log)?;
    let crictl = Crictl::new(layout);
    let result = crate::host::wait_for(&format!("{name} to answer CRI"), CRI_TIMEOUT, || {
        if !daemon.is_running() {
            return Some(false);
        }
        crictl
            .cmd(&["version"])
            .output()
            .ok()?
            .status
            .success()
            .then_some(true)
    });
    match result {
        Ok(true) => Ok(daemon),
        Ok(false) => Err(E2eError::Command {
            command: name.to_owned(),
            status: "exited".into(),
            output: daemon.log(),
        }),
        Err(e) => Err(E2eError::Command {
            command: name.to_owned(),
            status: e.to_string(),
            output: daemon.log(),
        }),
    }
}
