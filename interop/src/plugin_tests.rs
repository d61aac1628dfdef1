//! Test support for the sample plugins (`plugins/*`): runs a plugin binary as an
//! external plugin of the Go reference runtime (`nri-ref-runtime`) or of our
//! runtime side (`nri-adaptation`), on a socket in a test's temporary directory,
//! and reads what happened.
//!
//! Everything here is for tests: failures panic, with the plugin's log (its
//! standard error, kept in `<dir>/<name>.stderr`) in the message.
//!
//! Two calling styles are offered, each used by a family of plugin tests:
//!
//! * string arguments with the socket flag added in front:
//!   [`run_with_go_runtime`], [`run_with_our_runtime`], [`PluginProcess::spawn`]
//!   (which also sets `RUST_LOG=debug`), fixtures [`pod`] and [`container`];
//! * arguments built from the socket path by the test, plus extra environment:
//!   [`run_on_go_runtime`], [`OurRuntime::start`], [`os_args`], fixtures
//!   [`annotated_pod`] and [`created_container`].
//!
//! Both use [`annotations`], [`run_pod_and_create`] (a pod and a container in it,
//! through our adaptation) and [`pre_install`] (a plugin the Go runtime starts
//! itself, with its drop-in configuration).
//!
//! ```no_run
//! use nri_interop::plugin_tests::{run_with_go_runtime, step};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let scenario = json!({
//!     "pods": [{"id": "pod0", "name": "pod0"}],
//!     "steps": [{"op": "RunPodSandbox", "pod": "pod0"}]
//! });
//! let (out, log) = run_with_go_runtime(dir.path(), &scenario, "nri-template", &["-idx", "10"]);
//! let (_result, error) = step(&out, "RunPodSandbox");
//! assert_eq!(error, "", "{log}");
//! ```

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::{
    Container, ContainerState, CreateContainerRequest, CreateContainerResponse, PodSandbox,
    RunPodSandboxRequest,
};
use serde_json::{json, Value};

use crate::{wait_for_path, write_json, RefRuntime, RuntimeOutput};

/// Upper bound for anything a test waits for; nothing should come close.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// How long a plugin gets to exit after its runtime went away.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Name of the socket, in the test's directory, that the runtimes listen on.
const SOCKET_NAME: &str = "nri.sock";

/// A plugin process, killed when dropped.
#[derive(Debug)]
pub struct PluginProcess {
    child: Child,
    stderr_path: PathBuf,
}

impl PluginProcess {
    /// Starts `bin` with `args` and `RUST_LOG=debug`, standard error (its log) to
    /// `dir/<name>.stderr`.
    pub fn spawn(bin: &str, args: &[&str], dir: &Path, name: &str) -> PluginProcess {
        PluginProcess::spawn_env(
            Path::new(bin),
            args,
            &[("RUST_LOG", OsStr::new("debug"))],
            dir,
            name,
        )
    }

    /// Starts `bin` with `args` and, on top of the test's own environment,
    /// `env`; standard error to `dir/<name>.stderr`.
    pub fn spawn_env<S: AsRef<OsStr>>(
        bin: &Path,
        args: &[S],
        env: &[(&str, &OsStr)],
        dir: &Path,
        name: &str,
    ) -> PluginProcess {
        let stderr_path = dir.join(format!("{name}.stderr"));
        let stderr = File::create(&stderr_path)
            .unwrap_or_else(|e| panic!("create {}: {e}", stderr_path.display()));
        let child = Command::new(bin)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        PluginProcess { child, stderr_path }
    }

