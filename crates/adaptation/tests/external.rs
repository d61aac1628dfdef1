//! External plugins (nri-stub, in process) on the adaptation's socket:
//! registration, configure, synchronize, every event, ordering and merging,
//! error handling, validation, unsolicited updates and stop.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{BoxError, BuiltinPlugin, PluginKind};
use nri_api::*;
use nri_stub::{Context, CreateContainerResult, Plugin};
use support::*;

/// Records every event it receives.
struct Everything(Log);

#[nri_stub::plugin]
impl Plugin for Everything {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.0.push(format!(
            "sync pods={} ctrs={}",
            pods.len(),
            containers.len()
        ));
        let mut u = ContainerUpdate {
            container_id: "ctr0".into(),
            ..Default::default()
        };
        u.set_linux_cpu_shares(100);
        Ok(vec![u])
    }
    async fn shutdown(&self, _ctx: &Context) {
        self.0.push("shutdown");
    }
    async fn run_pod_sandbox(&self, _c: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("RunPodSandbox {}", pod.id));
        Ok(())
    }
    async fn update_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
        _o: Option<&LinuxResources>,
        _r: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("UpdatePodSandbox {}", pod.id));
        Ok(())
    }
    async fn post_update_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("PostUpdatePodSandbox {}", pod.id));
        Ok(())
    }
    async fn stop_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("StopPodSandbox {}", pod.id));
        Ok(())
    }
    async fn remove_pod_sandbox(
        &self,
        _c: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("RemovePodSandbox {}", pod.id));
        Ok(())
    }
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.0.push(format!("CreateContainer {}", ctr.id));
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("seen-by", "everything");
        Ok(adjust.into())
    }
    async fn post_create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("PostCreateContainer {}", ctr.id));
        Ok(())
    }
    async fn start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("StartContainer {}", ctr.id));
        Ok(())
    }
    async fn post_start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("PostStartContainer {}", ctr.id));
        Ok(())
    }
    async fn update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
        _r: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.0.push(format!("UpdateContainer {}", ctr.id));
        let mut u = ContainerUpdate {
            container_id: ctr.id.clone(),
            ..Default::default()
        };
        u.set_linux_cpu_shares(42);
        Ok(vec![u])
    }
    async fn post_update_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("PostUpdateContainer {}", ctr.id));
        Ok(())
    }
    async fn stop_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.0.push(format!("StopContainer {}", ctr.id));
        let mut u = ContainerUpdate {
            container_id: "other".into(),
            ..Default::default()
        };
        u.set_linux_cpuset_cpus("0-1");
        Ok(vec![u])
    }
    async fn remove_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.0.push(format!("RemoveContainer {}", ctr.id));
        Ok(())
    }
}

/// Enables the default validator, rejecting OCI hook adjustments.
fn rejecting_hooks(b: nri_adaptation::AdaptationBuilder) -> nri_adaptation::AdaptationBuilder {
    b.default_validator(nri_validator::DefaultValidatorConfig {
        enable: true,
        reject_oci_hook_adjustment: true,
        ..Default::default()
    })
}

fn pod_req() -> Option<PodSandbox> {
    Some(pod("pod0"))
}

fn ctr_req() -> Option<Container> {
    Some(container("ctr0", "pod0"))
}

