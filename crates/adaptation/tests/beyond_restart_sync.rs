//! A restarted pre-installed plugin (`AdaptationBuilder::restart_plugins`)
//! and the events of its synchronization
//! (`AdaptationBuilder::deliver_events_during_sync`).
//!
//! This test has its own `main` (`harness = false`): started by the
//! adaptation (with `NRI_PLUGIN_SOCKET` in its environment) the same binary
//! acts as the plugin. Its configuration is a directory: on every start it
//! appends its pid to `<dir>/starts`, and it appends every synchronization
//! and event it handles to `<dir>/events-<pid>` before answering.
//! Otherwise the binary runs the scenarios below, each bounded by a
//! timeout.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RestartPolicy, RuntimeHooks, Synchronizer};
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, Plugin};
use support::{bounded, container, pod, Env, Restarts};
use tokio::sync::{mpsc, Semaphore};

// ---- the plugin ----

/// Records what it is told, one line per call.
struct Recorder {
    dir: Mutex<Option<PathBuf>>,
}

impl Recorder {
    fn record(&self, line: String) {
        let Some(dir) = self.dir.lock().unwrap().clone() else {
            return;
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("events-{}", std::process::id())))
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}

#[nri_stub::plugin]
impl Plugin for Recorder {
    async fn configure(
        &self,
        _ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        let dir = support::record_start(info);
        *self.dir.lock().unwrap() = Some(dir);
        Ok(EventMask::default())
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let pods: Vec<_> = pods.iter().map(|p| p.id.as_str()).collect();
        let ctrs: Vec<_> = containers.iter().map(|c| c.id.as_str()).collect();
        self.record(format!(
            "Synchronize pods={} containers={}",
            pods.join(","),
            ctrs.join(",")
        ));
        Ok(Vec::new())
    }

    async fn run_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }

    async fn stop_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("StopPodSandbox {}", pod.id));
        Ok(())
    }

    async fn post_create_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("PostCreateContainer {}", ctr.id));
        Ok(())
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("StartContainer {}", ctr.id));
        Ok(())
    }

    async fn post_start_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("PostStartContainer {}", ctr.id));
        Ok(())
    }

    async fn stop_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.record(format!("StopContainer {}", ctr.id));
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("RemoveContainer {}", ctr.id));
        Ok(())
    }
}

fn plugin_main() {
    support::run_launched_plugin(Recorder {
        dir: Mutex::new(None),
    });
}

// ---- the runtime side ----

/// A runtime whose state the test changes as it sends events. Once armed,
/// its synchronization hook lists the state, tells the test, and waits for
/// a permit of `gate` before handing the listing to the plugin: events the
/// test sends meanwhile happen during the synchronization and are not in
/// the listing.
struct Gated {
    pods: Mutex<BTreeMap<String, PodSandbox>>,
    containers: Mutex<BTreeMap<String, Container>>,
    armed: AtomicBool,
    listed: mpsc::UnboundedSender<()>,
    gate: Semaphore,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Gated {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let pods: Vec<_> = self.pods.lock().unwrap().values().cloned().collect();
        let ctrs: Vec<_> = self.containers.lock().unwrap().values().cloned().collect();
        if self.armed.load(Ordering::SeqCst) {
            let _ = self.listed.send(());
            self.gate.acquire().await?.forget();
        }
        sync.synchronize(&pods, &ctrs).await?;
        Ok(())
    }
}

struct Setup {
    env: Env,
    /// The plugin's state directory (its configuration).
    state: PathBuf,
    runtime: Arc<Gated>,
    listed: mpsc::UnboundedReceiver<()>,
    restarts: Arc<Restarts>,
}

impl Setup {
    /// A plugin directory with this binary as `10-recorder`.
    fn new() -> Setup {
        let env = Env::new();
        let state = env.install_self_as_plugin("recorder");
        let (tx, listed) = mpsc::unbounded_channel();
        Setup {
            env,
            state,
            runtime: Arc::new(Gated {
                pods: Mutex::new(BTreeMap::new()),
                containers: Mutex::new(BTreeMap::new()),
                armed: AtomicBool::new(false),
                listed: tx,
                gate: Semaphore::new(0),
            }),
            listed,
            restarts: Arc::new(Restarts::default()),
        }
    }

    fn adaptation(&self, deliver: bool) -> Adaptation {
        self.env
            .launched_builder(self.runtime.clone(), self.restarts.clone())
            .restart_plugins(RestartPolicy {
                max_restarts: 3,
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(40),
                reset_after: Duration::from_secs(60),
            })
            .deliver_events_during_sync(deliver)
            .build()
    }

    /// Pids of every start of the plugin so far.
    fn starts(&self) -> Vec<String> {
        support::starts(&self.state)
    }

