//! Soak test of the runtime side: 10,000 container lifecycles (in pods),
//! driven concurrently like a real runtime does, through external nri-stub
//! plugins on the adaptation's socket, while the plugins ask for unsolicited
//! container updates and other plugins connect, synchronize and disconnect.
//!
//! What must hold at the end:
//!
//! * the run finishes (an overall timeout and a no-progress watchdog turn a
//!   deadlock into a failure naming how far the run got);
//! * per container (and per pod), the events each plugin saw are an in-order
//!   subsequence of the lifecycle without duplicates, and contiguous: a
//!   plugin is in the adaptation's list for one stretch of time, and the
//!   events of one container are delivered one after another;
//! * a plugin that synchronized mid-run never sees an event of a container
//!   or pod at or before the stage its synchronization showed;
//! * plugins connected for the whole run saw every lifecycle complete, and
//!   plugins that joined and stayed saw every lifecycle they took part in
//!   through to its end;
//! * the runtime's `update_containers` hook is only ever asked to update
//!   containers that exist at that moment, and synchronization replies only
//!   name containers that were listed.
//!
//! The runtime holds a plugin-sync block around RunPodSandbox and
//! CreateContainer (as containerd does) and records every state change after
//! the adaptation's call returns. With the adaptation's default behaviour a
//! plugin that is being synchronized may miss the events of calls that
//! overlap its synchronization, so late joiners are not checked for
//! completeness before their first event.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;
use nri_stub::{Context, CreateContainerResult, Plugin, RuntimeHandle};
use support::{container, pod};
use tokio::sync::{watch, Notify};
use tokio::task::{JoinHandle, JoinSet};

/// Container lifecycles run by the soak test.
const CONTAINERS: usize = 10_000;
/// Container lifecycles run with `deliver_events_during_sync`.
const DELIVER_CONTAINERS: usize = 2_000;
/// Concurrent pod lifecycles (each runs its containers concurrently too).
const WORKERS: usize = 6;
/// Containers per pod, cycled through.
const POD_SIZES: [usize; 7] = [1, 4, 2, 6, 3, 7, 5];
/// Plugins connected for the whole run.
const PERMANENT: usize = 8;
/// Each plugin asks for an unsolicited update once per this many
/// containers it sees started.
const UPDATE_EVERY: usize = 16;
/// The whole test must finish within this.
const OVERALL: Duration = Duration::from_secs(300);
/// Fails the run if no container lifecycle completes for this long.
const STALL: Duration = Duration::from_secs(60);
/// Bound on connecting and disconnecting one plugin.
const WAIT: Duration = Duration::from_secs(60);

/// Container events of one lifecycle, in order; a stage is an index here.
const CTR_EVENTS: [&str; 6] = [
    "CreateContainer",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "StopContainer",
    "RemoveContainer",
];
/// Pod events around the containers, in order.
const POD_EVENTS: [&str; 3] = ["RunPodSandbox", "StopPodSandbox", "RemovePodSandbox"];
const START: u8 = 2;
const POST_START: u8 = 3;
const STOP: u8 = 4;
const REMOVE: u8 = 5;

/// Annotation carrying the lifecycle stage of a synchronized pod or container.
const STAGE: &str = "soak.nri.test/stage";
/// Prefix of the annotation an adjusting plugin adds to each container.
const TAG: &str = "soak.nri.test/";

fn ctr_id(n: usize) -> String {
    format!("c{n}")
}

fn pod_id(n: usize) -> String {
    format!("p{n}")
}

// ---------------------------------------------------------------------------
// The runtime

/// The runtime's pods and containers with the last stage each completed.
#[derive(Default)]
struct World {
    pods: BTreeMap<String, (PodSandbox, u8)>,
    ctrs: BTreeMap<String, (Container, u8)>,
}

/// A runtime keeping its state consistent with the calls it made, and
/// checking the requests NRI makes of it.
struct SoakRuntime {
    /// Record each state change before making the call that announces it
    /// (else after the call returns).
    state_first: bool,
    world: Mutex<World>,
    violations: Mutex<Vec<String>>,
    /// Container updates received through `update_containers`.
    updates: AtomicUsize,
}

