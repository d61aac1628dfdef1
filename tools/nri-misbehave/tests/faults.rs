//! Fault injection against `nri-adaptation`: one misbehaving plugin at a
//! time, with healthy nri-stub plugins alongside.
//!
//! For every fault the runtime side must stay live (each runtime call,
//! including the plugin-sync block a runtime takes around it, returns
//! within the request timeout plus a margin), must not panic, must keep
//! serving the healthy plugins (a later CreateContainer reaches them and
//! carries their adjustments), must not lose state (a plugin connecting
//! afterwards is synchronized with every pod and container the runtime
//! reports), and must name the bad plugin in a warning or error where it
//! knows the name.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nri_adaptation::{Adaptation, AdaptationBuilder, BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;
use nri_misbehave::{Fault, FaultKind, Misbehave, Outcome, Target};
use nri_stub::{Context, CreateContainerResult, Plugin};
use tokio::task::JoinHandle;

/// Request timeout of the adaptation under test.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(800);
/// Registration timeout of the adaptation under test.
const REGISTRATION_TIMEOUT: Duration = Duration::from_millis(800);
/// Liveness slack on top of a timeout (a loaded 2-core machine).
const MARGIN: Duration = Duration::from_secs(3);
/// Bound on waits for things that must happen, so bugs fail, not hang.
const WAIT: Duration = Duration::from_secs(20);
/// Index and names of the healthy plugins.
const HEALTHY: [(&str, &str); 2] = [("05", "alpha"), ("90", "omega")];

// ---------------------------------------------------------------------------
// Log capture

/// Everything logged by the process (all tests share it; bad plugins have
/// names unique to their test).
#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuf {
    type Writer = LogBuf;
    fn make_writer(&'a self) -> LogBuf {
        self.clone()
    }
}

fn logs() -> &'static LogBuf {
    static LOGS: OnceLock<LogBuf> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = LogBuf::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buf
    })
}

/// Log lines at one of `levels` that contain every one of `needles`.
fn log_lines(levels: &[&str], needles: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    text.lines()
        .filter(|l| {
            needles.iter().all(|n| l.contains(n)) && levels.iter().any(|lvl| l.contains(lvl))
        })
        .map(str::to_string)
        .collect()
}

/// Waits until a line at one of `levels` contains every one of `needles`.
async fn wait_logged(levels: &[&str], needles: &[&str]) {
    within(WAIT, async {
        while log_lines(levels, needles).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Waits until a warning or error names `plugin`.
async fn assert_warned(plugin: &str) {
    wait_logged(&[" WARN ", " ERROR "], &[plugin]).await;
}

// ---------------------------------------------------------------------------
// The runtime and the healthy plugins

/// A runtime: its pods and containers, and what NRI asked of it.
#[derive(Default)]
struct Runtime {
    pods: Mutex<Vec<PodSandbox>>,
    containers: Mutex<Vec<Container>>,
    /// Number of unsolicited container updates per plugin.
    updates: Mutex<BTreeMap<String, u64>>,
    sync_errors: Mutex<Vec<String>>,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Runtime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let pods = self.pods.lock().unwrap().clone();
        let containers = self.containers.lock().unwrap().clone();
        match sync.synchronize(&pods, &containers).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.sync_errors.lock().unwrap().push(e.to_string());
                Err(e.into())
            }
        }
    }

    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        *self
            .updates
            .lock()
            .unwrap()
            .entry(plugin.to_string())
            .or_default() += updates.len() as u64;
        Ok(Vec::new())
    }
}

/// A shared record of what a healthy plugin saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    async fn wait_for(&self, entry: &str) {
        within(WAIT, async {
            while !self.get().iter().any(|e| e == entry) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
}

/// A well-behaved plugin: records its events, annotates each container.
struct Healthy {
    name: String,
    seen: Seen,
}

#[nri_stub::plugin]
impl Plugin for Healthy {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let pods: BTreeSet<&str> = pods.iter().map(|p| p.id.as_str()).collect();
        let ctrs: BTreeSet<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        self.seen.push(format!("sync {pods:?} {ctrs:?}"));
        Ok(Vec::new())
    }
    async fn run_pod_sandbox(&self, _c: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.seen.push(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.seen.push(format!("CreateContainer {}", ctr.id));
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation(format!("healthy-{}", self.name), "yes");
        Ok(adjust.into())
    }
    async fn start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.seen.push(format!("StartContainer {}", ctr.id));
        Ok(())
    }
}