#[tokio::test]
async fn external_plugin_registers_syncs_and_receives_every_event() {
    let env = Env::new();
    env.runtime.pods.lock().unwrap().push(pod("pod0"));
    env.runtime
        .containers
        .lock()
        .unwrap()
        .push(container("ctr0", "pod0"));
    let nri = env.start().await;
    let log = Log::default();
    let stub = run_stub(Everything(log.clone()), "everything", "10", &env.socket());
    wait_plugins(&nri, &["10-everything"]).await;

    let info = &nri.plugins()[0];
    assert_eq!(info.kind, PluginKind::External);
    assert!(info.events.is_set(Event::RemoveContainer));
    assert!(!info.events.is_set(Event::ValidateContainerAdjustment));
    assert_eq!(log.take(), ["sync pods=1 ctrs=1"]);
    let synced = env.runtime.synced.lock().unwrap().clone();
    assert_eq!(synced.len(), 1);
    assert_eq!(synced[0].container_id, "ctr0");

    bounded(async {
        nri.run_pod_sandbox(RunPodSandboxRequest { pod: pod_req() })
            .await
            .unwrap();
        let r = nri
            .update_pod_sandbox(UpdatePodSandboxRequest {
                pod: pod_req(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(r, UpdatePodSandboxResponse::default());
        nri.post_update_pod_sandbox(PostUpdatePodSandboxRequest { pod: pod_req() })
            .await
            .unwrap();
        let created = nri
            .create_container(CreateContainerRequest {
                pod: pod_req(),
                container: ctr_req(),
            })
            .await
            .unwrap();
        assert_eq!(created.adjust.unwrap().annotations["seen-by"], "everything");
        nri.post_create_container(PostCreateContainerRequest {
            pod: pod_req(),
            container: ctr_req(),
        })
        .await
        .unwrap();
        nri.start_container(StartContainerRequest {
            pod: pod_req(),
            container: ctr_req(),
        })
        .await
        .unwrap();
        nri.post_start_container(PostStartContainerRequest {
            pod: pod_req(),
            container: ctr_req(),
        })
        .await
        .unwrap();
        let updated = nri
            .update_container(UpdateContainerRequest {
                pod: pod_req(),
                container: ctr_req(),
                linux_resources: None,
            })
            .await
            .unwrap();
        assert_eq!(updated.update.len(), 1);
        let res = update_resources(&updated.update[0]);
        assert_eq!(res.cpu.as_ref().unwrap().shares.unwrap().value, 42);
        nri.post_update_container(PostUpdateContainerRequest {
            pod: pod_req(),
            container: ctr_req(),
        })
        .await
        .unwrap();
        let stopped = nri
            .stop_container(StopContainerRequest {
                pod: pod_req(),
                container: ctr_req(),
            })
            .await
            .unwrap();
        assert_eq!(stopped.update.len(), 1);
        assert_eq!(stopped.update[0].container_id, "other");
        nri.remove_container(RemoveContainerRequest {
            pod: pod_req(),
            container: ctr_req(),
        })
        .await
        .unwrap();
        nri.stop_pod_sandbox(StopPodSandboxRequest { pod: pod_req() })
            .await
            .unwrap();
        nri.remove_pod_sandbox(RemovePodSandboxRequest { pod: pod_req() })
            .await
            .unwrap();
    })
    .await;

    assert_eq!(
        log.take(),
        [
            "RunPodSandbox pod0",
            "UpdatePodSandbox pod0",
            "PostUpdatePodSandbox pod0",
            "CreateContainer ctr0",
            "PostCreateContainer ctr0",
            "StartContainer ctr0",
            "PostStartContainer ctr0",
            "UpdateContainer ctr0",
            "PostUpdateContainer ctr0",
            "StopContainer ctr0",
            "RemoveContainer ctr0",
            "StopPodSandbox pod0",
            "RemovePodSandbox pod0",
        ]
    );

    // Stop sends Shutdown and closes the connection: the stub's run ends.
    bounded(nri.stop()).await;
    assert_eq!(log.get(), ["shutdown"]);
    let ended = bounded(stub).await.unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    assert!(nri.plugins().is_empty());
    assert!(!env.socket().exists());
}

/// Adds an annotation and a memory limit, and records the annotations of
/// the container it is asked to create.
struct Adjuster {
    log: Log,
    key: &'static str,
    memory: Option<i64>,
}

#[nri_stub::plugin]
impl Plugin for Adjuster {
    async fn create_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut seen: Vec<_> = ctr.annotations.keys().cloned().collect();
        seen.sort();
        self.log
            .push(format!("{} sees [{}]", ctx.name(), seen.join(",")));
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation(self.key, ctx.name());
        if let Some(limit) = self.memory {
            adjust.set_linux_memory_limit(limit);
        }
        Ok(adjust.into())
    }
}

/// A builtin plugin adding an annotation, at index 15.
struct BuiltinTag;

#[nri_adaptation::async_trait]
impl BuiltinPlugin for BuiltinTag {
    fn name(&self) -> &str {
        "tag"
    }
    fn index(&self) -> &str {
        "15"
    }
    fn events(&self) -> EventMask {
        Event::CreateContainer.into()
    }
    async fn create_container(
        &self,
        req: &CreateContainerRequest,
    ) -> Result<CreateContainerResponse, BoxError> {
        let ctr = req.container.as_ref().ok_or("no container")?;
        let mut seen: Vec<_> = ctr.annotations.keys().cloned().collect();
        seen.sort();
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("builtin-saw", seen.join(","));
        Ok(CreateContainerResponse {
            adjust: Some(adjust),
            ..Default::default()
        })
    }
}

#[tokio::test]
async fn plugins_run_in_index_order_and_results_merge() {
    let env = Env::new();
    let nri = env
        .builder()
        .builtin_plugins([Arc::new(BuiltinTag) as Arc<dyn BuiltinPlugin>])
        .build();
    bounded(nri.start()).await.unwrap();
    let log = Log::default();
    // Connect the later index first: order must come from the index.
    let _b = run_stub(
        Adjuster {
            log: log.clone(),
            key: "b",
            memory: None,
        },
        "bee",
        "20",
        &env.socket(),
    );
    wait_plugins(&nri, &["15-tag", "20-bee"]).await;
    let _a = run_stub(
        Adjuster {
            log: log.clone(),
            key: "a",
            memory: Some(1 << 30),
        },
        "ant",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-ant", "15-tag", "20-bee"]).await;
    assert_eq!(nri.plugins()[1].kind, PluginKind::Builtin);

    let reply = bounded(nri.create_container(CreateContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    }))
    .await
    .unwrap();
    assert_eq!(
        log.take(),
        ["10-ant sees []", "20-bee sees [a,builtin-saw]"]
    );
    let adjust = reply.adjust.unwrap();
    assert_eq!(adjust.annotations["a"], "10-ant");
    assert_eq!(adjust.annotations["builtin-saw"], "a");
    assert_eq!(adjust.annotations["b"], "20-bee");
    let mem = adjust.linux.unwrap().resources.unwrap().memory.unwrap();
    assert_eq!(mem.limit.unwrap().value, 1 << 30);

    // A second plugin setting the same field conflicts.
    let _c = run_stub(
        Adjuster {
            log: log.clone(),
            key: "c",
            memory: Some(2 << 30),
        },
        "cat",
        "30",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-ant", "15-tag", "20-bee", "30-cat"]).await;
    let err = bounded(nri.create_container(CreateContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    }))
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"plugins "30-cat" and "10-ant" both tried to set MemLimit "#
    );
    bounded(nri.stop()).await;
}

/// Fails StartContainer with an error, or sleeps through it.
struct Misbehaving {
    sleep: bool,
}

#[nri_stub::plugin]
impl Plugin for Misbehaving {
    async fn start_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        if self.sleep {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        } else {
            Err("refusing to start".into())
        }
    }
}

