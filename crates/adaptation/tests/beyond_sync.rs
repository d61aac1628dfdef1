//! More options beyond the reference (docs/beyond-the-reference.md): events
//! during a plugin's synchronization, timeout policies of validators, and
//! request timeouts asked for by plugins. Each with its default (the
//! reference's behaviour) and with it set.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_adaptation::{
    Adaptation, AdaptationBuilder, BoxError, Error, RuntimeHooks, Synchronizer, TimeoutPolicy,
};
use nri_api::{
    Container, ContainerEviction, ContainerState, ContainerUpdate, CreateContainerRequest,
    PodSandbox, PostCreateContainerRequest, PostStartContainerRequest, PostUpdateContainerRequest,
    RemoveContainerRequest, RunPodSandboxRequest, StartContainerRequest, StopContainerRequest,
    StopPodSandboxRequest, ValidateContainerAdjustmentRequest,
};
use nri_stub::{Context, CreateContainerResult, Plugin};
use support::*;
use tokio::sync::{mpsc, Semaphore};

// ---------------------------------------------------------------------------
// Events during synchronization.
// ---------------------------------------------------------------------------

/// A runtime whose state the test changes as it sends events, and whose
/// synchronization hook, once armed, waits for the test before listing.
struct Gated {
    pods: Mutex<BTreeMap<String, PodSandbox>>,
    containers: Mutex<BTreeMap<String, Container>>,
    armed: AtomicBool,
    /// Told when an armed hook is entered.
    entered: mpsc::UnboundedSender<()>,
    /// Lets an armed hook list the state.
    gate: Semaphore,
    /// Unsolicited updates: plugin and container ids.
    updates: Mutex<Vec<(String, Vec<String>)>>,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Gated {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        if self.armed.load(Ordering::SeqCst) {
            let _ = self.entered.send(());
            self.gate.acquire().await?.forget();
        }
        let pods: Vec<_> = self.pods.lock().unwrap().values().cloned().collect();
        let ctrs: Vec<_> = self.containers.lock().unwrap().values().cloned().collect();
        sync.synchronize(&pods, &ctrs).await?;
        Ok(())
    }

    async fn update_containers(
        &self,
        plugin: &str,
        updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        let ids = updates.iter().map(|u| u.container_id.clone()).collect();
        self.updates.lock().unwrap().push((plugin.to_string(), ids));
        Ok(Vec::new())
    }
}

/// Plays the runtime: sends each event and changes the state around it as
/// a runtime does.
struct Script {
    nri: Adaptation,
    rt: Arc<Gated>,
}

impl Script {
    fn pod(&self, id: &str) -> PodSandbox {
        self.rt.pods.lock().unwrap().get(id).cloned().unwrap()
    }

    fn ctr(&self, id: &str) -> Container {
        self.rt.containers.lock().unwrap().get(id).cloned().unwrap()
    }

    fn set_state(&self, id: &str, state: ContainerState) -> Container {
        let mut ctrs = self.rt.containers.lock().unwrap();
        let c = ctrs.get_mut(id).unwrap();
        c.state = state as i32;
        c.clone()
    }

    async fn run_pod(&self, id: &str) {
        self.rt.pods.lock().unwrap().insert(id.into(), pod(id));
        let req = RunPodSandboxRequest { pod: Some(pod(id)) };
        bounded(Box::pin(self.nri.run_pod_sandbox(req)))
            .await
            .unwrap();
    }

    async fn stop_pod(&self, id: &str) {
        let req = StopPodSandboxRequest {
            pod: Some(self.pod(id)),
        };
        bounded(Box::pin(self.nri.stop_pod_sandbox(req)))
            .await
            .unwrap();
    }

    /// CreateContainer only; the container is not in the state yet.
    async fn begin_create(&self, id: &str, pod_id: &str) {
        let req = CreateContainerRequest {
            pod: Some(self.pod(pod_id)),
            container: Some(container(id, pod_id)),
        };
        let reply = bounded(Box::pin(self.nri.create_container(req)))
            .await
            .unwrap();
        // Plugins that were synchronizing adjusted nothing.
        let adjust = reply.adjust.unwrap_or_default();
        assert!(adjust.annotations.is_empty(), "{adjust:?}");
    }