    /// The plugin's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits until the plugin exited, at most `timeout`; true if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// `[-flag, value, ...]` as OS strings.
///
/// ```
/// use std::path::Path;
/// let args = nri_interop::plugin_tests::os_args(&[&"-idx", &"10", &Path::new("/s")]);
/// assert_eq!(args, ["-idx", "10", "/s"]);
/// ```
pub fn os_args(args: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

/// `-socket <socket>` followed by `args`.
fn socket_first(socket: &Path, args: &[&str]) -> Vec<OsString> {
    let mut all = os_args(&[&"-socket", &socket, &"-no-reconnect"]);
    all.extend(args.iter().map(OsString::from));
    all
}

fn os_env<'a>(env: &'a [(&'a str, &'a Path)]) -> Vec<(&'a str, &'a OsStr)> {
    env.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// Starts the Go runtime on `scenario`, listening on `dir/nri.sock`, and waits
/// until the socket is there. Returns the runtime and the socket path.
pub fn spawn_go_runtime(dir: &Path, scenario: &Value) -> (RefRuntime, PathBuf) {
    let socket = dir.join(SOCKET_NAME);
    let scenario = write_json(dir, "scenario.json", scenario).expect("write scenario");
    let runtime = RefRuntime::spawn(
        "nri-ref-runtime",
        &scenario,
        ["-socket".as_ref(), socket.as_os_str()],
    )
    .expect("start nri-ref-runtime");
    wait_for_path(&socket, TIMEOUT).expect("runtime socket");
    (runtime, socket)
}

/// Runs `scenario` on the Go runtime with the plugin `bin` connected as an
/// external plugin, started with `-socket <socket> -no-reconnect` (so that it
/// exits with the runtime, as these runs expect), then `args`, and
/// `RUST_LOG=debug`. Returns the runtime's output and the plugin's log; panics
/// if the runtime failed.
pub fn run_with_go_runtime(
    dir: &Path,
    scenario: &Value,
    bin: &str,
    args: &[&str],
) -> (RuntimeOutput, String) {
    go_run(dir, scenario, |socket| {
        PluginProcess::spawn_env(
            Path::new(bin),
            &socket_first(socket, args),
            &[("RUST_LOG", OsStr::new("debug"))],
            dir,
            "plugin",
        )
    })
}

/// Runs `scenario` on the Go runtime with the plugin `bin` connected to it;
/// `args(socket)` gives the plugin's arguments and `env` extra environment
/// variables. Returns the runtime's output and the plugin's log; panics if the
/// runtime failed.
pub fn run_on_go_runtime(
    dir: &Path,
    scenario: &Value,
    bin: &Path,
    args: impl FnOnce(&Path) -> Vec<OsString>,
    env: &[(&str, &Path)],
) -> (RuntimeOutput, String) {
    go_run(dir, scenario, |socket| {
        PluginProcess::spawn_env(bin, &args(socket), &os_env(env), dir, "plugin")
    })
}

/// The Go runtime on `scenario` with the plugin `start(socket)` started, until
/// the runtime finished and the plugin exited (or its grace time is over).
fn go_run(
    dir: &Path,
    scenario: &Value,
    start: impl FnOnce(&Path) -> PluginProcess,
) -> (RuntimeOutput, String) {
    let (runtime, socket) = spawn_go_runtime(dir, scenario);
    let mut plugin = start(&socket);
    let out = runtime.finish(TIMEOUT).expect("nri-ref-runtime");
    plugin.wait_exit(EXIT_GRACE);
    let log = plugin.log();
    assert!(
        out.status.success(),
        "runtime failed: {}\nplugin log:\n{log}",
        out.stderr
    );
    (out, log)
}

/// Installs `bin` as the pre-installed plugin `full_name` (`NN-name`) of a Go
/// runtime run in `dir`: a link `dir/plugins/<full_name>`, and `conf` as its
/// configuration `dir/conf.d/<full_name>.conf`. Returns the runtime's arguments
/// for them: `-plugin-dir <dir/plugins> -plugin-config-dir <dir/conf.d>`.
pub fn pre_install(dir: &Path, bin: &str, full_name: &str, conf: &str) -> Vec<OsString> {
    let plugins = dir.join("plugins");
    let conf_dir = dir.join("conf.d");
    for d in [&plugins, &conf_dir] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    }
    std::os::unix::fs::symlink(bin, plugins.join(full_name)).expect("link the plugin");
    let conf_file = conf_dir.join(format!("{full_name}.conf"));
    std::fs::write(&conf_file, conf)
        .unwrap_or_else(|e| panic!("write {}: {e}", conf_file.display()));
    os_args(&[&"-plugin-dir", &plugins, &"-plugin-config-dir", &conf_dir])
}

/// The result of the first step `op` of a Go runtime run, with its error text
/// (empty if none).
pub fn step<'a>(out: &'a RuntimeOutput, op: &str) -> (&'a Value, &'a str) {
    let s = out
        .step(op)
        .unwrap_or_else(|| panic!("no step {op} in {:#}", out.json));
    (&s["result"], s["error"].as_str().unwrap_or(""))
}