#[tokio::test]
async fn plugin_error_fails_the_call_and_timeouts_drop_the_plugin() {
    let env = Env::new();
    let nri = env
        .start_with(|b| b.request_timeout(Duration::from_millis(300)))
        .await;
    let _slow = run_stub(Misbehaving { sleep: true }, "slow", "10", &env.socket());
    wait_plugins(&nri, &["10-slow"]).await;
    let _bad = run_stub(Misbehaving { sleep: false }, "bad", "20", &env.socket());
    wait_plugins(&nri, &["10-slow", "20-bad"]).await;

    let req = StartContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    };
    // The slow plugin times out (fatal: dropped), the bad one fails the call.
    let err = bounded(nri.start_container(req.clone())).await.unwrap_err();
    assert!(err.to_string().contains("refusing to start"), "{err}");
    assert!(matches!(err, nri_adaptation::Error::Plugin { ref plugin, .. } if plugin == "20-bad"));
    wait_plugins(&nri, &["20-bad"]).await;
    // The non-fatal error kept the plugin.
    let err = bounded(nri.start_container(req)).await.unwrap_err();
    assert!(err.to_string().contains("refusing to start"), "{err}");
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn disconnected_plugin_is_dropped_and_the_call_succeeds() {
    let env = Env::new();
    let nri = env.start().await;
    let log = Log::default();
    let gone = run_stub(Everything(log.clone()), "gone", "10", &env.socket());
    wait_plugins(&nri, &["10-gone"]).await;
    gone.abort();
    let _ = gone.await;
    bounded(nri.run_pod_sandbox(RunPodSandboxRequest { pod: pod_req() }))
        .await
        .unwrap();
    wait_plugins(&nri, &[]).await;
    bounded(nri.stop()).await;
}

/// Records plugin invocations and plugin counts.
#[derive(Default)]
struct Recorder(Log, Log);