impl SoakRuntime {
    fn new(state_first: bool) -> SoakRuntime {
        SoakRuntime {
            state_first,
            world: Mutex::default(),
            violations: Mutex::default(),
            updates: AtomicUsize::new(0),
        }
    }

    /// Makes `call`, recording the state change `record` before or after it.
    async fn staged<T>(&self, record: impl FnOnce(&Self), call: impl Future<Output = T>) -> T {
        let mut record = Some(record);
        if self.state_first {
            if let Some(r) = record.take() {
                r(self);
            }
        }
        let result = call.await;
        if let Some(r) = record {
            r(self);
        }
        result
    }

    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    fn set_pod(&self, pod: &PodSandbox, stage: u8) {
        let mut world = self.world.lock().unwrap();
        world.pods.insert(pod.id.clone(), (pod.clone(), stage));
    }

    fn remove_pod(&self, id: &str) {
        self.world.lock().unwrap().pods.remove(id);
    }

    fn set_ctr(&self, ctr: &Container, stage: u8) {
        let mut world = self.world.lock().unwrap();
        world.ctrs.insert(ctr.id.clone(), (ctr.clone(), stage));
    }

    fn remove_ctr(&self, id: &str) {
        self.world.lock().unwrap().ctrs.remove(id);
    }
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for SoakRuntime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let (pods, ctrs) = {
            let world = self.world.lock().unwrap();
            let pods: Vec<PodSandbox> = world
                .pods
                .values()
                .map(|(p, stage)| {
                    let mut p = p.clone();
                    p.annotations.insert(STAGE.into(), stage.to_string());
                    p
                })
                .collect();
            let ctrs: Vec<Container> = world
                .ctrs
                .values()
                .map(|(c, stage)| {
                    let mut c = c.clone();
                    c.annotations.insert(STAGE.into(), stage.to_string());
                    c.state = match *stage {
                        0 | 1 => ContainerState::ContainerCreated,
                        2 | 3 => ContainerState::ContainerRunning,
                        _ => ContainerState::ContainerStopped,
                    } as i32;
                    c
                })
                .collect();
            (pods, ctrs)
        };
        let updates = sync.synchronize(&pods, &ctrs).await?;
        for u in updates {
            if !ctrs.iter().any(|c| c.id == u.container_id) {
                self.violation(format!(
                    "synchronization asked to update {}, which was not listed",
                    u.container_id
                ));
            }
        }
        Ok(())
    }

    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        let world = self.world.lock().unwrap();
        for u in &updates {
            if !world.ctrs.contains_key(&u.container_id) {
                self.violation(format!(
                    "{plugin} asked to update {}, which does not exist",
                    u.container_id
                ));
            }
        }
        if !evictions.is_empty() {
            self.violation(format!("{plugin} sent unexpected evictions {evictions:?}"));
        }
        self.updates.fetch_add(updates.len(), Ordering::Relaxed);
        Ok(Vec::new())
    }
}

// ---------------------------------------------------------------------------
// The plugins

/// What one plugin saw.
#[derive(Default)]
struct Seen {
    /// Stages of the pods and containers in its synchronization.
    synced: Option<(HashMap<String, u8>, HashMap<String, u8>)>,
    /// Stages of the events it received, per pod and per container.
    pods: HashMap<String, Vec<u8>>,
    ctrs: HashMap<String, Vec<u8>>,
    errors: Vec<String>,
}

/// Containers a plugin may update: seen started, not yet seen stopping.
#[derive(Default)]
struct Live {
    ids: BTreeSet<String>,
    /// Set when the plugin stops sending updates.
    closed: bool,
    /// Update requests answered without failures.
    sent: usize,
}

/// The shared record of one plugin.
struct Rec {
    name: String,
    seen: Mutex<Seen>,
    /// Held while an unsolicited update is in flight, and by the
    /// StopContainer handler: a container is never updated once the plugin
    /// let its stop go on.
    live: tokio::sync::Mutex<Live>,
    /// Containers seen started, and the wake-up of the update sender.
    started: AtomicUsize,
    wake: Notify,
}

impl Rec {
    fn new(name: String) -> Rec {
        Rec {
            name,
            seen: Mutex::new(Seen::default()),
            live: tokio::sync::Mutex::new(Live::default()),
            started: AtomicUsize::new(0),
            wake: Notify::new(),
        }
    }

