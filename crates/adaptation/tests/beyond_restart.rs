//! Restarting plugins launched from the plugin directory
//! (`AdaptationBuilder::restart_plugins`).
//!
//! This test has its own `main` (`harness = false`): started by the
//! adaptation (with `NRI_PLUGIN_SOCKET` in its environment) the same binary
//! acts as the plugin. Its configuration is a directory: on every start it
//! appends its pid to `<dir>/starts`, and exits during Configure if
//! `<dir>/fail` exists. Its CreateContainer reply names its pid. Otherwise
//! the binary runs the scenarios below, each bounded by a timeout, with a
//! global subscriber capturing the logs.

mod capture;
mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{
    Adaptation, BoxError, Error, PluginKind, RestartPolicy, RuntimeHooks, Synchronizer,
};
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, Plugin};
use support::{bounded, container, pod, Env, Restarts};
use tokio::sync::Semaphore;

// ---- the plugin ----

struct Restartee;

#[nri_stub::plugin]
impl Plugin for Restartee {
    async fn configure(
        &self,
        _ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        if support::record_start(info).join("fail").exists() {
            std::process::exit(1);
        }
        Ok(EventMask::default())
    }

    async fn create_container(
        &self,
        _ctx: &Context,
        _p: &PodSandbox,
        _c: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("pid", std::process::id().to_string());
        Ok(adjust.into())
    }
}

fn plugin_main() {
    support::run_launched_plugin(Restartee);
}

// ---- the runtime side ----

/// A runtime without state whose synchronizations after the first wait for
/// a permit of `gate`.
struct Gated {
    syncs: AtomicUsize,
    gate: Semaphore,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Gated {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        if self.syncs.fetch_add(1, Ordering::SeqCst) > 0 {
            self.gate.acquire().await?.forget();
        }
        sync.synchronize(&[], &[]).await?;
        Ok(())
    }
}

struct Setup {
    env: Env,
    /// The plugin's state directory (its configuration).
    state: PathBuf,
    runtime: Arc<Gated>,
    restarts: Arc<Restarts>,
}

impl Setup {
    /// A plugin directory with this binary as `10-<name>`.
    fn new(name: &str) -> Setup {
        let env = Env::new();
        let state = env.install_self_as_plugin(name);
        Setup {
            env,
            state,
            runtime: Arc::new(Gated {
                syncs: AtomicUsize::new(0),
                gate: Semaphore::new(Semaphore::MAX_PERMITS),
            }),
            restarts: Arc::new(Restarts::default()),
        }
    }

    fn gate_syncs(&mut self) {
        self.runtime = Arc::new(Gated {
            syncs: AtomicUsize::new(0),
            gate: Semaphore::new(0),
        });
    }

    fn builder(&self) -> nri_adaptation::AdaptationBuilder {
        self.env
            .launched_builder(self.runtime.clone(), self.restarts.clone())
    }

    /// Pids of every start of the plugin so far.
    fn starts(&self) -> Vec<String> {
        support::starts(&self.state)
    }
}

fn policy(max_restarts: u32, initial_ms: u64, reset_after: Duration) -> RestartPolicy {
    RestartPolicy {
        max_restarts,
        initial_backoff: Duration::from_millis(initial_ms),
        max_backoff: Duration::from_millis(initial_ms * 2),
        reset_after,
    }
}

fn alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn kill(pid: &str) {
    let pid: i32 = pid.parse().unwrap();
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
}

/// The pid of the plugin that handled a CreateContainer.
async fn create(nri: &Adaptation, id: &str) -> Result<String, Error> {
    let reply = bounded(nri.create_container(CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container(id, "pod0")),
    }))
    .await?;
    Ok(reply
        .adjust
        .and_then(|a| a.annotations.get("pid").cloned())
        .unwrap_or_default())
}