impl nri_adaptation::Metrics for Recorder {
    fn record_plugin_invocation(
        &self,
        plugin: &str,
        operation: &str,
        error: Option<&(dyn std::error::Error + 'static)>,
    ) {
        let outcome = if error.is_some() { "err" } else { "ok" };
        self.0.push(format!("{plugin} {operation} {outcome}"));
    }
    fn update_plugin_count(&self, count: usize) {
        self.1.push(format!("count {count}"));
    }
}

/// Counts what it is synchronized with.
struct Counter(Log);

#[nri_stub::plugin]
impl Plugin for Counter {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let last = containers.last().map(|c| c.id.clone()).unwrap_or_default();
        self.0.push(format!(
            "pods={} ctrs={} last={last}",
            pods.len(),
            containers.len()
        ));
        Ok(Vec::new())
    }
    async fn remove_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
}

#[tokio::test]
async fn synchronize_splits_state_larger_than_the_message_limit() {
    let env = Env::new();
    {
        let mut pods = env.runtime.pods.lock().unwrap();
        let mut ctrs = env.runtime.containers.lock().unwrap();
        let big = "x".repeat(100 * 1024);
        for i in 0..20 {
            let mut p = pod(&format!("pod{i}"));
            p.annotations.insert("big".into(), big.clone());
            pods.push(p);
        }
        for i in 0..60 {
            let mut c = container(&format!("ctr{i}"), "pod0");
            c.annotations.insert("big".into(), big.clone());
            ctrs.push(c);
        }
    }
    let metrics = Arc::new(Recorder::default());
    let nri = env
        .builder()
        .request_timeout(Duration::from_secs(10))
        .metrics(metrics.clone())
        .build();
    bounded(nri.start()).await.unwrap();
    let log = Log::default();
    let _s = run_stub(Counter(log.clone()), "counter", "10", &env.socket());
    wait_plugins(&nri, &["10-counter"]).await;
    assert_eq!(log.get(), ["pods=20 ctrs=60 last=ctr59"]);
    assert!(env.runtime.sync_errors.lock().unwrap().is_empty());
    // 8 MB of state: at least two messages, none refused as oversized.
    let calls = metrics.0.get();
    let syncs = calls
        .iter()
        .filter(|c| *c == "10-counter Synchronize ok")
        .count();
    assert!(syncs >= 2, "{calls:?}");
    assert_eq!(calls.len(), syncs, "{calls:?}");
    assert_eq!(metrics.1.get(), ["count 1"]);
    bounded(nri.stop()).await;
}

/// Rejects adjustments carrying the annotation `bad`, and records the
/// validation request.
struct Validator(Log);

#[nri_stub::plugin]
impl Plugin for Validator {
    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        let plugins: Vec<_> = req
            .plugins
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect();
        let pristine = req.container.as_ref().unwrap().annotations.is_empty();
        let owner = req
            .owners
            .as_ref()
            .and_then(|o| o.owners.get("ctr0"))
            .and_then(|f| f.compound.get(&(Field::Annotations as i32)))
            .and_then(|c| c.owners.get("bad").or_else(|| c.owners.get("ok")))
            .cloned()
            .unwrap_or_default();
        self.0.push(format!(
            "plugins=[{}] pristine={pristine} owner={owner}",
            plugins.join(",")
        ));
        match req.adjust.as_ref().and_then(|a| a.annotations.get("bad")) {
            Some(_) => Err("bad annotation".into()),
            None => Ok(()),
        }
    }
}

#[tokio::test]
async fn validators_see_the_merged_result_and_can_reject() {
    let env = Env::new();
    let nri = env.start_with(rejecting_hooks).await;
    wait_plugins(&nri, &["00-default-validator"]).await;
    let log = Log::default();
    let _v = run_stub(Validator(log.clone()), "val", "90", &env.socket());
    wait_plugins(&nri, &["00-default-validator", "90-val"]).await;
    let _a = run_stub(
        Adjuster {
            log: Log::default(),
            key: "ok",
            memory: None,
        },
        "adj",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["00-default-validator", "10-adj", "90-val"]).await;

    let req = CreateContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    };
    let reply = bounded(nri.create_container(req.clone())).await.unwrap();
    assert_eq!(reply.adjust.unwrap().annotations["ok"], "10-adj");
    assert_eq!(
        log.take(),
        ["plugins=[00-default-validator,10-adj,90-val] pristine=true owner=10-adj"]
    );

    // A plugin adding the `bad` annotation is rejected by the validator.
    let _b = run_stub(
        Adjuster {
            log: Log::default(),
            key: "bad",
            memory: None,
        },
        "bad",
        "20",
        &env.socket(),
    );
    wait_plugins(
        &nri,
        &["00-default-validator", "10-adj", "20-bad", "90-val"],
    )
    .await;
    let err = bounded(nri.create_container(req.clone()))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"validator "90-val" rejected container adjustment, reason: bad annotation"#
    );
    bounded(nri.stop()).await;
}