    fn error(&self, what: String) {
        self.seen.lock().unwrap().errors.push(what);
    }

    fn pod_event(&self, pod: &PodSandbox, stage: u8) {
        let mut seen = self.seen.lock().unwrap();
        if seen.synced.is_none() {
            seen.errors.push(format!(
                "{} {} before Synchronize",
                POD_EVENTS[stage as usize], pod.id
            ));
        }
        seen.pods.entry(pod.id.clone()).or_default().push(stage);
    }

    fn ctr_event(&self, pod: &PodSandbox, ctr: &Container, stage: u8) {
        let mut seen = self.seen.lock().unwrap();
        if seen.synced.is_none() {
            seen.errors.push(format!(
                "{} {} before Synchronize",
                CTR_EVENTS[stage as usize], ctr.id
            ));
        }
        if ctr.pod_sandbox_id != pod.id {
            seen.errors.push(format!(
                "{} {} came with pod {} instead of {}",
                CTR_EVENTS[stage as usize], ctr.id, pod.id, ctr.pod_sandbox_id
            ));
        }
        seen.ctrs.entry(ctr.id.clone()).or_default().push(stage);
    }
}

fn stage_of(annotations: &BTreeMap<String, String>) -> Option<u8> {
    annotations.get(STAGE)?.parse().ok()
}

/// Records every pod and container event; optionally adds an annotation of
/// its own to each container it is asked to create.
struct Soak {
    rec: Arc<Rec>,
    adjust: bool,
}

#[nri_stub::plugin]
impl Plugin for Soak {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let mut seen = self.rec.seen.lock().unwrap();
        let mut synced = (HashMap::new(), HashMap::new());
        for p in pods {
            match stage_of(&p.annotations) {
                Some(stage) => synced.0.insert(p.id.clone(), stage),
                None => {
                    seen.errors
                        .push(format!("synchronized pod {} has no stage", p.id));
                    None
                }
            };
        }
        let mut updates = Vec::new();
        for c in containers {
            match stage_of(&c.annotations) {
                Some(stage) => {
                    if updates.is_empty() && (START..STOP).contains(&stage) {
                        let mut u = ContainerUpdate {
                            container_id: c.id.clone(),
                            ..Default::default()
                        };
                        u.set_linux_cpu_shares(512);
                        updates.push(u);
                    }
                    synced.1.insert(c.id.clone(), stage)
                }
                None => {
                    seen.errors
                        .push(format!("synchronized container {} has no stage", c.id));
                    None
                }
            };
        }
        if seen.synced.replace(synced).is_some() {
            seen.errors.push("synchronized twice".into());
        }
        Ok(updates)
    }

    async fn run_pod_sandbox(&self, _c: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.rec.pod_event(pod, 0);
        Ok(())
    }

    async fn stop_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.pod_event(pod, 1);
        Ok(())
    }

    async fn remove_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.pod_event(pod, 2);
        Ok(())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.rec.ctr_event(pod, ctr, 0);
        let mut adjust = ContainerAdjustment::default();
        if self.adjust {
            adjust.add_annotation(format!("{TAG}{}", ctx.name()), ctx.name());
        }
        Ok(adjust.into())
    }

    async fn post_create_container(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.ctr_event(pod, ctr, 1);
        Ok(())
    }

    async fn start_container(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.ctr_event(pod, ctr, START);
        self.rec.live.lock().await.ids.insert(ctr.id.clone());
        Ok(())
    }

    async fn post_start_container(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.ctr_event(pod, ctr, POST_START);
        self.rec.live.lock().await.ids.insert(ctr.id.clone());
        if self.rec.started.fetch_add(1, Ordering::Relaxed) % UPDATE_EVERY == 0 {
            self.rec.wake.notify_one();
        }
        Ok(())
    }

    async fn update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
        _r: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.rec
            .error(format!("unexpected UpdateContainer {}", ctr.id));
        Ok(Vec::new())
    }

    async fn post_update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.rec
            .error(format!("unexpected PostUpdateContainer {}", ctr.id));
        Ok(())
    }

    async fn stop_container(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        // Waits for an update of this container that is in flight.
        self.rec.live.lock().await.ids.remove(&ctr.id);
        self.rec.ctr_event(pod, ctr, STOP);
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.rec.live.lock().await.ids.remove(&ctr.id);
        self.rec.ctr_event(pod, ctr, REMOVE);
        Ok(())
    }
}