/// Waits until a log line contains every one of `parts`.
async fn logged(logs: &capture::Captured, parts: &[&str]) {
    bounded(async {
        while logs.lines_with(parts).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

async fn wait_no_plugins(nri: &Adaptation) {
    bounded(async {
        while !nri.plugins().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

// ---- scenarios ----

/// A killed plugin is restarted, synchronized and gets events again; while
/// it is down a required plugin fails container creation; stop kills the
/// restarted process.
async fn killed_plugin_is_restarted_and_gets_events_again() {
    let mut s = Setup::new("restartee");
    s.gate_syncs();
    let nri = s
        .builder()
        .restart_plugins(policy(3, 20, Duration::from_secs(60)))
        .required_plugins(["restartee"])
        .build();
    let mut restarts = s.restarts.watch();
    bounded(nri.start()).await.unwrap();
    assert_eq!(nri.plugins().len(), 1);
    assert_eq!(nri.plugins()[0].kind, PluginKind::Launched);
    let first = create(&nri, "ctr0").await.unwrap();
    assert_eq!(s.starts(), std::slice::from_ref(&first));

    kill(&first);
    wait_no_plugins(&nri).await;
    // The relaunched plugin waits for its synchronization: until then the
    // required plugin is missing and creation fails closed.
    let err = create(&nri, "ctr1").await.unwrap_err();
    assert!(matches!(err, Error::RequiredPluginMissing { .. }), "{err}");
    s.runtime.gate.add_permits(1);
    bounded(restarts.wait_for(|n| *n == 1)).await.unwrap();

    let second = create(&nri, "ctr2").await.unwrap();
    assert_ne!(second, first);
    assert_eq!(s.starts(), [first.clone(), second.clone()]);
    assert!(!alive(&first), "killed plugin {first} not reaped");
    assert_eq!(nri.plugins()[0].kind, PluginKind::Launched);

    bounded(nri.stop()).await;
    assert!(!alive(&second), "restarted plugin {second} still exists");
    assert_eq!(s.starts().len(), 2);
}

/// Relaunches that keep failing are given up after `max_restarts`, with an
/// error naming the plugin; no process is left behind.
async fn failing_restarts_are_given_up(logs: &capture::Captured) {
    let s = Setup::new("giveup");
    let nri = s
        .builder()
        .restart_plugins(policy(2, 10, Duration::from_secs(60)))
        .build();
    bounded(nri.start()).await.unwrap();
    let first = create(&nri, "ctr0").await.unwrap();
    std::fs::write(s.state.join("fail"), "").unwrap();
    kill(&first);

    logged(logs, &["ERROR", "giving up restarting", "10-giveup"]).await;
    let starts = s.starts();
    // The first start, then two failed restarts.
    assert_eq!(starts.len(), 3, "{starts:?}");
    for pid in &starts {
        assert!(!alive(pid), "plugin process {pid} still exists");
    }
    assert_eq!(
        logs.lines_with(&["failed to restart pre-installed NRI plugin", "10-giveup"])
            .len(),
        2
    );
    assert!(nri.plugins().is_empty());
    assert!(create(&nri, "ctr1").await.unwrap().is_empty());
    bounded(nri.stop()).await;
}

/// A plugin that stays up `reset_after` starts counting again: with one
/// restart allowed, it is restarted after every death.
async fn uptime_resets_the_count(logs: &capture::Captured) {
    let s = Setup::new("resetting");
    let nri = s
        .builder()
        .restart_plugins(policy(1, 10, Duration::ZERO))
        .build();
    let mut restarts = s.restarts.watch();
    bounded(nri.start()).await.unwrap();
    let mut pid = create(&nri, "ctr0").await.unwrap();
    for round in 1..=2 {
        kill(&pid);
        bounded(restarts.wait_for(|n| *n == round)).await.unwrap();
        let next = create(&nri, &format!("ctr{round}")).await.unwrap();
        assert_ne!(next, pid);
        pid = next;
    }
    assert!(logs
        .lines_with(&["giving up restarting", "10-resetting"])
        .is_empty());
    bounded(nri.stop()).await;
    assert!(!alive(&pid));
}

/// Without a reset, the second death in a row exceeds one allowed restart.
async fn count_without_reset_is_kept(logs: &capture::Captured) {
    let s = Setup::new("counting");
    let nri = s
        .builder()
        .restart_plugins(policy(1, 10, Duration::from_secs(3600)))
        .build();
    let mut restarts = s.restarts.watch();
    bounded(nri.start()).await.unwrap();
    let first = create(&nri, "ctr0").await.unwrap();
    kill(&first);
    bounded(restarts.wait_for(|n| *n == 1)).await.unwrap();
    let second = create(&nri, "ctr1").await.unwrap();
    kill(&second);
    logged(logs, &["ERROR", "giving up restarting", "10-counting"]).await;
    assert_eq!(s.starts().len(), 2);
    assert_eq!(*restarts.borrow(), 1);
    bounded(nri.stop()).await;
}

/// Stopping NRI during a backoff ends it at once; nothing is relaunched.
async fn stop_during_backoff_relaunches_nothing(logs: &capture::Captured) {
    let s = Setup::new("stopping");
    // Longer than the bound on stop: stop must not wait for the backoff.
    let nri = s
        .builder()
        .restart_plugins(policy(3, 120_000, Duration::from_secs(60)))
        .build();
    bounded(nri.start()).await.unwrap();
    let first = create(&nri, "ctr0").await.unwrap();
    kill(&first);
    logged(
        logs,
        &["restarting pre-installed NRI plugin", "10-stopping"],
    )
    .await;
    bounded(nri.stop()).await;
    assert_eq!(s.starts(), std::slice::from_ref(&first));
    assert!(!alive(&first));
}

/// Without the option a dead plugin stays dead (the reference's behaviour).
async fn no_restart_by_default(logs: &capture::Captured) {
    let s = Setup::new("plain");
    let nri = s.builder().build();
    bounded(nri.start()).await.unwrap();
    let first = create(&nri, "ctr0").await.unwrap();
    kill(&first);
    wait_no_plugins(&nri).await;
    assert!(create(&nri, "ctr1").await.unwrap().is_empty());
    // Nothing is scheduled at all: no restart log, however long one waits.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(logs.lines_with(&["10-plain", "restart"]).is_empty());
    assert_eq!(s.starts(), [first]);
    bounded(nri.stop()).await;
}

fn main() {
    if std::env::var_os(nri_api::plugin::PLUGIN_SOCKET_ENV).is_some() {
        plugin_main();
        return;
    }
    let logs = capture::Captured::default();
    tracing::subscriber::set_global_default(logs.subscriber()).unwrap();
    support::run_scenarios(async {
        println!("test killed_plugin_is_restarted_and_gets_events_again ...");
        killed_plugin_is_restarted_and_gets_events_again().await;
        println!("test failing_restarts_are_given_up ...");
        failing_restarts_are_given_up(&logs).await;
        println!("test uptime_resets_the_count ...");
        uptime_resets_the_count(&logs).await;
        println!("test count_without_reset_is_kept ...");
        count_without_reset_is_kept(&logs).await;
        println!("test stop_during_backoff_relaunches_nothing ...");
        stop_during_backoff_relaunches_nothing(&logs).await;
        println!("test no_restart_by_default ...");
        no_restart_by_default(&logs).await;
    });
    println!("test result: ok. 6 passed");
}