    /// What the plugin process `pid` recorded, in order.
    fn events(&self, pid: &str) -> Vec<String> {
        std::fs::read_to_string(self.state.join(format!("events-{pid}")))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn kill(pid: &str) {
    let pid: i32 = pid.parse().unwrap();
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
}

async fn wait_no_plugins(nri: &Adaptation) {
    bounded(async {
        while !nri.plugins().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Plays the runtime: sends each event and changes the state around it as
/// a runtime does.
struct Script<'a> {
    nri: &'a Adaptation,
    rt: &'a Gated,
}

impl Script<'_> {
    fn pod(&self, id: &str) -> PodSandbox {
        self.rt.pods.lock().unwrap().get(id).cloned().unwrap()
    }

    fn ctr(&self, id: &str) -> Container {
        self.rt.containers.lock().unwrap().get(id).cloned().unwrap()
    }

    fn set_state(&self, id: &str, state: ContainerState) {
        let mut ctrs = self.rt.containers.lock().unwrap();
        ctrs.get_mut(id).unwrap().state = state as i32;
    }

    async fn run_pod(&self, id: &str) {
        let p = pod(id);
        self.rt.pods.lock().unwrap().insert(id.into(), p.clone());
        bounded(
            self.nri
                .run_pod_sandbox(RunPodSandboxRequest { pod: Some(p) }),
        )
        .await
        .unwrap();
    }

    /// Creates and starts a container.
    async fn start_ctr(&self, id: &str, pod_id: &str) {
        let pod = Some(self.pod(pod_id));
        let mut c = container(id, pod_id);
        c.state = ContainerState::ContainerCreated as i32;
        bounded(self.nri.create_container(CreateContainerRequest {
            pod: pod.clone(),
            container: Some(c.clone()),
        }))
        .await
        .unwrap();
        self.rt.containers.lock().unwrap().insert(id.into(), c);
        let c = Some(self.ctr(id));
        bounded(self.nri.post_create_container(PostCreateContainerRequest {
            pod: pod.clone(),
            container: c.clone(),
        }))
        .await
        .unwrap();
        bounded(self.nri.start_container(StartContainerRequest {
            pod: pod.clone(),
            container: c,
        }))
        .await
        .unwrap();
        self.set_state(id, ContainerState::ContainerRunning);
        bounded(self.nri.post_start_container(PostStartContainerRequest {
            pod,
            container: Some(self.ctr(id)),
        }))
        .await
        .unwrap();
    }

    /// Stops and removes a container.
    async fn end_ctr(&self, id: &str) {
        let c = self.ctr(id);
        let pod = Some(self.pod(&c.pod_sandbox_id));
        bounded(self.nri.stop_container(StopContainerRequest {
            pod: pod.clone(),
            container: Some(c),
        }))
        .await
        .unwrap();
        self.set_state(id, ContainerState::ContainerStopped);
        let c = self.rt.containers.lock().unwrap().remove(id);
        bounded(
            self.nri
                .remove_container(RemoveContainerRequest { pod, container: c }),
        )
        .await
        .unwrap();
    }
}

// ---- scenarios ----

/// The plugin is killed while `ctr0` runs in `pod0`; while its restart is
/// being synchronized (after the runtime listed its state), `pod1` runs,
/// `ctr1` is created and started in it and `ctr0` is stopped and removed;
/// once it is back, `ctr1` is stopped and removed. Returns what the
/// restarted plugin recorded.
async fn restart_with_events_during_sync(deliver: bool) -> Vec<String> {
    let mut s = Setup::new();
    let nri = s.adaptation(deliver);
    let mut restarts = s.restarts.watch();
    bounded(nri.start()).await.unwrap();
    assert_eq!(nri.plugins().len(), 1);
    let script = Script {
        nri: &nri,
        rt: &s.runtime,
    };
    script.run_pod("pod0").await;
    script.start_ctr("ctr0", "pod0").await;
    let first = s.starts()[0].clone();

    s.runtime.armed.store(true, Ordering::SeqCst);
    kill(&first);
    wait_no_plugins(&nri).await;
    // The restarted plugin is being synchronized; the runtime listed pod0
    // and ctr0 and waits.
    bounded(s.listed.recv()).await.unwrap();
    script.run_pod("pod1").await;
    script.start_ctr("ctr1", "pod1").await;
    script.end_ctr("ctr0").await;
    s.runtime.gate.add_permits(1);
    bounded(restarts.wait_for(|n| *n == 1)).await.unwrap();
    assert_eq!(nri.plugins().len(), 1);

    // Live events, after the restart.
    script.end_ctr("ctr1").await;

    let starts = s.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    let second = starts[1].clone();
    bounded(nri.stop()).await;
    // The first process saw the events before it was killed.
    assert_eq!(
        s.events(&first),
        [
            "Synchronize pods= containers=",
            "RunPodSandbox pod0",
            "PostCreateContainer ctr0",
            "StartContainer ctr0",
            "PostStartContainer ctr0",
        ]
    );
    s.events(&second)
}

/// With `deliver_events_during_sync`, the restarted plugin gets every event
/// of its synchronization that its listing does not show, once, in order,
/// before the live ones.
async fn restarted_plugin_gets_events_of_its_sync() {
    let events = restart_with_events_during_sync(true).await;
    assert_eq!(
        events,
        [
            "Synchronize pods=pod0 containers=ctr0",
            "RunPodSandbox pod1",
            // The plugin does not subscribe to CreateContainer, which is
            // replayed too.
            "PostCreateContainer ctr1",
            "StartContainer ctr1",
            "PostStartContainer ctr1",
            "StopContainer ctr0",
            "RemoveContainer ctr0",
            // Live.
            "StopContainer ctr1",
            "RemoveContainer ctr1",
        ]
    );
}

/// Without it, the restarted plugin misses them: it only gets the events
/// that start after it was added, and none of `ctr1`, created while it
/// synchronized and not listed, which it never learned of.
async fn without_the_option_they_are_missed() {
    let events = restart_with_events_during_sync(false).await;
    assert_eq!(events, ["Synchronize pods=pod0 containers=ctr0"]);
}

fn main() {
    if std::env::var_os(nri_api::plugin::PLUGIN_SOCKET_ENV).is_some() {
        plugin_main();
        return;
    }
    support::run_scenarios(async {
        println!("test restarted_plugin_gets_events_of_its_sync ...");
        restarted_plugin_gets_events_of_its_sync().await;
        println!("test without_the_option_they_are_missed ...");
        without_the_option_they_are_missed().await;
    });
    println!("test result: ok. 2 passed");
}