    /// The container is in the state (created), then PostCreateContainer.
    async fn finish_create(&self, id: &str, pod_id: &str) {
        let mut c = container(id, pod_id);
        c.state = ContainerState::ContainerCreated as i32;
        self.rt
            .containers
            .lock()
            .unwrap()
            .insert(id.into(), c.clone());
        let req = PostCreateContainerRequest {
            pod: Some(self.pod(pod_id)),
            container: Some(c),
        };
        bounded(Box::pin(self.nri.post_create_container(req)))
            .await
            .unwrap();
    }

    async fn create(&self, id: &str, pod_id: &str) {
        self.begin_create(id, pod_id).await;
        self.finish_create(id, pod_id).await;
    }

    async fn start(&self, id: &str) {
        let c = self.ctr(id);
        let pod = Some(self.pod(&c.pod_sandbox_id));
        let req = StartContainerRequest {
            pod: pod.clone(),
            container: Some(c),
        };
        bounded(Box::pin(self.nri.start_container(req)))
            .await
            .unwrap();
        let c = self.set_state(id, ContainerState::ContainerRunning);
        let req = PostStartContainerRequest {
            pod,
            container: Some(c),
        };
        bounded(Box::pin(self.nri.post_start_container(req)))
            .await
            .unwrap();
    }

    async fn post_update(&self, id: &str) {
        let c = self.ctr(id);
        let req = PostUpdateContainerRequest {
            pod: Some(self.pod(&c.pod_sandbox_id)),
            container: Some(c),
        };
        bounded(Box::pin(self.nri.post_update_container(req)))
            .await
            .unwrap();
    }

    async fn stop(&self, id: &str) {
        let c = self.set_state(id, ContainerState::ContainerStopped);
        let req = StopContainerRequest {
            pod: Some(self.pod(&c.pod_sandbox_id)),
            container: Some(c),
        };
        bounded(Box::pin(self.nri.stop_container(req)))
            .await
            .unwrap();
    }

    async fn remove(&self, id: &str) {
        let c = self.rt.containers.lock().unwrap().remove(id).unwrap();
        let req = RemoveContainerRequest {
            pod: Some(self.pod(&c.pod_sandbox_id)),
            container: Some(c),
        };
        bounded(Box::pin(self.nri.remove_container(req)))
            .await
            .unwrap();
    }
}

/// Logs every event it gets; its Synchronize waits for the test.
struct Recorder {
    log: Log,
    synchronizing: mpsc::UnboundedSender<()>,
    release: Arc<Semaphore>,
}

fn state_name(c: &Container) -> &'static str {
    match ContainerState::try_from(c.state) {
        Ok(ContainerState::ContainerCreated) => "created",
        Ok(ContainerState::ContainerRunning) => "running",
        Ok(ContainerState::ContainerStopped) => "stopped",
        _ => "other",
    }
}

#[nri_stub::plugin]
impl Plugin for Recorder {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let pods: Vec<_> = pods.iter().map(|p| p.id.as_str()).collect();
        let ctrs: Vec<_> = containers
            .iter()
            .map(|c| format!("{}:{}", c.id, state_name(c)))
            .collect();
        self.log.push(format!(
            "Synchronize pods={} ctrs={}",
            pods.join(","),
            ctrs.join(",")
        ));
        let _ = self.synchronizing.send(());
        self.release.acquire().await?.forget();
        Ok(Vec::new())
    }

    async fn run_pod_sandbox(&self, _: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("StopPodSandbox {}", pod.id));
        Ok(())
    }

    async fn create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.log.push(format!("CreateContainer {}", ctr.id));
        let mut adjust = nri_api::ContainerAdjustment::default();
        adjust.add_annotation("recorder", "seen");
        Ok(adjust.into())
    }

    async fn post_create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("PostCreateContainer {}", ctr.id));
        Ok(())
    }

    async fn start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("StartContainer {}", ctr.id));
        Ok(())
    }

    async fn post_start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("PostStartContainer {}", ctr.id));
        Ok(())
    }

    async fn post_update_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("PostUpdateContainer {}", ctr.id));
        Ok(())
    }

    /// Stopping `c1` gives its CPU to `c2`.
    async fn stop_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.log.push(format!("StopContainer {}", ctr.id));
        if ctr.id != "c1" {
            return Ok(Vec::new());
        }
        Ok(vec![ContainerUpdate {
            container_id: "c2".into(),
            ..Default::default()
        }])
    }

    async fn remove_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("RemoveContainer {}", ctr.id));
        Ok(())
    }
}