/// Sends unsolicited updates of one or two live containers each time it is
/// woken, until the plugin's record is closed. It runs on its own task, so
/// the updates race with the lifecycle events.
async fn send_updates(rec: Arc<Rec>, handle: RuntimeHandle, mut rng: u64) {
    loop {
        rec.wake.notified().await;
        let mut live = rec.live.lock().await;
        if live.closed {
            return;
        }
        if live.ids.is_empty() {
            continue;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = live.ids.len();
        let picks: BTreeSet<usize> = [rng as usize % n, (rng >> 32) as usize % n].into();
        let updates: Vec<ContainerUpdate> = picks
            .into_iter()
            .filter_map(|i| live.ids.iter().nth(i))
            .map(|id| {
                let mut u = ContainerUpdate {
                    container_id: id.clone(),
                    ..Default::default()
                };
                u.set_linux_cpu_shares(2 + rng % 1000);
                u
            })
            .collect();
        match handle.update_containers(updates, Vec::new()).await {
            Ok(failed) if failed.is_empty() => live.sent += 1,
            Ok(failed) => rec.error(format!("updates failed: {failed:?}")),
            Err(e) => rec.error(format!("UpdateContainers failed: {e}")),
        }
    }
}

/// How much of the lifecycles a plugin must have seen.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Span {
    /// Connected for the whole run: every event.
    Whole,
    /// Joined mid-run and stayed: every event from its first one on.
    Joined,
    /// Disconnected mid-run: a contiguous stretch of events.
    Left,
}

/// One plugin running in the background.
struct Running {
    name: String,
    rec: Arc<Rec>,
    span: Span,
    stub: Option<JoinHandle<Result<(), nri_stub::Error>>>,
    updater: Option<JoinHandle<()>>,
}

/// Starts a plugin; it sends unsolicited updates if `updates`.
fn launch(
    name: &str,
    idx: &str,
    adjust: bool,
    updates: bool,
    span: Span,
    socket: &std::path::Path,
) -> Running {
    let full = format!("{idx}-{name}");
    let rec = Arc::new(Rec::new(full.clone()));
    let stub = nri_stub::Stub::builder(Soak {
        rec: rec.clone(),
        adjust,
    })
    .name(name)
    .index(idx)
    .socket_path(socket)
    .registration_timeout(WAIT)
    .build()
    .unwrap();
    let handle = stub.runtime_handle();
    let seed = 0x9e37_79b9_7f4a_7c15 ^ idx.parse::<u64>().unwrap();
    Running {
        name: full,
        rec: rec.clone(),
        span,
        stub: Some(tokio::spawn(async move { stub.run().await })),
        updater: updates.then(|| tokio::spawn(send_updates(rec, handle, seed))),
    }
}

impl Running {
    /// Stops the plugin's updates (waiting for one in flight).
    async fn stop_updates(&mut self) {
        self.rec.live.lock().await.closed = true;
        self.rec.wake.notify_one();
        if let Some(updater) = self.updater.take() {
            updater.await.unwrap();
        }
    }

    /// Stops its updates, then drops its connection.
    async fn disconnect(&mut self) {
        self.stop_updates().await;
        if let Some(stub) = self.stub.take() {
            stub.abort();
            let _ = stub.await;
        }
    }
}

/// Waits until the adaptation lists (`present`) or no longer lists a plugin.
async fn wait_listed(nri: &Adaptation, name: &str, present: bool) {
    let listed = || {
        nri.plugins()
            .iter()
            .any(|p| format!("{}-{}", p.index, p.name) == name)
    };
    tokio::time::timeout(WAIT, async {
        while listed() != present {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "plugin {name} not {} in time",
            if present { "added" } else { "removed" }
        )
    });
}

// ---------------------------------------------------------------------------
// Driving the lifecycles

struct Driver {
    nri: Adaptation,
    rt: Arc<SoakRuntime>,
    /// Annotations every created container must get (plugins connected for
    /// the whole run that adjust).
    tags: Vec<String>,
    /// Number of completed container lifecycles.
    done: watch::Sender<usize>,
    /// Set when every join and leave of the churn has happened.
    churned: watch::Receiver<bool>,
}

