//! Nothing a plugin asks for is dropped silently: each request that has no
//! effect is logged with the plugin's name (and the container), and where
//! the protocol allows it the plugin is told (the `failed` list of
//! UpdateContainers).
//!
//! Logs are captured per test with a thread-local subscriber; the tests run
//! on a current-thread runtime, so every task they spawn logs into it.

mod capture;
mod support;

use std::sync::{Arc, Mutex};

use capture::Captured;
use nri_adaptation::{
    Adaptation, BoxError, CreateResult, FailedRequests, RuntimeHooks, StopResult, Synchronizer,
};
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, Plugin, RuntimeHandle};
use support::*;

/// A plugin that only hands out its runtime handle.
struct Asker(Arc<Mutex<Option<RuntimeHandle>>>);

#[nri_stub::plugin]
impl Plugin for Asker {
    async fn configure(
        &self,
        ctx: &Context,
        _info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        *self.0.lock().unwrap() = Some(ctx.runtime_handle().clone());
        Ok(EventMask::default())
    }

    async fn run_pod_sandbox(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
}

/// Starts `nri`'s plugin `10-asker` and returns its runtime handle.
async fn asker(nri: &Adaptation, env: &Env) -> RuntimeHandle {
    let slot = Arc::new(Mutex::new(None));
    let _task = run_stub(Asker(slot.clone()), "asker", "10", &env.socket());
    wait_plugins(nri, &["10-asker"]).await;
    let handle = slot.lock().unwrap().clone();
    handle.unwrap()
}

fn update(id: &str, ignore_failure: bool) -> ContainerUpdate {
    let mut u = ContainerUpdate::for_container(id);
    u.set_linux_cpu_shares(10);
    if ignore_failure {
        u.set_ignore_failure();
    }
    u
}

fn eviction(id: &str) -> ContainerEviction {
    ContainerEviction {
        container_id: id.into(),
        reason: "pressure".into(),
    }
}

fn ids(updates: &[ContainerUpdate]) -> Vec<&str> {
    updates.iter().map(|u| u.container_id.as_str()).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn unsolicited_failures_are_returned_and_logged() {
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.subscriber());
    let env = Env::new();
    let nri = env.start().await;
    let handle = asker(&nri, &env).await;

    let failed = bounded(handle.update_containers(
        vec![
            update("ctr-ok", false),
            update(FAILING, false),
            update("", false),
            update("", true),
        ],
        vec![eviction("victim"), eviction("")],
    ))
    .await
    .unwrap();
    // The runtime's failures, then the update without id (the one with
    // ignore_failure is not reported, as a runtime does not report it).
    assert_eq!(ids(&failed), [FAILING, ""]);

    // Nothing without a container id reaches the runtime.
    let calls = env.runtime.updates.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    let (plugin, updates, evictions) = &calls[0];
    assert_eq!(plugin, "10-asker");
    assert_eq!(ids(updates), ["ctr-ok", FAILING]);
    assert_eq!(evictions, &[eviction("victim")]);

    let failed_line = logs.lines_with(&[
        "WARN",
        "10-asker",
        FAILING,
        "runtime failed to apply the container update",
    ]);
    assert_eq!(failed_line.len(), 1, "{}", logs.text());
    assert!(logs
        .lines_with(&["runtime failed to apply the container update", "ctr-ok"])
        .is_empty());
    assert_eq!(
        logs.lines_with(&[
            "WARN",
            "10-asker",
            "container update without a container id"
        ])
        .len(),
        2,
        "{}",
        logs.text()
    );
    assert_eq!(
        logs.lines_with(&[
            "WARN",
            "10-asker",
            "container eviction without a container id"
        ])
        .len(),
        1,
        "{}",
        logs.text()
    );
    bounded(nri.stop()).await;
}

/// A runtime that can evict nothing, and fails requests for `broken`.
struct NoEvictions;

#[nri_adaptation::async_trait]
impl RuntimeHooks for NoEvictions {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        sync.synchronize(&[], &[]).await?;
        Ok(())
    }