fn run_healthy(
    name: &str,
    idx: &str,
    socket: &Path,
) -> (Seen, JoinHandle<Result<(), nri_stub::Error>>) {
    let seen = Seen::default();
    let plugin = Healthy {
        name: name.into(),
        seen: seen.clone(),
    };
    let stub = nri_stub::Stub::builder(plugin)
        .name(name)
        .index(idx)
        .socket_path(socket)
        .build()
        .unwrap();
    (seen, tokio::spawn(async move { stub.run().await }))
}

// ---------------------------------------------------------------------------
// The harness

/// Awaits `fut`, failing the test after `limit`.
async fn within<F: Future>(limit: Duration, fut: F) -> F::Output {
    tokio::time::timeout(limit, Box::pin(fut))
        .await
        .expect("operation did not finish in time")
}

fn pod(id: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

fn container(id: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "pod0".into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

/// An adaptation with short timeouts, two healthy plugins and one pod.
struct Harness {
    dir: tempfile::TempDir,
    runtime: Arc<Runtime>,
    nri: Adaptation,
    healthy: Vec<Seen>,
    _tasks: Vec<JoinHandle<Result<(), nri_stub::Error>>>,
    next: Mutex<usize>,
}

impl Harness {
    async fn start() -> Harness {
        Harness::start_with(|b| b, |_| {}).await
    }

    /// `tweak` changes the builder; `prepare` fills the plugin directory.
    /// Starts with the misbehaving binary in the plugin directory as `file`,
    /// run with `args` (see [`launcher_script`]); returns its pid file too.
    async fn start_with_launched(file: &str, args: &str) -> (Harness, PathBuf) {
        let mut pid_file = None;
        let h = Harness::start_with(
            |b| b,
            |dir| pid_file = Some(launcher_script(dir, file, args)),
        )
        .await;
        (h, pid_file.expect("the plugin directory was prepared"))
    }

    async fn start_with(
        tweak: impl FnOnce(AdaptationBuilder) -> AdaptationBuilder,
        prepare: impl FnOnce(&Path),
    ) -> Harness {
        logs();
        let dir = tempfile::tempdir().unwrap();
        let runtime = Arc::new(Runtime::default());
        let plugin_dir = dir.path().join("plugins");
        std::fs::create_dir_all(&plugin_dir).unwrap();
        prepare(&plugin_dir);
        let builder = Adaptation::builder("test-runtime", "v1.0.0", runtime.clone())
            .plugin_path(plugin_dir)
            .plugin_config_path(dir.path().join("conf.d"))
            .socket_path(dir.path().join("run/nri.sock"))
            .registration_timeout(REGISTRATION_TIMEOUT)
            .request_timeout(REQUEST_TIMEOUT);
        let nri = tweak(builder).build();
        let started = Instant::now();
        within(WAIT, nri.start()).await.unwrap();
        assert_live("start", started.elapsed(), REGISTRATION_TIMEOUT);
        let mut h = Harness {
            dir,
            runtime,
            nri,
            healthy: Vec::new(),
            _tasks: Vec::new(),
            next: Mutex::new(0),
        };
        for (idx, name) in HEALTHY {
            let (seen, task) = run_healthy(name, idx, &h.socket());
            seen.wait_for("sync {} {}").await;
            h.healthy.push(seen);
            h._tasks.push(task);
        }
        within(WAIT, async {
            while !["05-alpha", "90-omega"]
                .iter()
                .all(|n| h.plugin_names().iter().any(|p| p == n))
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        h.runtime.pods.lock().unwrap().push(pod("pod0"));
        h.call(
            "RunPodSandbox",
            h.nri.run_pod_sandbox(RunPodSandboxRequest {
                pod: Some(pod("pod0")),
            }),
        )
        .await
        .unwrap();
        h
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run/nri.sock")
    }

    fn plugin_names(&self) -> Vec<String> {
        self.nri
            .plugins()
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect()
    }

    /// Waits until exactly `names` are listed (in index order).
    async fn wait_listed(&self, names: &[&str]) {
        within(WAIT, async {
            while self.plugin_names() != names {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }

    /// Runs one runtime call the way a runtime does (plugin-sync block
    /// first) and checks it returns in time.
    async fn call<F: Future>(&self, what: &str, fut: F) -> F::Output {
        // Boxed: lifecycle futures are large in debug builds, and nesting
        // them by value would overflow the test thread's stack.
        let fut = Box::pin(fut);
        let started = Instant::now();
        let out = within(WAIT, async {
            let _block = self.nri.block_plugin_sync().await;
            fut.await
        })
        .await;
        assert_live(what, started.elapsed(), REQUEST_TIMEOUT);
        out
    }

    fn fresh_id(&self, prefix: &str) -> String {
        let mut n = self.next.lock().unwrap();
        *n += 1;
        format!("{prefix}{n}")
    }

    /// CreateContainer of a new container; on success the runtime keeps it.
    async fn create(&self, id: &str) -> Result<CreateContainerResponse, nri_adaptation::Error> {
        let req = CreateContainerRequest {
            pod: Some(pod("pod0")),
            container: Some(container(id)),
        };
        let reply = self
            .call("CreateContainer", self.nri.create_container(req))
            .await;
        if reply.is_ok() {
            self.runtime.containers.lock().unwrap().push(container(id));
        }
        reply
    }

    async fn start_ctr(&self, id: &str) -> Result<(), nri_adaptation::Error> {
        let req = StartContainerRequest {
            pod: Some(pod("pod0")),
            container: Some(container(id)),
        };
        self.call("StartContainer", self.nri.start_container(req))
            .await
            .map(|_| ())
    }

    /// A new container reaches every healthy plugin and carries their
    /// adjustments; so does its start.
    async fn assert_healthy(&self) {
        let id = self.fresh_id("after");
        let reply = self.create(&id).await.unwrap();
        assert_healthy_adjustments(&reply);
        self.start_ctr(&id).await.unwrap();
        for seen in &self.healthy {
            let got = seen.get();
            assert!(got.contains(&format!("CreateContainer {id}")), "{got:?}");
            assert!(got.contains(&format!("StartContainer {id}")), "{got:?}");
        }
    }

    /// A plugin connecting now is synchronized with every pod and
    /// container of the runtime.
    async fn assert_state_kept(&self) {
        let pods: BTreeSet<String> = self
            .runtime
            .pods
            .lock()
            .unwrap()
            .iter()
            .map(|p| p.id.clone())
            .collect();
        let ctrs: BTreeSet<String> = self
            .runtime
            .containers
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.id.clone())
            .collect();
        let name = self.fresh_id("late");
        let (seen, task) = run_healthy(&name, "99", &self.socket());
        seen.wait_for(&format!("sync {pods:?} {ctrs:?}")).await;
        task.abort();
    }

    /// The end of every test: the runtime still serves its healthy plugins,
    /// a late plugin sees all its state, and it stops in time.
    async fn finish(&self) {
        self.assert_healthy().await;
        self.finish_kept().await;
    }

    /// [`Harness::finish`] for tests that checked the healthy plugins
    /// themselves.
    async fn finish_kept(&self) {
        self.assert_state_kept().await;
        within(WAIT, self.nri.stop()).await;
    }
}

fn assert_live(what: &str, elapsed: Duration, timeout: Duration) {
    assert!(
        elapsed < timeout + MARGIN,
        "{what} took {elapsed:?}, more than {timeout:?} + {MARGIN:?}"
    );
}

fn assert_healthy_adjustments(reply: &CreateContainerResponse) {
    let annotations = &reply.adjust.as_ref().expect("no adjustment").annotations;
    for (_, name) in HEALTHY {
        assert_eq!(
            annotations
                .get(&format!("healthy-{name}"))
                .map(String::as_str),
            Some("yes"),
            "{annotations:?}"
        );
    }
}

/// Runs `fault` in-process against the harness' socket.
fn spawn_bad(
    h: &Harness,
    fault: Fault,
) -> (Misbehave, JoinHandle<Result<Outcome, nri_misbehave::Error>>) {
    let bad = Misbehave::new(fault);
    let runner = bad.clone();
    let socket = h.socket();
    let task = tokio::spawn(async move { runner.run(Target::Socket(socket)).await });
    (bad, task)
}

/// A plugin-dir entry that execs the binary with `args` and records its
/// pid in a file next to the plugin dir.
fn launcher_script(dir: &Path, file: &str, args: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let pid_file = dir.parent().unwrap().join(format!("{file}.pid"));
    let script = format!(
        "#!/bin/sh\necho $$ > {}\nexec {} {args}\n",
        pid_file.display(),
        env!("CARGO_BIN_EXE_nri-misbehave"),
    );
    let path = dir.join(file);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    pid_file
}

/// Waits until process `pid` is gone (killed and reaped).
async fn wait_gone(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    within(WAIT, async {
        while proc_dir.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// Faults during a call

/// A plugin that breaks in its CreateContainer handler is dropped; the
/// call goes on with the healthy plugins in time.
async fn fault_in_create_container(kind: FaultKind, name: &str) {
    let h = Harness::start().await;
    let (bad, task) = spawn_bad(&h, Fault::new(kind, name, "50"));
    let full = format!("50-{name}");
    h.wait_listed(&["05-alpha", &full, "90-omega"]).await;

    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    assert!(bad.probe().fired());
    assert_eq!(bad.probe().requests().last().unwrap(), "CreateContainer");
    h.wait_listed(&["05-alpha", "90-omega"]).await;
    assert_warned(&full).await;
    // The runtime closed the bad connection.
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);

    h.finish().await;
}

#[tokio::test]
async fn hang_in_create_container() {
    fault_in_create_container(FaultKind::Hang, "bad-hang-create").await;
}

#[tokio::test]
async fn garbage_instead_of_a_reply() {
    fault_in_create_container(FaultKind::Garbage, "bad-garbage").await;
}

#[tokio::test]
async fn frame_larger_than_the_mux_limit() {
    fault_in_create_container(FaultKind::OversizedFrame, "bad-oversized").await;
}

#[tokio::test]
async fn frame_announced_but_never_finished() {
    fault_in_create_container(FaultKind::TruncatedFrame, "bad-truncated").await;
}

#[tokio::test]
async fn process_exits_in_the_middle_of_a_call() {
    let h = Harness::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_nri-misbehave"))
        .args([
            "--fault",
            "exit",
            "--at",
            "CreateContainer",
            "--name",
            "bad-exit-call",
        ])
        .args(["--index", "50", "--socket"])
        .arg(h.socket())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    h.wait_listed(&["05-alpha", "50-bad-exit-call", "90-omega"])
        .await;

    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    let status = within(WAIT, child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(3));
    h.wait_listed(&["05-alpha", "90-omega"]).await;
    assert_warned("50-bad-exit-call").await;

    h.finish().await;
}

/// Runs the lifecycle call of `method` for pod0 / container c0.
async fn call_event(h: &Harness, method: &str) -> Result<(), nri_adaptation::Error> {
    let nri = &h.nri;
    let p = Some(pod("pod0"));
    let c = Some(container("c0"));
    match method {
        "RunPodSandbox" => {
            h.call(method, nri.run_pod_sandbox(RunPodSandboxRequest { pod: p }))
                .await
        }
        "UpdatePodSandbox" => h
            .call(
                method,
                nri.update_pod_sandbox(UpdatePodSandboxRequest {
                    pod: p,
                    ..Default::default()
                }),
            )
            .await
            .map(drop),
        "PostUpdatePodSandbox" => {
            h.call(
                method,
                nri.post_update_pod_sandbox(PostUpdatePodSandboxRequest { pod: p }),
            )
            .await
        }
        "StopPodSandbox" => {
            h.call(
                method,
                nri.stop_pod_sandbox(StopPodSandboxRequest { pod: p }),
            )
            .await
        }
        "RemovePodSandbox" => {
            h.call(
                method,
                nri.remove_pod_sandbox(RemovePodSandboxRequest { pod: p }),
            )
            .await
        }
        "CreateContainer" => h
            .call(
                method,
                nri.create_container(CreateContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
            .map(drop),
        "PostCreateContainer" => {
            h.call(
                method,
                nri.post_create_container(PostCreateContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
        }
        "StartContainer" => {
            h.call(
                method,
                nri.start_container(StartContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
        }
        "PostStartContainer" => {
            h.call(
                method,
                nri.post_start_container(PostStartContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
        }
        "UpdateContainer" => h
            .call(
                method,
                nri.update_container(UpdateContainerRequest {
                    pod: p,
                    container: c,
                    ..Default::default()
                }),
            )
            .await
            .map(drop),
        "PostUpdateContainer" => {
            h.call(
                method,
                nri.post_update_container(PostUpdateContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
        }
        "StopContainer" => h
            .call(
                method,
                nri.stop_container(StopContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
            .map(drop),
        "RemoveContainer" => {
            h.call(
                method,
                nri.remove_container(RemoveContainerRequest {
                    pod: p,
                    container: c,
                }),
            )
            .await
        }
        other => panic!("no lifecycle call for {other}"),
    }
}

const LIFECYCLE_EVENTS: [&str; 13] = [
    "RunPodSandbox",
    "UpdatePodSandbox",
    "PostUpdatePodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "CreateContainer",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "UpdateContainer",
    "PostUpdateContainer",
    "StopContainer",
    "RemoveContainer",
];

/// `kind` fired in each lifecycle event in turn: every call succeeds in
/// time and drops the plugin, which is named.
async fn fault_in_every_event(kind: FaultKind) {
    let h = Harness::start().await;
    for (i, method) in LIFECYCLE_EVENTS.into_iter().enumerate() {
        let name = format!("bad-every-{kind}-e{i:02}");
        let full = format!("50-{name}");
        let (bad, task) = spawn_bad(&h, Fault::new(kind, name, "50").at(method));
        h.wait_listed(&["05-alpha", &full, "90-omega"]).await;
        call_event(&h, method).await.unwrap();
        assert!(bad.probe().fired(), "{method}");
        assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"], "{method}");
        assert_warned(&full).await;
        within(WAIT, task).await.unwrap().unwrap();
    }
    h.finish().await;
}

#[tokio::test]
async fn hang_in_every_lifecycle_event() {
    fault_in_every_event(FaultKind::Hang).await;
}

#[tokio::test]
async fn exit_in_every_lifecycle_event() {
    fault_in_every_event(FaultKind::Exit).await;
}

#[tokio::test]
async fn truncated_frame_in_every_lifecycle_event() {
    fault_in_every_event(FaultKind::TruncatedFrame).await;
}

#[tokio::test]
async fn hang_in_validation() {
    let h = Harness::start().await;
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Hang, "bad-hang-validate", "50").at("ValidateContainerAdjustment"),
    );
    h.wait_listed(&["05-alpha", "50-bad-hang-validate", "90-omega"])
        .await;
    // A validator that does not answer cannot approve: the call fails, in
    // time, naming it.
    let err = h.create("c1").await.unwrap_err();
    assert!(err.to_string().contains("50-bad-hang-validate"), "{err}");
    assert!(bad.probe().fired());
    task.abort();
    let _ = task.await;
    within(WAIT, async {
        while h.plugin_names().len() != 2 {
            h.start_ctr("c0").await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    h.finish().await;
}

#[tokio::test]
async fn stop_during_a_hanging_call() {
    let h = Harness::start().await;
    let (bad, _task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Hang, "bad-hang-stop", "50").at("CreateContainer"),
    );
    h.wait_listed(&["05-alpha", "50-bad-hang-stop", "90-omega"])
        .await;
    let started = Instant::now();
    let create = h.create("c1");
    // Stop while the call waits for the hanging plugin.
    let stop = async {
        bad.probe().wait_for(|p| p.fired()).await;
        h.nri.stop().await
    };
    let (reply, ()) = within(WAIT, async { tokio::join!(create, stop) }).await;
    assert_live("stop", started.elapsed(), REQUEST_TIMEOUT);
    // The call finished first, without the hanging plugin.
    assert_healthy_adjustments(&reply.unwrap());
    // Calls after stop return at once (checked by the harness).
    let _ = h.create("c2").await;
}

#[tokio::test]
async fn hang_in_shutdown_does_not_hold_up_stop() {
    let h = Harness::start().await;
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Hang, "bad-hang-shutdown", "50").at("Shutdown"),
    );
    h.wait_listed(&["05-alpha", "50-bad-hang-shutdown", "90-omega"])
        .await;
    h.assert_healthy().await;
    let started = Instant::now();
    within(WAIT, h.nri.stop()).await;
    assert_live("stop", started.elapsed(), REQUEST_TIMEOUT);
    assert!(bad.probe().fired());
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);
}

// ---------------------------------------------------------------------------
// Faults while a plugin starts

/// A plugin hanging in `method` while it starts: runtime calls meanwhile
/// (which wait for the plugin-sync lock) stay in bound, the plugin is
/// dropped and named.
async fn hang_while_starting(method: &str, name: &str) {
    fault_while_starting(FaultKind::Hang, method, name, Outcome::Disconnected).await;
}

async fn fault_while_starting(kind: FaultKind, method: &str, name: &str, outcome: Outcome) {
    let h = Harness::start().await;
    h.create("c1").await.unwrap();
    let (bad, task) = spawn_bad(&h, Fault::new(kind, name, "50").at(method));
    within(WAIT, bad.probe().wait_for(|p| p.fired())).await;

    // While it hangs.
    let reply = h.create("c2").await.unwrap();
    assert_healthy_adjustments(&reply);

    assert_eq!(within(WAIT, task).await.unwrap().unwrap(), outcome);
    assert_warned(&format!("50-{name}")).await;
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    h.finish().await;
}

#[tokio::test]
async fn hang_in_synchronize() {
    hang_while_starting("Synchronize", "bad-hang-sync").await;
}

#[tokio::test]
async fn hang_in_configure() {
    hang_while_starting("Configure", "bad-hang-configure").await;
}

#[tokio::test]
async fn exit_in_configure() {
    fault_while_starting(
        FaultKind::Exit,
        "Configure",
        "bad-exit-configure",
        Outcome::Exited,
    )
    .await;
}

#[tokio::test]
async fn exit_while_being_synchronized() {
    let h = Harness::start().await;
    h.create("c1").await.unwrap();
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Exit, "bad-exit-sync", "50").at("Synchronize"),
    );
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Exited);
    assert_eq!(bad.probe().requests(), ["Configure", "Synchronize"]);
    assert_warned("50-bad-exit-sync").await;
    h.assert_healthy().await;
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    h.finish_kept().await;
}

#[tokio::test]
async fn close_during_split_synchronize() {
    let h = Harness::start().await;
    // More state than one message can carry.
    {
        let big = "z".repeat(512 * 1024);
        let mut ctrs = h.runtime.containers.lock().unwrap();
        for i in 0..12 {
            let mut c = container(&format!("big{i}"));
            c.annotations.insert("big".into(), big.clone());
            ctrs.push(c);
        }
    }
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::CloseDuringSync, "bad-split", "50"),
    );
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::ClosedDuringSync);
    assert_eq!(bad.probe().requests(), ["Configure", "Synchronize"]);
    assert_warned("50-bad-split").await;
    assert_eq!(h.runtime.sync_errors.lock().unwrap().len(), 1);

    h.assert_healthy().await;
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    h.finish_kept().await;
}

#[tokio::test]
async fn never_register_holds_up_only_later_registrations() {
    let h = Harness::start().await;
    let started = Instant::now();
    let (bad, task) = spawn_bad(&h, Fault::new(FaultKind::NeverRegister, "bad-silent", "50"));
    within(WAIT, bad.probe().wait_for(|p| p.connections() == 1)).await;

    // Calls go on while it is silent.
    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    // The runtime gives up on it after the registration timeout.
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);
    assert_live("silent connection", started.elapsed(), REGISTRATION_TIMEOUT);
    assert!(bad.probe().requests().is_empty());
    // It never said its name: the log can only tell the timeout.
    wait_logged(&[" ERROR "], &["plugin registration timed out"]).await;

    h.finish().await;
}

#[tokio::test]
async fn broken_bytes_before_registration_cost_only_that_connection() {
    let h = Harness::start().await;
    for (kind, name) in [
        (FaultKind::Garbage, "bad-early-garbage"),
        (FaultKind::OversizedFrame, "bad-early-oversized"),
        (FaultKind::TruncatedFrame, "bad-early-truncated"),
    ] {
        let started = Instant::now();
        let (bad, task) = spawn_bad(&h, Fault::new(kind, name, "50").at_connect());
        let outcome = within(WAIT, task).await.unwrap().unwrap();
        assert_eq!(outcome, Outcome::Disconnected, "{kind}");
        assert_live(name, started.elapsed(), REGISTRATION_TIMEOUT);
        assert_eq!(bad.probe().registered(), 0, "{kind}");
        h.assert_healthy().await;
    }
    h.finish_kept().await;
}

// ---------------------------------------------------------------------------
// Pre-launched plugins (the binary on NRI_PLUGIN_SOCKET)

#[tokio::test]
async fn launched_plugin_that_never_registers() {
    let (h, pid_file) =
        Harness::start_with_launched("50-bad-launched-silent", "--fault never-register").await;
    assert_warned("bad-launched-silent").await;
    wait_gone(&pid_file).await;
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    h.finish().await;
}

#[tokio::test]
async fn launched_plugin_hanging_in_synchronize_at_start_up() {
    // `start` itself is bounded (checked by the harness).
    let (h, pid_file) =
        Harness::start_with_launched("50-bad-launched-sync", "--fault hang --at Synchronize").await;
    assert_warned("50-bad-launched-sync").await;
    wait_gone(&pid_file).await;
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    h.finish().await;
}

#[tokio::test]
async fn launched_plugin_that_hangs_is_killed() {
    launched_plugin_failing_in_create("50-bad-launched-hang", "hang").await;
}

#[tokio::test]
async fn launched_plugin_exiting_in_a_call_is_reaped() {
    launched_plugin_failing_in_create("50-bad-launched-exit", "exit").await;
}

/// A launched plugin with `fault` in CreateContainer is dropped from the
/// call, which still carries the healthy plugins' adjustments, and its
/// process is gone afterwards (killed and reaped: no zombie left behind).
async fn launched_plugin_failing_in_create(file: &str, fault: &str) {
    let (h, pid_file) =
        Harness::start_with_launched(file, &format!("--fault {fault} --at CreateContainer")).await;
    assert_eq!(h.plugin_names(), ["05-alpha", file, "90-omega"]);
    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    assert_eq!(h.plugin_names(), ["05-alpha", "90-omega"]);
    assert_warned(file).await;
    wait_gone(&pid_file).await;
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Floods, duplicates, conflicts

#[tokio::test]
async fn flood_of_unsolicited_updates() {
    let h = Harness::start().await;
    let mut fault = Fault::new(FaultKind::FloodUpdates, "bad-flood", "50");
    fault.flood_inflight = 64;
    let (bad, task) = spawn_bad(&h, fault);
    h.wait_listed(&["05-alpha", "50-bad-flood", "90-omega"])
        .await;
    within(WAIT, bad.probe().wait_for(|p| p.updates_answered() >= 100)).await;

    // Lifecycle calls stay in bound while the flood runs, and so does the
    // runtime's service of the flood itself.
    for _ in 0..5 {
        let before = bad.probe().updates_answered();
        h.assert_healthy().await;
        within(
            WAIT,
            bad.probe().wait_for(|p| p.updates_answered() > before),
        )
        .await;
    }
    // The hook saw the updates, named by the plugin; never more than the
    // plugin had outstanding were unanswered.
    let hooked = h.runtime.updates.lock().unwrap()["50-bad-flood"];
    assert!(hooked >= 100, "{hooked}");
    let probe = bad.probe();
    assert!(probe.updates_sent() - probe.updates_answered() <= 64);
    wait_logged(
        &[" INFO "],
        &["plugin requested container updates", "plugin=50-bad-flood "],
    )
    .await;

    task.abort();
    let _ = task.await;
    // The closed connection is noticed and the plugin removed.
    within(WAIT, async {
        while h.plugin_names().len() != 2 {
            h.create(&h.fresh_id("drain")).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    h.finish().await;
}

#[tokio::test]
async fn stop_while_flooding() {
    let h = Harness::start().await;
    let mut fault = Fault::new(FaultKind::FloodUpdates, "bad-flood-stop", "50");
    // Pipelined far beyond what the runtime answers at once.
    fault.flood_inflight = 10_000;
    let (bad, task) = spawn_bad(&h, fault);
    within(WAIT, bad.probe().wait_for(|p| p.updates_answered() >= 100)).await;
    h.assert_healthy().await;
    let started = Instant::now();
    within(WAIT, h.nri.stop()).await;
    assert_live("stop", started.elapsed(), REQUEST_TIMEOUT);
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);
    assert!(bad.probe().requests().contains(&"Shutdown".to_string()));
}

/// A plugin that floods without ever reading a reply. The runtime should
/// stop taking its requests (or drop it) instead of queueing replies it
/// cannot write.
#[tokio::test]
async fn flood_ignoring_replies_is_bounded() {
    const COUNT: u64 = 100_000;
    let h = Harness::start().await;
    let mut fault = Fault::new(FaultKind::FloodUpdates, "bad-flood-deaf", "50");
    fault.flood_ignore_replies = true;
    fault.flood_count = Some(COUNT);
    let (bad, task) = spawn_bad(&h, fault);
    within(WAIT, bad.probe().wait_for(|p| p.fired())).await;
    // Either the flood stalls or it is all sent; give it time either way.
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        bad.probe().wait_for(|p| p.updates_sent() >= COUNT),
    )
    .await;
    let hooked = h
        .runtime
        .updates
        .lock()
        .unwrap()
        .get("50-bad-flood-deaf")
        .copied()
        .unwrap_or(0);
    assert!(
        hooked < 10_000,
        "{hooked} updates taken from a plugin that reads no replies"
    );
    // Held up by its own blocked writes, or dropped: the flood never got
    // through whole.
    let sent = bad.probe().updates_sent();
    assert!(sent < COUNT, "all {sent} updates of the flood were taken");
    task.abort();
    h.finish().await;
}

#[tokio::test]
async fn same_identity_twice_keeps_both_by_default() {
    let h = Harness::start().await;
    let (bad, _task) = spawn_bad(
        &h,
        Fault::new(FaultKind::DuplicateIdentity, "bad-dup", "50"),
    );
    h.wait_listed(&["05-alpha", "50-bad-dup", "50-bad-dup", "90-omega"])
        .await;
    assert_eq!(bad.probe().registered(), 2);

    // Every event reaches both connections.
    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    let reqs = bad.probe().requests();
    assert!(reqs.contains(&"CreateContainer".to_string()), "{reqs:?}");
    assert!(reqs.contains(&"CreateContainer@1".to_string()), "{reqs:?}");
    h.finish().await;
}

#[tokio::test]
async fn same_identity_twice_with_replacement_keeps_the_newer() {
    let h = Harness::start_with(|b| b.replace_same_identity(true), |_| {}).await;
    let (bad, _task) = spawn_bad(
        &h,
        Fault::new(FaultKind::DuplicateIdentity, "bad-dup-r", "50"),
    );
    // The older connection is told to shut down.
    within(
        WAIT,
        bad.probe()
            .wait_for(|p| p.requests().contains(&"Shutdown".to_string())),
    )
    .await;
    h.wait_listed(&["05-alpha", "50-bad-dup-r", "90-omega"])
        .await;
    wait_logged(
        &[" INFO "],
        &["new connection replaces the plugin", "50-bad-dup-r"],
    )
    .await;

    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    let reqs = bad.probe().requests();
    assert!(!reqs.contains(&"CreateContainer".to_string()), "{reqs:?}");
    assert!(reqs.contains(&"CreateContainer@1".to_string()), "{reqs:?}");
    h.finish().await;
}

#[tokio::test]
async fn failed_replacement_keeps_the_serving_plugin() {
    let h = Harness::start_with(|b| b.replace_same_identity(true), |_| {}).await;
    let (old_seen, _old) = run_healthy("bad-successor", "50", &h.socket());
    h.wait_listed(&["05-alpha", "50-bad-successor", "90-omega"])
        .await;
    // A successor with the same identity that hangs while being started.
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Hang, "bad-successor", "50").at("Synchronize"),
    );
    within(WAIT, bad.probe().wait_for(|p| p.fired())).await;
    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);
    // The plugin that was serving still is.
    assert_eq!(
        h.plugin_names(),
        ["05-alpha", "50-bad-successor", "90-omega"]
    );
    h.assert_healthy().await;
    old_seen.wait_for("CreateContainer c1").await;
    assert_eq!(
        old_seen
            .get()
            .iter()
            .filter(|e| e.starts_with("CreateContainer"))
            .count(),
        2
    );
    h.finish_kept().await;
}

#[tokio::test]
async fn replaced_plugin_hanging_in_shutdown() {
    let h = Harness::start_with(|b| b.replace_same_identity(true), |_| {}).await;
    let (bad, task) = spawn_bad(
        &h,
        Fault::new(FaultKind::Hang, "bad-old", "50").at("Shutdown"),
    );
    h.wait_listed(&["05-alpha", "50-bad-old", "90-omega"]).await;
    // Its successor takes over; the old one hangs when told to go.
    let (new_seen, _new) = run_healthy("bad-old", "50", &h.socket());
    within(WAIT, bad.probe().wait_for(|p| p.fired())).await;
    h.wait_listed(&["05-alpha", "50-bad-old", "90-omega"]).await;
    let reply = h.create("c1").await.unwrap();
    assert_healthy_adjustments(&reply);
    assert!(reply
        .adjust
        .unwrap()
        .annotations
        .contains_key("healthy-bad-old"));
    new_seen.wait_for("CreateContainer c1").await;
    assert!(!bad
        .probe()
        .requests()
        .contains(&"CreateContainer".to_string()));
    // The old connection is closed after the request timeout at the latest.
    let outcome = within(WAIT, task).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Disconnected);
    h.finish().await;
}

#[tokio::test]
async fn conflicting_adjustments_fail_the_call_and_name_both_plugins() {
    let h = Harness::start().await;
    let mut fault = Fault::new(FaultKind::Conflict, "bad-conflict", "50");
    fault.conflict_key = "healthy-alpha".into();
    fault.conflict_value = "no".into();
    let (bad, task) = spawn_bad(&h, fault);
    h.wait_listed(&["05-alpha", "50-bad-conflict", "90-omega"])
        .await;

    let err = h.create("c1").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "50-bad-conflict" and "05-alpha" both tried to set Annotations healthy-alpha"#
    );
    assert!(bad.probe().fired());
    // A conflict is not a reason to drop anybody.
    assert_eq!(
        h.plugin_names(),
        ["05-alpha", "50-bad-conflict", "90-omega"]
    );

    // Other events still reach the healthy plugins.
    h.start_ctr("c1").await.unwrap();
    for seen in &h.healthy {
        assert!(seen.get().contains(&"StartContainer c1".to_string()));
    }
    // Without the conflicting plugin, containers get created again.
    task.abort();
    let _ = task.await;
    within(WAIT, async {
        while h.plugin_names().len() != 2 {
            h.start_ctr("c1").await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    h.finish().await;
}