/// Injects an OCI hook.
struct Hooker;

#[nri_stub::plugin]
impl Plugin for Hooker {
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let adjust = ContainerAdjustment {
            hooks: Some(Hooks {
                prestart: vec![Hook {
                    path: "/bin/true".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok(adjust.into())
    }
}

#[tokio::test]
async fn default_validator_rejects_hook_injection() {
    let env = Env::new();
    let nri = env.start_with(rejecting_hooks).await;
    let _h = run_stub(Hooker, "hooker", "10", &env.socket());
    wait_plugins(&nri, &["00-default-validator", "10-hooker"]).await;
    let err = bounded(nri.create_container(CreateContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    }))
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(
            r#"validator "00-default-validator" rejected container adjustment, reason: "#
        ),
        "{text}"
    );
    assert!(text.contains("10-hooker"), "{text}");
    bounded(nri.stop()).await;
}

/// Asks for container updates from inside its CreateContainer handler.
struct Updater(Log);

#[nri_stub::plugin]
impl Plugin for Updater {
    async fn create_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut ok = ContainerUpdate {
            container_id: "ctr-ok".into(),
            ..Default::default()
        };
        ok.set_linux_cpu_shares(10);
        let mut bad = ContainerUpdate {
            container_id: FAILING.into(),
            ..Default::default()
        };
        bad.set_linux_cpu_shares(20);
        let evict = ContainerEviction {
            container_id: "victim".into(),
            reason: "why".into(),
        };
        let failed = ctx.update_containers(vec![ok, bad], vec![evict]).await?;
        let ids: Vec<_> = failed.iter().map(|u| u.container_id.clone()).collect();
        self.0.push(format!("failed=[{}]", ids.join(",")));
        Ok(CreateContainerResult::default())
    }
}

#[tokio::test]
async fn unsolicited_update_from_inside_a_handler_does_not_deadlock() {
    let env = Env::new();
    let nri = env.start().await;
    let log = Log::default();
    let _u = run_stub(Updater(log.clone()), "updater", "10", &env.socket());
    wait_plugins(&nri, &["10-updater"]).await;
    bounded(nri.create_container(CreateContainerRequest {
        pod: pod_req(),
        container: ctr_req(),
    }))
    .await
    .unwrap();
    assert_eq!(log.take(), [format!("failed=[{FAILING}]")]);
    let updates = env.runtime.updates.lock().unwrap().clone();
    assert_eq!(updates.len(), 1);
    let (plugin, ups, evicts) = &updates[0];
    assert_eq!(plugin, "10-updater");
    assert_eq!(ups.len(), 2);
    assert_eq!(evicts[0].container_id, "victim");
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn registration_waits_for_blocked_plugin_sync_without_blocking_calls() {
    let env = Env::new();
    let nri = env.start().await;
    let block = bounded(nri.block_plugin_sync()).await;
    let log = Log::default();
    let _s = run_stub(Everything(log.clone()), "late", "10", &env.socket());
    // Lifecycle calls go on while the plugin waits for its synchronization.
    tokio::time::sleep(Duration::from_millis(200)).await;
    bounded(nri.run_pod_sandbox(RunPodSandboxRequest { pod: pod_req() }))
        .await
        .unwrap();
    assert!(nri.plugins().is_empty());
    assert!(log.get().is_empty());
    block.unblock();
    wait_plugins(&nri, &["10-late"]).await;
    assert_eq!(log.get(), ["sync pods=0 ctrs=0"]);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn disabled_external_connections_create_no_socket() {
    let env = Env::new();
    let nri = env.builder().disable_external_connections().build();
    bounded(nri.start()).await.unwrap();
    assert!(!env.socket().exists());
    assert!(matches!(
        nri.start().await,
        Err(nri_adaptation::Error::AlreadyStarted)
    ));
    bounded(nri.stop()).await;
}