/// Runs the scenario: a plugin connects while `pod0` with the running `c0`
/// exists; events happen before the runtime lists its state (phase A),
/// while the plugin handles Synchronize (phase B), and after the plugin
/// was added. Returns the plugin's log and the unsolicited updates.
async fn sync_scenario(deliver: bool) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let env = Env::new();
    let (entered_tx, mut entered) = mpsc::unbounded_channel();
    let rt = Arc::new(Gated {
        pods: Mutex::default(),
        containers: Mutex::default(),
        armed: AtomicBool::new(false),
        entered: entered_tx,
        gate: Semaphore::new(0),
        updates: Mutex::default(),
    });
    let builder: AdaptationBuilder = Adaptation::builder("test-runtime", "v1.0.0", rt.clone())
        .plugin_path(env.plugin_dir())
        .plugin_config_path(env.conf_dir())
        .socket_path(env.socket())
        // Long enough for the test to act while Synchronize is pending.
        .request_timeout(Duration::from_secs(15))
        .deliver_events_during_sync(deliver);
    let nri = builder.build();
    bounded(Box::pin(nri.start())).await.unwrap();
    let s = Script {
        nri: nri.clone(),
        rt: rt.clone(),
    };
    s.run_pod("pod0").await;
    s.create("c0", "pod0").await;
    s.start("c0").await;

    rt.armed.store(true, Ordering::SeqCst);
    let log = Log::default();
    let (sync_tx, mut synchronizing) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let _stub = run_stub(
        Recorder {
            log: log.clone(),
            synchronizing: sync_tx,
            release: release.clone(),
        },
        "recorder",
        "10",
        &env.socket(),
    );

    // Phase A: the plugin is being synchronized, the runtime has not listed
    // its state yet. All of this shows in the listing, except `c4`, which
    // the runtime has not stored yet.
    bounded(entered.recv()).await.unwrap();
    s.create("c1", "pod0").await;
    s.start("c1").await;
    s.run_pod("pod1").await;
    s.stop("c0").await;
    s.begin_create("c4", "pod1").await;
    rt.gate.add_permits(1);

    // Phase B: the plugin handles its Synchronize.
    bounded(synchronizing.recv()).await.unwrap();
    s.finish_create("c4", "pod1").await;
    s.create("c2", "pod1").await;
    s.start("c2").await;
    s.stop("c1").await;
    s.remove("c0").await;
    s.post_update("c2").await;
    s.create("c3", "pod1").await;
    s.remove("c3").await;
    release.add_permits(1);

    // After the plugin was added: live events, some of containers the
    // plugin knows only from the replay (c2, c4).
    wait_plugins(&nri, &["10-recorder"]).await;
    s.stop_pod("pod0").await;
    s.stop("c2").await;
    s.remove("c2").await;
    s.stop("c4").await;
    let req = CreateContainerRequest {
        pod: Some(s.pod("pod1")),
        container: Some(container("c5", "pod1")),
    };
    let reply = bounded(Box::pin(nri.create_container(req))).await.unwrap();
    assert_eq!(reply.adjust.unwrap().annotations["recorder"], "seen");

    nri.stop().await;
    let updates = rt.updates.lock().unwrap().clone();
    (log.get(), updates)
}