/// The container that stays running until the churn is over, so that every
/// late joiner's synchronization lists at least one container, whatever
/// the other lifecycles' pace (the checks against a synchronized state then
/// always have something to check).
const HELD: usize = 0;

/// Pods and the containers of each, `containers` in total.
fn plan(containers: usize) -> Vec<Range<usize>> {
    let mut pods = Vec::new();
    let mut next = 0;
    for size in POD_SIZES.iter().cycle() {
        if next == containers {
            break;
        }
        let end = (next + size).min(containers);
        pods.push(next..end);
        next = end;
    }
    pods
}

async fn join_all(mut set: JoinSet<()>) {
    while let Some(r) = set.join_next().await {
        if let Err(e) = r {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

async fn pod_lifecycle(d: Arc<Driver>, n: usize, ctrs: Range<usize>) {
    let pod = pod(&pod_id(n));
    let rt = &d.rt;
    {
        let _block = d.nri.block_plugin_sync().await;
        let req = RunPodSandboxRequest {
            pod: Some(pod.clone()),
        };
        let call = d.nri.run_pod_sandbox(req);
        rt.staged(|rt| rt.set_pod(&pod, 0), call)
            .await
            .expect("RunPodSandbox");
    }
    let mut set = JoinSet::new();
    for c in ctrs {
        set.spawn(ctr_lifecycle(d.clone(), pod.clone(), c));
    }
    join_all(set).await;
    let req = StopPodSandboxRequest {
        pod: Some(pod.clone()),
    };
    let call = d.nri.stop_pod_sandbox(req);
    rt.staged(|rt| rt.set_pod(&pod, 1), call)
        .await
        .expect("StopPodSandbox");
    let req = RemovePodSandboxRequest {
        pod: Some(pod.clone()),
    };
    let call = d.nri.remove_pod_sandbox(req);
    rt.staged(|rt| rt.remove_pod(&pod.id), call)
        .await
        .expect("RemovePodSandbox");
}

async fn ctr_lifecycle(d: Arc<Driver>, pod: PodSandbox, n: usize) {
    let ctr = container(&ctr_id(n), &pod.id);
    let (p, c) = (Some(pod.clone()), Some(ctr.clone()));
    let rt = &d.rt;
    {
        let _block = d.nri.block_plugin_sync().await;
        let req = CreateContainerRequest {
            pod: p.clone(),
            container: c.clone(),
        };
        let call = d.nri.create_container(req);
        let reply = rt
            .staged(|rt| rt.set_ctr(&ctr, 0), call)
            .await
            .expect("CreateContainer");
        let annotations = reply.adjust.map(|a| a.annotations).unwrap_or_default();
        for tag in &d.tags {
            assert_eq!(
                annotations.get(&format!("{TAG}{tag}")),
                Some(tag),
                "adjustment of {} lacks {tag}'s annotation: {annotations:?}",
                ctr.id
            );
        }
        assert!(reply.update.is_empty() && reply.evict.is_empty());
    }
    let req = PostCreateContainerRequest {
        pod: p.clone(),
        container: c.clone(),
    };
    let call = d.nri.post_create_container(req);
    rt.staged(|rt| rt.set_ctr(&ctr, 1), call)
        .await
        .expect("PostCreate");
    let req = StartContainerRequest {
        pod: p.clone(),
        container: c.clone(),
    };
    let call = d.nri.start_container(req);
    rt.staged(|rt| rt.set_ctr(&ctr, START), call)
        .await
        .expect("StartContainer");
    let req = PostStartContainerRequest {
        pod: p.clone(),
        container: c.clone(),
    };
    let call = d.nri.post_start_container(req);
    rt.staged(|rt| rt.set_ctr(&ctr, POST_START), call)
        .await
        .expect("PostStart");
    if n == HELD {
        let mut churned = d.churned.clone();
        churned.wait_for(|c| *c).await.expect("churn ended");
    }
    let req = StopContainerRequest {
        pod: p.clone(),
        container: c.clone(),
    };
    let call = d.nri.stop_container(req);
    let stopped = rt
        .staged(|rt| rt.set_ctr(&ctr, STOP), call)
        .await
        .expect("StopContainer");
    assert!(stopped.update.is_empty(), "{stopped:?}");
    let req = RemoveContainerRequest {
        pod: p,
        container: c,
    };
    let call = d.nri.remove_container(req);
    rt.staged(|rt| rt.remove_ctr(&ctr.id), call)
        .await
        .expect("RemoveContainer");
    d.done.send_modify(|n| {
        *n += 1;
        if *n % 1000 == 0 {
            eprintln!("{n} container lifecycles done");
        }
    });
}

/// What happens to the set of plugins as the run goes on.
enum Action {
    Join {
        name: &'static str,
        idx: &'static str,
        adjust: bool,
        leaves: bool,
    },
    Leave(&'static str),
}

/// (completed lifecycles, action): joins and leaves while lifecycles run.
fn churn(containers: usize) -> Vec<(usize, Action)> {
    use Action::*;
    let at = |percent: usize| containers * percent / 100;
    let join = |name, idx, adjust, leaves| Join {
        name,
        idx,
        adjust,
        leaves,
    };
    vec![
        (at(10), join("late-a", "05", true, false)),
        (at(20), join("late-b", "35", false, true)),
        (at(30), Leave("45-early")),
        (at(40), join("late-c", "65", true, false)),
        (at(55), Leave("35-late-b")),
        (at(60), join("late-d", "15", true, true)),
        (at(75), join("late-e", "95", false, false)),
        (at(85), Leave("15-late-d")),
    ]
}

/// Runs the plan of churn actions as the completed count passes each step.
async fn run_churn(
    cfg: Cfg,
    nri: Adaptation,
    socket: std::path::PathBuf,
    mut done: watch::Receiver<usize>,
    plugins: Arc<tokio::sync::Mutex<Vec<Running>>>,
    churned: watch::Sender<bool>,
) {
    for (threshold, action) in churn(cfg.containers) {
        done.wait_for(|n| *n >= threshold).await.unwrap();
        match action {
            Action::Join {
                name,
                idx,
                adjust,
                leaves,
            } => {
                let span = if leaves { Span::Left } else { Span::Joined };
                // Replayed events are history: a plugin acting on them could
                // update a container that is gone by then.
                let updates = !cfg.deliver;
                let p = launch(name, idx, adjust, updates, span, &socket);
                let full = p.name.clone();
                plugins.lock().await.push(p);
                wait_listed(&nri, &full, true).await;
            }
            Action::Leave(full) => {
                let mut list = plugins.lock().await;
                let p = list.iter_mut().find(|p| p.name == full).unwrap();
                p.disconnect().await;
                drop(list);
                // Removed at the end of the first call that finds it gone.
                wait_listed(&nri, full, false).await;
            }
        }
    }
    churned.send_replace(true);
}

// ---------------------------------------------------------------------------
// Checking what the plugins saw

/// What a plugin must have seen of one pod or container.
#[derive(Clone, Copy)]
struct Expect {
    /// Event names, in lifecycle order.
    events: &'static [&'static str],
    span: Span,
    /// The stage the plugin's synchronization showed, if listed.
    synced: Option<u8>,
    /// Run with `deliver_events_during_sync`.
    deliver: bool,
}

/// Whether `seen` (stages, as the plugin received them) is what `e` allows.
fn sequence_ok(seen: &[u8], e: Expect) -> bool {
    let last = e.events.len() as u8 - 1;
    let contiguous = seen.windows(2).all(|w| w[1] == w[0] + 1);
    let (Some(&first), Some(&end)) = (seen.first(), seen.last()) else {
        return false;
    };
    if !contiguous || e.synced.is_some_and(|s| first <= s && !e.deliver) {
        return false;
    }
    if e.span == Span::Whole {
        return first == 0 && end == last;
    }
    if !e.deliver {
        // Events overlapping the synchronization may be missed; once added,
        // a plugin sees every event until it leaves.
        return e.span == Span::Left || end == last;
    }
    // Every event after the synchronization, exactly once.
    let firsts: Vec<u8> = match (e.events.len(), e.synced) {
        // A listed container: the events beyond what its state (created,
        // running, stopped) shows. CreateContainer is never replayed.
        (6, Some(s)) => vec![match s {
            0 | 1 => 2,
            2 | 3 => 4,
            _ => 5,
        }],
        (6, None) => vec![0, 1],
        // A listed pod: the runtime records the stop before announcing
        // it; the stop is replayed if it was queued.
        (_, Some(s)) => vec![s.max(1), s + 1],
        (_, None) => vec![0],
    };
    firsts.contains(&first) && (e.span == Span::Left || end == last)
}

/// Checks one plugin's record; returns its errors.
fn check_plugin(p: &Running, cfg: Cfg, pods: usize) -> Vec<String> {
    let seen = p.rec.seen.lock().unwrap();
    let mut errors: Vec<String> = seen.errors.clone();
    let Some((synced_pods, synced_ctrs)) = &seen.synced else {
        return vec!["never synchronized".into()];
    };
    if p.span == Span::Whole {
        if seen.ctrs.len() != cfg.containers {
            let n = seen.ctrs.len();
            errors.push(format!("saw {n} containers of {}", cfg.containers));
        }
        if seen.pods.len() != pods {
            errors.push(format!("saw {} pods of {pods}", seen.pods.len()));
        }
    }
    let mut check = |what: &str,
                     events: &'static [&'static str],
                     all: &HashMap<String, Vec<u8>>,
                     synced: &HashMap<String, u8>| {
        for (id, stages) in all {
            let e = Expect {
                events,
                span: p.span,
                synced: synced.get(id).copied(),
                deliver: cfg.deliver,
            };
            if !sequence_ok(stages, e) {
                let names: Vec<&str> = stages.iter().map(|s| events[*s as usize]).collect();
                errors.push(format!(
                    "{what} {id}: saw {names:?} (synchronized at stage {:?})",
                    e.synced
                ));
            }
        }
    };
    check("container", &CTR_EVENTS, &seen.ctrs, synced_ctrs);
    check("pod", &POD_EVENTS, &seen.pods, synced_pods);
    errors
}

/// How a run is set up.
#[derive(Clone, Copy)]
struct Cfg {
    containers: usize,
    /// Build the adaptation with `deliver_events_during_sync`; the runtime
    /// then records each state change before announcing it, as that option
    /// expects.
    deliver: bool,
}

/// 10,000 lifecycles with the adaptation's default behaviour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_lifecycles_with_updates_and_plugin_churn() {
    let cfg = Cfg {
        containers: CONTAINERS,
        deliver: false,
    };
    let run = tokio::time::timeout(OVERALL, soak(cfg));
    if run.await.is_err() {
        panic!("soak run did not finish within {OVERALL:?}: deadlock or runaway slowness");
    }
}

/// With `deliver_events_during_sync`, plugins that join mid-run see every
/// event after their synchronization exactly once: the runtime records each
/// state before the call announcing it, so a listed container's state (or a
/// container's absence) may show events still to come, queued or live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_late_joiners_see_every_event_after_sync_exactly_once() {
    let cfg = Cfg {
        containers: DELIVER_CONTAINERS,
        deliver: true,
    };
    let run = tokio::time::timeout(OVERALL, soak(cfg));
    if run.await.is_err() {
        panic!("soak run did not finish within {OVERALL:?}: deadlock or runaway slowness");
    }
}