    async fn apply_plugin_requests(
        &self,
        _plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<FailedRequests, BoxError> {
        if updates.iter().any(|u| u.container_id == "broken") {
            return Err("runtime is broken".into());
        }
        Ok(FailedRequests {
            updates: Vec::new(),
            evictions,
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn failed_evictions_and_runtime_errors_are_logged() {
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.subscriber());
    let env = Env::new();
    let nri = Adaptation::builder("test-runtime", "v1.0.0", Arc::new(NoEvictions))
        .plugin_path(env.plugin_dir())
        .socket_path(env.socket())
        .build();
    bounded(nri.start()).await.unwrap();
    let handle = asker(&nri, &env).await;

    let failed = bounded(handle.update_containers(vec![], vec![eviction("victim")]))
        .await
        .unwrap();
    assert!(failed.is_empty());
    assert_eq!(
        logs.lines_with(&["WARN", "10-asker", "victim", "failed to evict"])
            .len(),
        1,
        "{}",
        logs.text()
    );

    let err = bounded(handle.update_containers(vec![update("broken", false)], vec![]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("runtime is broken"), "{err}");
    assert_eq!(
        logs.lines_with(&["WARN", "10-asker", "runtime is broken"])
            .len(),
        1,
        "{}",
        logs.text()
    );
    bounded(nri.stop()).await;
}

fn create_request(env: &[&str]) -> CreateContainerRequest {
    let mut ctr = container("ctr0", "pod0");
    ctr.env = env.iter().map(|e| e.to_string()).collect();
    CreateContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(ctr),
    }
}

fn adjusting(f: impl FnOnce(&mut ContainerAdjustment)) -> CreateContainerResponse {
    let mut adjust = ContainerAdjustment::default();
    f(&mut adjust);
    CreateContainerResponse {
        adjust: Some(adjust),
        ..Default::default()
    }
}

#[test]
fn env_override_is_logged_and_still_applied() {
    let logs = Captured::default();
    tracing::subscriber::with_default(logs.subscriber(), || {
        let mut r = CreateResult::new(create_request(&["FOO=1", "KEEP=x"]));
        r.apply(
            "10-envy",
            adjusting(|a| {
                a.add_env("FOO", "2").add_env("NEW", "3");
            }),
        )
        .unwrap();
        // A plugin that removes the variable first means to replace it.
        r.apply(
            "20-explicit",
            adjusting(|a| {
                a.remove_env("KEEP").add_env("KEEP", "y");
            }),
        )
        .unwrap();
        assert_eq!(
            r.request().container.as_ref().unwrap().env,
            ["FOO=2", "NEW=3", "KEEP=y"]
        );
        let env: Vec<_> = r
            .into_response()
            .adjust
            .unwrap()
            .env
            .into_iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        assert_eq!(env, ["FOO=2", "NEW=3", "KEEP=y"]);
    });
    let lines = logs.lines_with(&["WARN", "already set in the container"]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(lines[0].contains("10-envy"), "{}", lines[0]);
    assert!(lines[0].contains("ctr0"), "{}", lines[0]);
    assert!(lines[0].contains("\"FOO\""), "{}", lines[0]);
    // The value is not logged.
    assert!(!lines[0].contains("FOO=1"), "{}", lines[0]);
}

#[test]
fn requests_without_container_id_in_replies_are_logged() {
    let logs = Captured::default();
    tracing::subscriber::with_default(logs.subscriber(), || {
        let mut stop = StopResult::new();
        stop.apply(
            "10-stopper",
            StopContainerResponse {
                update: vec![update("", false), update("other", false)],
            },
        )
        .unwrap();
        // Merged as the reference merges it.
        assert_eq!(ids(stop.updates()), ["", "other"]);

        let mut create = CreateResult::new(create_request(&[]));
        create
            .apply(
                "20-creator",
                CreateContainerResponse {
                    evict: vec![eviction(""), eviction("x")],
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(create.evictions(), [eviction(""), eviction("x")]);
    });
    let updates = logs.lines_with(&["WARN", "container update without a container id"]);
    assert_eq!(updates.len(), 1, "{}", logs.text());
    assert!(updates[0].contains("10-stopper"), "{}", updates[0]);
    let evictions = logs.lines_with(&["WARN", "container eviction without a container id"]);
    assert_eq!(evictions.len(), 1, "{}", logs.text());
    assert!(evictions[0].contains("20-creator"), "{}", evictions[0]);
}