#[tokio::test]
async fn events_during_sync_are_delivered_once_in_order_after_it() {
    let (log, updates) = Box::pin(sync_scenario(true)).await;
    assert_eq!(
        log,
        [
            "Synchronize pods=pod0,pod1 ctrs=c0:stopped,c1:running",
            // Phase A: only what the listing did not show; c4 was not
            // stored yet, so the plugin learns of it by its CreateContainer.
            "CreateContainer c4",
            "PostCreateContainer c4",
            // Phase B: every container the listing does not show reaches
            // the plugin by its CreateContainer first.
            "CreateContainer c2",
            "PostCreateContainer c2",
            "StartContainer c2",
            "PostStartContainer c2",
            "StopContainer c1",
            "RemoveContainer c0",
            "PostUpdateContainer c2",
            "CreateContainer c3",
            "PostCreateContainer c3",
            "RemoveContainer c3",
            // Live.
            "StopPodSandbox pod0",
            "StopContainer c2",
            "RemoveContainer c2",
            "StopContainer c4",
            "CreateContainer c5",
        ]
    );
    // The updates of the replayed StopContainer went the unsolicited way.
    assert_eq!(
        updates,
        [("10-recorder".to_string(), vec!["c2".to_string()])]
    );
}

#[tokio::test]
async fn events_during_sync_are_not_delivered_by_default() {
    let (log, updates) = Box::pin(sync_scenario(false)).await;
    assert_eq!(
        log,
        [
            "Synchronize pods=pod0,pod1 ctrs=c0:stopped,c1:running",
            "StopPodSandbox pod0",
            // Nothing of c2 and c4, created while the plugin synchronized
            // and not listed: the plugin never learned of them.
            "CreateContainer c5",
        ]
    );
    assert!(updates.is_empty());
}

// ---------------------------------------------------------------------------
// Timeout policies of validators.
// ---------------------------------------------------------------------------

/// Validates slowly containers named `slow*`, rejects `bad*`.
struct Validator;

#[nri_stub::plugin]
impl Plugin for Validator {
    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        let name = req.container.as_ref().map_or("", |c| c.id.as_str());
        if name.starts_with("slow") {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        if name.starts_with("bad") {
            return Err("bad container".into());
        }
        Ok(())
    }
}

/// An adaptation with a 300 ms request timeout and `10-validator`.
async fn with_validator(env: &Env, policy: Option<TimeoutPolicy>) -> Adaptation {
    let mut b = env.builder().request_timeout(Duration::from_millis(300));
    if let Some(policy) = policy {
        b = b.plugin_timeout_policy("validator", policy);
    }
    let nri = b.build();
    bounded(Box::pin(nri.start())).await.unwrap();
    let _stub = run_stub(Validator, "validator", "10", &env.socket());
    wait_plugins(&nri, &["10-validator"]).await;
    nri
}

fn create(id: &str) -> CreateContainerRequest {
    CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container(id, "pod0")),
    }
}

fn assert_validator_timeout(err: &Error) {
    assert!(
        matches!(err, Error::ValidatorFailed { plugin, .. } if plugin == "10-validator"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("validator plugin 10-validator failed: "),
        "{err}"
    );
}

#[tokio::test]
async fn validator_timeout_closes_it_and_fails_the_creation_by_default() {
    let env = Env::new();
    let nri = with_validator(&env, None).await;
    let err = bounded(Box::pin(nri.create_container(create("slow0"))))
        .await
        .unwrap_err();
    assert_validator_timeout(&err);
    assert!(nri.plugins().is_empty());
    nri.stop().await;
}

#[tokio::test]
async fn validator_timeout_with_fail_call_keeps_the_validator() {
    let env = Env::new();
    let nri = with_validator(&env, Some(TimeoutPolicy::FailCall)).await;
    let err = bounded(Box::pin(nri.create_container(create("slow0"))))
        .await
        .unwrap_err();
    assert_validator_timeout(&err);
    assert_eq!(nri.plugins().len(), 1);
    // Still validating.
    let err = bounded(Box::pin(nri.create_container(create("bad0"))))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ValidationRejected { .. }), "{err}");
    bounded(Box::pin(nri.create_container(create("ctr0"))))
        .await
        .unwrap();
    nri.stop().await;
}

