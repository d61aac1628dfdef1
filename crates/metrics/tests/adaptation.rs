//! Real figures after real plugin calls: an in-process adaptation on a
//! socket in a temporary directory, two nri-stub plugins connected to it,
//! and `NriMetrics` as the adaptation's metrics sink.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;
use nri_metrics::NriMetrics;
use nri_stub::{Context, CreateContainerResult, Plugin};

const WAIT: Duration = Duration::from_secs(20);

/// A runtime with two pods and three containers.
struct Runtime;

#[nri_adaptation::async_trait]
impl RuntimeHooks for Runtime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let pods = vec![pod("pod0"), pod("pod1")];
        let ctrs = vec![ctr("ctr0"), ctr("ctr1"), ctr("ctr2")];
        sync.synchronize(&pods, &ctrs).await?;
        Ok(())
    }
}

fn pod(id: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        ..Default::default()
    }
}

fn ctr(id: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "pod0".into(),
        name: id.into(),
        ..Default::default()
    }
}

/// Adjusts env and memory at creation, asks for a CPU update of another
/// container on update, fails StopContainer.
struct Adjuster;

#[nri_stub::plugin]
impl Plugin for Adjuster {
    async fn synchronize(
        &self,
        _c: &Context,
        _pods: &[PodSandbox],
        _ctrs: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let mut u = ContainerUpdate {
            container_id: "ctr1".into(),
            ..Default::default()
        };
        u.set_linux_memory_limit(1 << 30);
        Ok(vec![u])
    }
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_env("SEEN", "1");
        adjust.set_linux_memory_limit(1 << 28);
        Ok(adjust.into())
    }
    async fn update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
        _r: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let mut u = ContainerUpdate {
            container_id: "ctr2".into(),
            ..Default::default()
        };
        u.set_linux_cpu_shares(42);
        Ok(vec![u])
    }
    async fn stop_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        Err("no stopping today".into())
    }
}

/// Never answers CreateContainer: the adaptation times it out and drops it.
struct Hangs(Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>);

#[nri_stub::plugin]
impl Plugin for Hangs {
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        if let Some(tx) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(());
        }
        std::future::pending().await
    }
}

fn run_stub<P: nri_stub::Plugin>(
    plugin: P,
    name: &str,
    idx: &str,
    socket: &std::path::Path,
) -> tokio::task::JoinHandle<Result<(), nri_stub::Error>> {
    let stub = nri_interop::fixtures::stub_on(plugin, name, idx, socket);
    tokio::spawn(async move { stub.run().await })
}

/// Awaits `fut`, failing the test after [`WAIT`].
async fn bounded<F: std::future::Future>(fut: F) -> F::Output {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("operation did not finish in time")
}