/// The requests (no notifications) of a container's life in a pod, for
/// [`pod0_steps`]: the pod started, the container created, started, updated,
/// stopped and removed, then the pod stopped and removed.
pub const POD0_REQUESTS: [&str; 8] = [
    "RunPodSandbox",
    "CreateContainer",
    "StartContainer",
    "UpdateContainer",
    "StopContainer",
    "RemoveContainer",
    "StopPodSandbox",
    "RemovePodSandbox",
];

/// The steps of a Go runtime scenario in which pod `pod0` and its container
/// `ctr0` go through `events`: a wait (up to 30 s) for one plugin, one step
/// per event, on `pod0` or on `ctr0`, then `stop`. `UpdatePodSandbox` asks
/// for empty resources, `UpdateContainer` for `update` (e.g. [`cpu_shares`]).
pub fn pod0_steps(events: &[&str], update: Value) -> Value {
    let mut steps = vec![json!({"op": "wait_plugins", "count": 1, "timeout_ms": 30000})];
    steps.extend(events.iter().map(|&op| match op {
        "UpdatePodSandbox" => json!({"op": op, "pod": "pod0",
                                     "linux_resources": {}, "overhead_linux_resources": {}}),
        "UpdateContainer" => json!({"op": op, "container": "ctr0", "linux_resources": update}),
        _ if op.ends_with("PodSandbox") => json!({"op": op, "pod": "pod0"}),
        _ => json!({"op": op, "container": "ctr0"}),
    }));
    steps.push(json!({"op": "stop"}));
    Value::Array(steps)
}

/// Linux resources with only the CPU shares set.
pub fn cpu_shares(shares: u64) -> Value {
    json!({"cpu": {"shares": {"value": shares}}})
}

/// A runtime with no pods or containers that accepts every update.
struct NoState;

#[nri_adaptation::async_trait]
impl RuntimeHooks for NoState {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        sync.synchronize(&[], &[]).await?;
        Ok(())
    }
}

/// Starts our adaptation, with no pods or containers, listening on
/// `dir/nri.sock` (plugin and configuration directories `dir/plugins`,
/// `dir/conf.d`).
pub async fn start_adaptation(dir: &Path) -> Adaptation {
    start_adaptation_with(dir, None).await
}

async fn start_adaptation_with(dir: &Path, request_timeout: Option<Duration>) -> Adaptation {
    start_adaptation_as(dir, "nri-rs-test", "v0.1.0", request_timeout).await
}

/// [`start_adaptation`] with the runtime name and version it sends plugins at
/// Configure (e.g. `docker`, to see how a plugin adapts to what Docker applies).
pub async fn start_adaptation_named(dir: &Path, name: &str, version: &str) -> Adaptation {
    start_adaptation_as(dir, name, version, None).await
}

async fn start_adaptation_as(
    dir: &Path,
    name: &str,
    version: &str,
    request_timeout: Option<Duration>,
) -> Adaptation {
    let mut builder = Adaptation::builder(name, version, Arc::new(NoState))
        .plugin_path(dir.join("plugins"))
        .plugin_config_path(dir.join("conf.d"))
        .socket_path(dir.join(SOCKET_NAME));
    if let Some(timeout) = request_timeout {
        builder = builder.request_timeout(timeout);
    }
    let nri = builder.build();
    tokio::time::timeout(TIMEOUT, nri.start())
        .await
        .expect("adaptation start timed out")
        .expect("adaptation start");
    nri
}