#[tokio::test]
async fn validator_timeout_with_skip_call_skips_its_verdict() {
    let env = Env::new();
    let nri = with_validator(&env, Some(TimeoutPolicy::SkipCall)).await;
    bounded(Box::pin(nri.create_container(create("slow0"))))
        .await
        .unwrap();
    assert_eq!(nri.plugins().len(), 1);
    // Only timeouts are skipped: a rejection still counts.
    let err = bounded(Box::pin(nri.create_container(create("bad0"))))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ValidationRejected { plugin, reason }
            if plugin == "10-validator" && reason.contains("bad container")),
        "{err}"
    );
    nri.stop().await;
}

// ---------------------------------------------------------------------------
// Request timeouts asked for by plugins.
// ---------------------------------------------------------------------------

/// Sleeps in StartContainer for the milliseconds in the container's id
/// (`slow-<ms>`), then logs it.
struct Sleeper {
    log: Log,
}

#[nri_stub::plugin]
impl Plugin for Sleeper {
    async fn start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        if let Some(ms) = ctr.id.strip_prefix("slow-") {
            tokio::time::sleep(Duration::from_millis(ms.parse()?)).await;
        }
        self.log.push(ctr.id.clone());
        Ok(())
    }
}

/// An adaptation with a 500 ms request timeout, timeouts failing the call,
/// and `10-sleeper` asking for `asked`.
async fn with_sleeper(env: &Env, max: Option<Duration>, asked: Duration, log: &Log) -> Adaptation {
    let mut b = env
        .builder()
        .request_timeout(Duration::from_millis(500))
        .timeout_policy(TimeoutPolicy::FailCall);
    if let Some(max) = max {
        b = b.max_plugin_requested_timeout(max);
    }
    let nri = b.build();
    bounded(Box::pin(nri.start())).await.unwrap();
    let stub = nri_stub::Stub::builder(Sleeper { log: log.clone() })
        .name("sleeper")
        .index("10")
        .socket_path(env.socket())
        .request_timeout(asked)
        .build()
        .unwrap();
    tokio::spawn(async move { stub.run().await });
    wait_plugins(&nri, &["10-sleeper"]).await;
    nri
}

fn start(id: &str) -> StartContainerRequest {
    StartContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container(id, "pod0")),
    }
}

fn assert_timed_out(err: &Error) {
    assert!(
        matches!(err, Error::PluginFailed { plugin, .. } if plugin == "10-sleeper"),
        "{err}"
    );
}

#[tokio::test]
async fn requested_timeout_is_granted_up_to_the_maximum() {
    let env = Env::new();
    let log = Log::default();
    let nri = with_sleeper(
        &env,
        Some(Duration::from_secs(2)),
        Duration::from_secs(3),
        &log,
    )
    .await;
    // Longer than the runtime's 500 ms, within the granted 2 s.
    bounded(Box::pin(nri.start_container(start("slow-1500"))))
        .await
        .unwrap();
    assert_eq!(log.get(), ["slow-1500"]);
    // The 3 s asked for were clamped to 2 s.
    let err = bounded(Box::pin(nri.start_container(start("slow-2800"))))
        .await
        .unwrap_err();
    assert_timed_out(&err);
    nri.stop().await;
}

#[tokio::test]
async fn requested_timeout_is_ignored_by_default() {
    let env = Env::new();
    let log = Log::default();
    let nri = with_sleeper(&env, None, Duration::from_secs(3), &log).await;
    let err = bounded(Box::pin(nri.start_container(start("slow-1500"))))
        .await
        .unwrap_err();
    assert_timed_out(&err);
    bounded(Box::pin(nri.start_container(start("quick"))))
        .await
        .unwrap();
    nri.stop().await;
}