async fn soak(cfg: Cfg) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/nri.sock");
    let rt = Arc::new(SoakRuntime::new(cfg.deliver));
    let nri = Adaptation::builder("soak-runtime", "v1.0.0", rt.clone())
        .plugin_path(dir.path().join("plugins"))
        .plugin_config_path(dir.path().join("conf.d"))
        .socket_path(&socket)
        .registration_timeout(WAIT)
        // Generous: a plugin dropped for a timeout on a loaded machine would
        // fail the completeness checks.
        .request_timeout(WAIT)
        .deliver_events_during_sync(cfg.deliver)
        .build();
    nri.start().await.unwrap();

    // Eight plugins for the whole run (every other one adjusts), and one
    // that leaves mid-run.
    let mut running = Vec::new();
    let mut tags = Vec::new();
    for i in 0..PERMANENT {
        let (name, idx) = (format!("soak-{i}"), format!("{}", 10 * (i + 1)));
        let adjust = i % 2 == 0;
        if adjust {
            tags.push(format!("{idx}-{name}"));
        }
        running.push(launch(&name, &idx, adjust, true, Span::Whole, &socket));
    }
    running.push(launch("early", "45", true, true, Span::Left, &socket));
    for p in &running {
        wait_listed(&nri, &p.name, true).await;
    }

    let plan = Arc::new(plan(cfg.containers));
    let (done, done_rx) = watch::channel(0usize);
    let (churned, churned_rx) = watch::channel(false);
    let driver = Arc::new(Driver {
        nri: nri.clone(),
        rt: rt.clone(),
        tags,
        done,
        churned: churned_rx,
    });
    let plugins = Arc::new(tokio::sync::Mutex::new(running));
    let next = Arc::new(AtomicUsize::new(0));
    let mut work = JoinSet::new();
    for _ in 0..WORKERS {
        let (d, next, plan) = (driver.clone(), next.clone(), plan.clone());
        work.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(ctrs) = plan.get(n) else { return };
                pod_lifecycle(d.clone(), n, ctrs.clone()).await;
            }
        });
    }
    work.spawn(run_churn(
        cfg,
        nri.clone(),
        socket.clone(),
        done_rx.clone(),
        plugins.clone(),
        churned,
    ));

    // Wait for the work, failing if it stops making progress.
    let finished = join_all(work);
    tokio::pin!(finished);
    let mut progress = done_rx.clone();
    loop {
        tokio::select! {
            () = &mut finished => break,
            changed = tokio::time::timeout(STALL, progress.changed()) => {
                if changed.is_err() {
                    let listed: Vec<String> = nri
                        .plugins()
                        .iter()
                        .map(|p| format!("{}-{}", p.index, p.name))
                        .collect();
                    panic!(
                        "no container lifecycle completed for {STALL:?} ({} of {} done, \
                         plugins {listed:?}): the adaptation is deadlocked or stalled",
                        *progress.borrow(),
                        cfg.containers,
                    );
                }
            }
        }
    }
    assert_eq!(*done_rx.borrow(), cfg.containers);

    let mut plugins = plugins.lock().await;
    for p in plugins.iter_mut() {
        p.stop_updates().await;
    }

    // Nobody was dropped on the way: the listed plugins are exactly those
    // still connected, in index order.
    let mut expected: Vec<&str> = plugins
        .iter()
        .filter(|p| p.span != Span::Left)
        .map(|p| p.name.as_str())
        .collect();
    expected.sort();
    let listed: Vec<String> = nri
        .plugins()
        .iter()
        .map(|p| format!("{}-{}", p.index, p.name))
        .collect();
    assert_eq!(listed, expected);

    // The runtime was only asked to update containers that existed.
    let violations = rt.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(rt.updates.load(Ordering::Relaxed) > 0);
    {
        let world = rt.world.lock().unwrap();
        assert!(world.ctrs.is_empty() && world.pods.is_empty());
    }

    let mut failures = Vec::new();
    for p in plugins.iter() {
        let sent = p.rec.live.lock().await.sent;
        if p.span == Span::Whole && sent == 0 {
            failures.push(format!("{}: sent no unsolicited update", p.name));
        }
        for e in check_plugin(p, cfg, plan.len()).into_iter().take(10) {
            failures.push(format!("{}: {e}", p.rec.name));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");

    // The synchronization of some late joiner had containers in it, so the
    // checks against the synchronized state had something to check.
    let synced_ctrs: usize = plugins
        .iter()
        .filter(|p| p.span != Span::Whole)
        .filter_map(|p| {
            p.rec
                .seen
                .lock()
                .unwrap()
                .synced
                .as_ref()
                .map(|s| s.1.len())
        })
        .sum();
    assert!(synced_ctrs > 0, "no late plugin synchronized any container");

    // Stop sends Shutdown: the connected stubs' runs end cleanly.
    nri.stop().await;
    for p in plugins.iter_mut() {
        if let Some(stub) = p.stub.take() {
            let ended = tokio::time::timeout(WAIT, stub).await;
            let ended = ended.expect("stub did not end after stop").unwrap();
            assert!(ended.is_ok(), "{}: {ended:?}", p.name);
        }
    }
}