/// The plugins registered with `nri`, as `NN-name`, in order.
pub fn plugin_names(nri: &Adaptation) -> Vec<String> {
    nri.plugins()
        .iter()
        .map(|p| format!("{}-{}", p.index, p.name))
        .collect()
}

/// Waits until the adaptation lists exactly the plugins `names` (`NN-name`, in
/// order); panics with `plugin`'s log after [`TIMEOUT`].
pub async fn wait_plugins(nri: &Adaptation, names: &[&str], plugin: &PluginProcess) {
    wait_registered(nri, plugin, &format!("{names:?}"), |have| have == names).await;
}

async fn wait_registered(
    nri: &Adaptation,
    plugin: &PluginProcess,
    expected: &str,
    done: impl Fn(&[String]) -> bool,
) {
    let start = Instant::now();
    loop {
        let have = plugin_names(nri);
        if done(&have) {
            return;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "plugins {have:?}, expected {expected}; plugin log:\n{}",
            plugin.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts our adaptation in `dir` (see [`start_adaptation`]) and the plugin
/// `bin` with `-socket <socket>`, then `args`, and `RUST_LOG=debug`; waits until
/// it registered as `full_name`.
pub async fn run_with_our_runtime(
    dir: &Path,
    bin: &str,
    args: &[&str],
    full_name: &str,
) -> (Adaptation, PluginProcess) {
    run_with_runtime_named(dir, "nri-rs-test", bin, args, full_name).await
}

/// [`run_with_our_runtime`], our runtime calling itself `runtime_name` (version
/// `29.2.0`) at Configure.
pub async fn run_with_runtime_named(
    dir: &Path,
    runtime_name: &str,
    bin: &str,
    args: &[&str],
    full_name: &str,
) -> (Adaptation, PluginProcess) {
    let version = if runtime_name == "nri-rs-test" {
        "v0.1.0"
    } else {
        "29.2.0"
    };
    let nri = start_adaptation_named(dir, runtime_name, version).await;
    let socket = dir.join(SOCKET_NAME);
    let plugin = PluginProcess::spawn_env(
        Path::new(bin),
        &socket_first(&socket, args),
        &[("RUST_LOG", OsStr::new("debug"))],
        dir,
        "plugin",
    );
    wait_plugins(&nri, &[full_name], &plugin).await;
    (nri, plugin)
}

/// Through `nri`: RunPodSandbox of `pod`, then CreateContainer of `ctr` in it.
/// Returns the reply to CreateContainer.
pub async fn run_pod_and_create(
    nri: &Adaptation,
    pod: &PodSandbox,
    ctr: &Container,
) -> CreateContainerResponse {
    let pod = Some(pod.clone());
    nri.run_pod_sandbox(RunPodSandboxRequest { pod: pod.clone() })
        .await
        .expect("RunPodSandbox");
    nri.create_container(CreateContainerRequest {
        pod,
        container: Some(ctr.clone()),
    })
    .await
    .expect("CreateContainer")
}

/// Our adaptation with one plugin connected; the plugin is killed when dropped.
pub struct OurRuntime {
    /// The adaptation, to send requests through.
    pub nri: Adaptation,
    /// The plugin process.
    pub plugin: PluginProcess,
}

impl OurRuntime {
    /// Starts the adaptation in `dir` (see [`start_adaptation`]; requests time
    /// out after 10 s), then the plugin `bin` with `args(socket)` and the extra
    /// environment `env`, and waits until the plugin is registered and
    /// synchronized.
    pub async fn start(
        dir: &Path,
        bin: &Path,
        args: impl FnOnce(&Path) -> Vec<OsString>,
        env: &[(&str, &Path)],
    ) -> OurRuntime {
        let nri = start_adaptation_with(dir, Some(Duration::from_secs(10))).await;
        let socket = dir.join(SOCKET_NAME);
        let plugin = PluginProcess::spawn_env(bin, &args(&socket), &os_env(env), dir, "plugin");
        wait_registered(&nri, &plugin, "a plugin", |have| !have.is_empty()).await;
        OurRuntime { nri, plugin }
    }

    /// The registered plugins as `NN-name`.
    pub fn plugin_names(&self) -> Vec<String> {
        plugin_names(&self.nri)
    }

    /// Stops the adaptation and returns the plugin's log.
    pub async fn stop(self) -> String {
        tokio::time::timeout(TIMEOUT, self.nri.stop())
            .await
            .expect("adaptation stop timed out");
        self.plugin.log()
    }
}

/// `(key, value)` pairs as the annotations of a pod or container.
///
/// ```
/// let a = nri_interop::plugin_tests::annotations(&[("k", "v")]);
/// assert_eq!(a["k"], "v");
/// ```
pub fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A pod in namespace `default`, with uid `uid-<id>` and these annotations.
pub fn pod(id: &str, name: &str, annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: name.into(),
        uid: format!("uid-{id}"),
        namespace: "default".into(),
        annotations: self::annotations(annotations),
        ..Default::default()
    }
}

/// A container of `pod`, named as its id.
pub fn container(id: &str, pod: &PodSandbox) -> Container {
    Container {
        id: id.into(),
        name: id.into(),
        pod_sandbox_id: pod.id.clone(),
        ..Default::default()
    }
}

/// A pod named `<id>-name` in namespace `default`, without uid, with these
/// annotations.
pub fn annotated_pod(id: &str, annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        uid: String::new(),
        ..pod(id, &format!("{id}-name"), annotations)
    }
}

/// A created container `name` (its id too) of the pod `pod_id`, with
/// arguments `args`.
pub fn created_container(pod_id: &str, name: &str, args: &[&str]) -> Container {
    Container {
        id: name.into(),
        name: name.into(),
        pod_sandbox_id: pod_id.into(),
        state: ContainerState::ContainerCreated as i32,
        args: args.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_flag_comes_first() {
        assert_eq!(
            socket_first(Path::new("/s/nri.sock"), &["-idx", "10"]),
            ["-socket", "/s/nri.sock", "-no-reconnect", "-idx", "10"]
        );
    }

    #[test]
    fn fixtures_of_both_styles() {
        let p = pod("p0", "web", &[("a", "b")]);
        assert_eq!(
            (p.uid.as_str(), p.namespace.as_str()),
            ("uid-p0", "default")
        );
        assert_eq!(p.annotations.get("a").map(String::as_str), Some("b"));
        let c = container("c0", &p);
        assert_eq!((c.name.as_str(), c.pod_sandbox_id.as_str()), ("c0", "p0"));
        assert_eq!(c.state, 0);

        let p = annotated_pod("p1", &[]);
        assert_eq!((p.name.as_str(), p.uid.as_str()), ("p1-name", ""));
        let c = created_container("p1", "db", &["pause"]);
        assert_eq!((c.id.as_str(), c.pod_sandbox_id.as_str()), ("db", "p1"));
        assert_eq!(c.state, 1);
        assert_eq!(c.args, ["pause"]);
    }

    #[test]
    fn plugin_process_keeps_its_log_and_is_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PluginProcess::spawn_env(
            Path::new("/bin/sh"),
            &["-c", "echo \"log $RUST_LOG $EXTRA\" >&2"],
            &[
                ("RUST_LOG", OsStr::new("debug")),
                ("EXTRA", OsStr::new("x")),
            ],
            dir.path(),
            "sh",
        );
        assert!(p.wait_exit(TIMEOUT));
        assert_eq!(p.log(), "log debug x\n");
        assert!(dir.path().join("sh.stderr").exists());
    }

    #[test]
    fn dropping_kills_a_running_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PluginProcess::spawn(
            "/bin/sh",
            &["-c", "echo started >&2; exec sleep 600"],
            dir.path(),
            "sleeper",
        );
        assert!(!p.wait_exit(Duration::from_millis(50)));
        let pid = p.child.id();
        drop(p);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} still there"
        );
    }
}