async fn wait_plugins(nri: &Adaptation, n: usize) {
    tokio::time::timeout(WAIT, async {
        while nri.plugins().len() != n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("plugins did not connect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_follow_real_plugin_calls() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let metrics = Arc::new(NriMetrics::new());
    let nri = Adaptation::builder("test-runtime", "v1", Arc::new(Runtime))
        .plugin_path(dir.path().join("plugins"))
        .plugin_config_path(dir.path().join("conf.d"))
        .socket_path(&socket)
        .request_timeout(Duration::from_millis(500))
        .metrics(metrics.clone())
        .build();
    bounded(nri.start()).await.unwrap();

    let _a = run_stub(Adjuster, "adjuster", "10", &socket);
    wait_plugins(&nri, 1).await;
    let (tx, hung) = tokio::sync::oneshot::channel();
    let _h = run_stub(
        Hangs(Arc::new(Mutex::new(Some(tx)))),
        "hangs",
        "20",
        &socket,
    );
    wait_plugins(&nri, 2).await;

    assert_eq!(metrics.registrations("10-adjuster"), 1);
    assert_eq!(metrics.registrations("20-hangs"), 1);
    assert_eq!(metrics.active_plugins(), 2);
    let sync = metrics.synchronizations("10-adjuster", "success");
    assert_eq!(sync.count, 1);
    assert!(sync.sum_seconds > 0.0);
    assert_eq!(metrics.synchronized_objects("10-adjuster", "pod"), 2);
    assert_eq!(metrics.synchronized_objects("10-adjuster", "container"), 3);
    assert_eq!(metrics.synchronize_messages("10-adjuster"), 1);
    assert_eq!(
        metrics.invocations("10-adjuster", "Synchronize", "success", ""),
        1
    );
    assert_eq!(
        metrics.update_fields("10-adjuster", "Synchronize", "resources.memory"),
        1
    );
    assert_eq!(
        metrics.adjustments("10-adjuster", "Synchronize", "update"),
        1
    );

    // CreateContainer: the adjuster answers, the other plugin times out
    // and is dropped.
    let created = bounded(nri.create_container(CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
    }))
    .await;
    hung.await.unwrap();
    assert!(created.is_ok(), "{created:?}");
    assert_eq!(
        metrics.invocations("10-adjuster", "CreateContainer", "success", ""),
        1
    );
    assert_eq!(
        metrics.invocations("20-hangs", "CreateContainer", "error", "deadline_exceeded"),
        1
    );
    assert_eq!(metrics.timeouts("20-hangs", "CreateContainer"), 1);
    let slow = metrics.latency("20-hangs", "CreateContainer");
    assert_eq!(slow.count, 1);
    assert!(slow.sum_seconds >= 0.5, "{slow:?}");
    let fast = metrics.latency("10-adjuster", "CreateContainer");
    assert_eq!(fast.count, 1);
    assert!(fast.sum_seconds < slow.sum_seconds, "{fast:?} {slow:?}");
    assert_eq!(
        metrics.adjustment_fields("10-adjuster", "CreateContainer", "env"),
        1
    );
    assert_eq!(
        metrics.adjustment_fields("10-adjuster", "CreateContainer", "resources.memory"),
        1
    );
    assert_eq!(
        metrics.adjustment_fields("10-adjuster", "CreateContainer", "mounts"),
        0
    );

    // The dropped plugin leaves the list before the next event.
    let updated = bounded(nri.update_container(UpdateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
        linux_resources: None,
    }))
    .await
    .unwrap();
    assert_eq!(updated.update.len(), 1);
    assert_eq!(metrics.drops("20-hangs"), 1);
    assert_eq!(metrics.active_plugins(), 1);
    assert_eq!(
        metrics.update_fields("10-adjuster", "UpdateContainer", "resources.cpu"),
        1
    );
    assert_eq!(
        metrics.adjustments("10-adjuster", "UpdateContainer", "update"),
        1
    );

    // A handler error: status Unknown, as Go's ttRPC sends it.
    let stopped = bounded(nri.stop_container(StopContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr("ctr0")),
    }))
    .await;
    assert!(stopped.is_err());
    assert_eq!(
        metrics.invocations("10-adjuster", "StopContainer", "error", "unknown"),
        1
    );
    assert_eq!(metrics.drops("10-adjuster"), 0);

    // The same figures in the exposition.
    let text = metrics.encode();
    for line in [
        r#"nri_plugin_invocations_total{plugin="20-hangs",operation="CreateContainer",status="error",error="deadline_exceeded"} 1"#,
        r#"nri_plugin_invocations_total{plugin="10-adjuster",operation="StopContainer",status="error",error="unknown"} 1"#,
        r#"nri_plugin_latency_seconds_count{plugin="10-adjuster",operation="CreateContainer"} 1"#,
        r#"nri_plugin_timeouts_total{plugin="20-hangs",operation="CreateContainer"} 1"#,
        r#"nri_plugin_drops_total{plugin="20-hangs"} 1"#,
        "nri_active_plugins_total 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    bounded(nri.stop()).await;
}

/// What one plugin call costs in the sink: the hooks the adaptation calls
/// for a CreateContainer (invocation, latency, adjustments with an
/// adjusted field). A measurement, not a check: run it optimized,
/// `cargo test --release -p nri-metrics --test adaptation -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run with --release --ignored --nocapture"]
fn cost_per_plugin_call() {
    use nri_adaptation::Metrics;
    let m = NriMetrics::new();
    let mut adjust = ContainerAdjustment::default();
    adjust.add_env("A", "1");
    let plugins: Vec<String> = (0..8).map(|i| format!("{i:02}-plugin")).collect();
    let n = 200_000;
    let start = std::time::Instant::now();
    for i in 0..n {
        let p = &plugins[i % plugins.len()];
        m.record_plugin_latency(p, "CreateContainer", Duration::from_micros(80));
        m.record_plugin_invocation(p, "CreateContainer", None);
        let asked = nri_adaptation::AskedFor {
            adjust: Some(&adjust),
            ..Default::default()
        };
        m.record_plugin_adjustments(p, "CreateContainer", asked);
    }
    let per_call = start.elapsed() / n as u32;
    assert_eq!(
        m.latency("00-plugin", "CreateContainer").count,
        n as u64 / 8
    );
    println!("nri-metrics: {per_call:?} per plugin call (invocation, latency, adjustment)");
}
