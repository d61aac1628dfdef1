//! The options that go beyond the reference (docs/beyond-the-reference.md):
//! each with its default (the reference's behaviour) and with it set.

use crate::support;

use std::time::Duration;

use nri_adaptation::{Adaptation, Error, TimeoutPolicy};
use nri_api::plugin::REQUIRED_PLUGINS_ANNOTATION;
use nri_api::{
    Container, CreateContainerRequest, FailurePolicy, PodSandbox, StartContainerRequest,
};
use nri_stub::{Context, Plugin};
use support::*;

/// Sleeps in StartContainer for containers named `slow*`, logs the others.
struct Sleepy {
    log: Log,
    sleep: Duration,
}

#[nri_stub::plugin]
impl Plugin for Sleepy {
    async fn start_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        if ctr.id.starts_with("slow") {
            tokio::time::sleep(self.sleep).await;
        }
        self.log.push(format!("{} {}", ctx.name(), ctr.id));
        Ok(())
    }
}

fn start_req(id: &str) -> StartContainerRequest {
    StartContainerRequest {
        pod: Some(pod("pod0")),
        container: Some(container(id, "pod0")),
    }
}

/// An adaptation with a 300 ms request timeout, and `10-sleepy` connected.
async fn setup(
    env: &Env,
    configure: impl FnOnce(nri_adaptation::AdaptationBuilder) -> nri_adaptation::AdaptationBuilder,
    policy: Option<FailurePolicy>,
    log: &Log,
) -> Adaptation {
    let nri = configure(env.builder().request_timeout(Duration::from_millis(300))).build();
    bounded(nri.start()).await.unwrap();
    let mut b = nri_stub::Stub::builder(Sleepy {
        log: log.clone(),
        sleep: Duration::from_millis(1500),
    })
    .name("sleepy")
    .index("10")
    .socket_path(env.socket());
    if let Some(p) = policy {
        b = b.failure_policy(p);
    }
    let stub = b.build().unwrap();
    tokio::spawn(async move { stub.run().await });
    wait_plugins(&nri, &["10-sleepy"]).await;
    nri
}

/// Starts container `id`, bounded.
async fn start(nri: &Adaptation, id: &str) -> Result<(), Error> {
    bounded(nri.start_container(start_req(id))).await.map(drop)
}

/// Asserts `10-sleepy` is still connected and handles the next event, then
/// stops `nri`.
async fn still_serves(nri: Adaptation, log: &Log) {
    assert_eq!(nri.plugins().len(), 1);
    start(&nri, "ctr1").await.unwrap();
    assert!(log.get().contains(&"10-sleepy ctr1".to_string()));
    nri.stop().await;
}

#[tokio::test]
async fn timeout_drops_the_plugin_by_default() {
    let env = Env::new();
    let log = Log::default();
    let nri = setup(&env, |b| b, None, &log).await;
    start(&nri, "slow0").await.unwrap();
    assert!(nri.plugins().is_empty());
    nri.stop().await;
}

#[tokio::test]
async fn fail_call_policy_fails_the_call_and_keeps_the_plugin() {
    let env = Env::new();
    let log = Log::default();
    let nri = setup(
        &env,
        |b| b.timeout_policy(TimeoutPolicy::FailCall),
        None,
        &log,
    )
    .await;
    let err = bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::PluginFailed { plugin, .. } if plugin == "10-sleepy"));
    assert_eq!(
        err.to_string(),
        "plugin 10-sleepy failed to handle StartContainer request: context deadline exceeded"
    );
    still_serves(nri, &log).await;
}

#[tokio::test]
async fn skip_call_policy_per_plugin_goes_on_and_keeps_the_plugin() {
    let env = Env::new();
    let log = Log::default();
    let nri = setup(
        &env,
        |b| b.plugin_timeout_policy("sleepy", TimeoutPolicy::SkipCall),
        None,
        &log,
    )
    .await;
    start(&nri, "slow0").await.unwrap();
    still_serves(nri, &log).await;
}

#[tokio::test]
async fn per_plugin_request_timeout_gives_a_slow_plugin_time() {
    let env = Env::new();
    let log = Log::default();
    let nri = setup(
        &env,
        |b| b.plugin_request_timeout("10-sleepy", Duration::from_secs(15)),
        None,
        &log,
    )
    .await;
    start(&nri, "slow0").await.unwrap();
    assert_eq!(nri.plugins().len(), 1);
    assert_eq!(log.get(), ["10-sleepy slow0"]);
    nri.stop().await;
}

#[tokio::test]
async fn announced_keep_connected_survives_a_timeout() {
    let env = Env::new();
    let log = Log::default();
    let policy = FailurePolicy {
        fail_request: false,
        keep_connected: true,
    };
    let nri = setup(&env, |b| b, Some(policy), &log).await;
    start(&nri, "slow0").await.unwrap();
    assert_eq!(nri.plugins().len(), 1);
    nri.stop().await;
}

#[tokio::test]
async fn announced_fail_request_fails_the_call() {
    let env = Env::new();
    let log = Log::default();
    let policy = FailurePolicy {
        fail_request: true,
        keep_connected: false,
    };
    let nri = setup(&env, |b| b, Some(policy), &log).await;
    let err = bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PluginFailed { .. }), "{err}");
    assert!(nri.plugins().is_empty());
    nri.stop().await;
}

fn create_req(annotation: Option<&str>) -> CreateContainerRequest {
    let mut p = pod("pod0");
    if let Some(a) = annotation {
        p.annotations
            .insert(REQUIRED_PLUGINS_ANNOTATION.into(), a.into());
    }
    CreateContainerRequest {
        pod: Some(p),
        container: Some(container("ctr0", "pod0")),
    }
}

#[tokio::test]
async fn required_plugins_are_not_checked_by_default() {
    let env = Env::new();
    let nri = env.start().await;
    bounded(nri.create_container(create_req(Some("[sleepy]"))))
        .await
        .unwrap();
    nri.stop().await;
}

#[tokio::test]
async fn required_plugin_missing_fails_create_container() {
    let env = Env::new();
    let nri = env.builder().required_plugins(["10-sleepy"]).build();
    bounded(nri.start()).await.unwrap();
    let err = bounded(nri.create_container(create_req(None)))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"required NRI plugin "10-sleepy" is not connected"#
    );

    let log = Log::default();
    let _stub = run_stub(
        Sleepy {
            log,
            sleep: Duration::ZERO,
        },
        "sleepy",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-sleepy"]).await;
    bounded(nri.create_container(create_req(None)))
        .await
        .unwrap();
    // The pod's annotation adds a plugin that is not there.
    let err = bounded(nri.create_container(create_req(Some("[other]"))))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::RequiredPluginMissing(p) if p == "other"),
        "{err}"
    );
    nri.stop().await;
}

/// Logs `<tag> <container>` for StartContainer and `<tag> shutdown`.
struct Tagged {
    tag: &'static str,
    log: Log,
}

/// Runs a `Tagged` plugin as `10-up` on the adaptation of `env`.
fn run_tagged(
    env: &Env,
    tag: &'static str,
    log: &Log,
) -> tokio::task::JoinHandle<Result<(), nri_stub::Error>> {
    let plugin = Tagged {
        tag,
        log: log.clone(),
    };
    run_stub(plugin, "up", "10", &env.socket())
}

#[nri_stub::plugin]
impl Plugin for Tagged {
    async fn shutdown(&self, _ctx: &Context) {
        self.log.push(format!("{} shutdown", self.tag));
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("{} {}", self.tag, ctr.id));
        Ok(())
    }
}

#[tokio::test]
async fn same_identity_connections_both_stay_by_default() {
    let env = Env::new();
    let nri = env.start().await;
    let log = Log::default();
    let _a = run_tagged(&env, "a", &log);
    wait_plugins(&nri, &["10-up"]).await;
    let _b = run_tagged(&env, "b", &log);
    wait_plugins(&nri, &["10-up", "10-up"]).await;
    bounded(nri.start_container(start_req("c0"))).await.unwrap();
    let mut got = log.get();
    got.sort();
    assert_eq!(got, ["a c0", "b c0"]);
    nri.stop().await;
}

#[tokio::test]
async fn replace_same_identity_hands_over_without_gap_or_overlap() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let env = Env::new();
    let nri = env.builder().replace_same_identity(true).build();
    bounded(nri.start()).await.unwrap();
    let log = Log::default();
    let _a = run_tagged(&env, "a", &log);
    wait_plugins(&nri, &["10-up"]).await;

    let done = Arc::new(AtomicBool::new(false));
    let events = {
        let (nri, done) = (nri.clone(), done.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !done.load(Ordering::Relaxed) {
                nri.start_container(start_req(&format!("c{n}")))
                    .await
                    .unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _b = run_tagged(&env, "b", &log);
    bounded(async {
        while !log.get().contains(&"a shutdown".to_string()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    done.store(true, Ordering::Relaxed);
    let sent = bounded(events).await.unwrap();

    assert_eq!(nri.plugins().len(), 1);
    let got = log.get();
    for i in 0..sent {
        let id = format!("c{i}");
        let seen: Vec<_> = got
            .iter()
            .filter(|l| l.split(' ').nth(1) == Some(id.as_str()))
            .collect();
        assert_eq!(seen.len(), 1, "{id} reached {seen:?}");
    }
    // Both took part: a before the swap, b after it, and never a after b.
    let first_b = got.iter().position(|l| l.starts_with("b ")).unwrap();
    assert!(got.iter().any(|l| l.starts_with("a c")));
    assert!(!got[first_b..].iter().any(|l| l.starts_with("a c")));
    nri.stop().await;
}

#[tokio::test]
async fn stub_reconnects_to_a_restarted_runtime() {
    let env = Env::new();
    let first = env.start().await;
    let log = Log::default();
    let stub = nri_stub::Stub::builder(Tagged {
        tag: "a",
        log: log.clone(),
    })
    .name("up")
    .index("10")
    .socket_path(env.socket())
    .build()
    .unwrap();
    let signals = Log::default();
    let running = {
        let signals = signals.clone();
        tokio::spawn(async move {
            let backoff = nri_stub::Backoff {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(200),
                attempts: None,
            };
            stub.run_reconnecting(backoff, move |n| signals.push(format!("reconnect {n}")))
                .await
        })
    };
    wait_plugins(&first, &["10-up"]).await;
    // The runtime goes away without a word (a crash), then comes back.
    drop(first);
    bounded(async {
        while signals.get().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let second = env.start().await;
    wait_plugins(&second, &["10-up"]).await;
    bounded(second.start_container(start_req("c1")))
        .await
        .unwrap();
    assert!(log.get().contains(&"a c1".to_string()));
    assert_eq!(
        signals.get().first().map(String::as_str),
        Some("reconnect 1")
    );
    // A Shutdown from the runtime ends it.
    second.stop().await;
    assert!(bounded(running).await.unwrap().is_ok());
}

// ---------------------------------------------------------------------------
// Teardown events reach every plugin.
// ---------------------------------------------------------------------------

/// Logs the teardown events it gets; fails them if `fail` is set.
struct Teardown {
    log: Log,
    fail: bool,
}

impl Teardown {
    fn seen(&self, ctx: &Context, event: &str, id: &str) -> nri_stub::HandlerResult<()> {
        self.log.push(format!("{} {event} {id}", ctx.name()));
        if self.fail {
            return Err(format!("{event} refused").into());
        }
        Ok(())
    }
}

#[nri_stub::plugin]
impl Plugin for Teardown {
    async fn stop_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<nri_api::ContainerUpdate>> {
        self.seen(ctx, "StopContainer", &ctr.id)?;
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        ctx: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.seen(ctx, "RemoveContainer", &ctr.id)
    }

    async fn stop_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.seen(ctx, "StopPodSandbox", &pod.id)
    }

    async fn remove_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.seen(ctx, "RemovePodSandbox", &pod.id)
    }
}

/// Runs the four teardown events through `10-logger` (failing them all)
/// and `90-resources`; returns the errors and the plugins' log.
async fn teardown_with(stop_at_first_error: bool) -> (Vec<Error>, Vec<String>) {
    let env = Env::new();
    let log = Log::default();
    let nri = env
        .builder()
        .teardown_stops_at_first_error(stop_at_first_error)
        .build();
    bounded(nri.start()).await.unwrap();
    let _a = run_stub(
        Teardown {
            log: log.clone(),
            fail: true,
        },
        "logger",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-logger"]).await;
    let _b = run_stub(
        Teardown {
            log: log.clone(),
            fail: false,
        },
        "resources",
        "90",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-logger", "90-resources"]).await;
    let (p, c) = (Some(pod("pod0")), Some(container("ctr0", "pod0")));
    let errors = vec![
        bounded(nri.stop_container(nri_api::StopContainerRequest {
            pod: p.clone(),
            container: c.clone(),
        }))
        .await
        .unwrap_err(),
        bounded(nri.remove_container(nri_api::RemoveContainerRequest {
            pod: p.clone(),
            container: c.clone(),
        }))
        .await
        .unwrap_err(),
        bounded(nri.stop_pod_sandbox(nri_api::StopPodSandboxRequest { pod: p.clone() }))
            .await
            .unwrap_err(),
        bounded(nri.remove_pod_sandbox(nri_api::RemovePodSandboxRequest { pod: p.clone() }))
            .await
            .unwrap_err(),
    ];
    // The failing plugin stays connected: a handler's error is no plugin failure.
    assert_eq!(nri.plugins().len(), 2);
    nri.stop().await;
    (errors, log.get())
}

#[tokio::test]
async fn teardown_reaches_every_plugin_and_reports_the_first_error() {
    let (errors, log) = teardown_with(false).await;
    assert_eq!(
        log,
        [
            "10-logger StopContainer ctr0",
            "90-resources StopContainer ctr0",
            "10-logger RemoveContainer ctr0",
            "90-resources RemoveContainer ctr0",
            "10-logger StopPodSandbox pod0",
            "90-resources StopPodSandbox pod0",
            "10-logger RemovePodSandbox pod0",
            "90-resources RemovePodSandbox pod0",
        ]
    );
    // The first plugin's error, with the reference's text (the plugin's own).
    for (err, event) in errors.iter().zip([
        "StopContainer",
        "RemoveContainer",
        "StopPodSandbox",
        "RemovePodSandbox",
    ]) {
        assert!(
            matches!(err, Error::Plugin { plugin, .. } if plugin == "10-logger"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("rpc error: code = Unknown desc = {event} refused")
        );
    }
}

#[tokio::test]
async fn teardown_can_stop_at_the_first_error_as_the_reference() {
    let (errors, log) = teardown_with(true).await;
    assert_eq!(
        log,
        [
            "10-logger StopContainer ctr0",
            "10-logger RemoveContainer ctr0",
            "10-logger StopPodSandbox pod0",
            "10-logger RemovePodSandbox pod0",
        ]
    );
    assert!(
        errors
            .iter()
            .all(|e| matches!(e, Error::Plugin { plugin, .. } if plugin == "10-logger")),
        "{errors:?}"
    );
}

// ---------------------------------------------------------------------------
// v0.12.5: a validator's announced failure policy, and plugins answering
// DeadlineExceeded.
// ---------------------------------------------------------------------------

/// Validates slowly containers named `slow*`.
struct SlowValidator;

#[nri_stub::plugin]
impl Plugin for SlowValidator {
    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &nri_api::ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        if req
            .container
            .as_ref()
            .is_some_and(|c| c.id.starts_with("slow"))
        {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        Ok(())
    }
}

#[tokio::test]
async fn validator_announcing_keep_connected_survives_a_timeout() {
    let env = Env::new();
    let nri = env
        .start_with(|b| b.request_timeout(Duration::from_millis(300)))
        .await;
    let stub = nri_stub::Stub::builder(SlowValidator)
        .name("validator")
        .index("00")
        .socket_path(env.socket())
        .failure_policy(FailurePolicy {
            fail_request: false,
            keep_connected: true,
        })
        .build()
        .unwrap();
    tokio::spawn(async move { stub.run().await });
    wait_plugins(&nri, &["00-validator"]).await;
    let mut req = create_req(None);
    req.container = Some(container("slow0", "pod0"));
    let err = bounded(nri.create_container(req)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "validator plugin 00-validator failed: context deadline exceeded"
    );
    // Still connected, and still validating.
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.create_container(create_req(None)))
        .await
        .unwrap();
    nri.stop().await;
}

/// Answers StartContainer with a DeadlineExceeded status of its own.
struct AnswersDeadlineExceeded;

#[nri_stub::plugin]
impl Plugin for AnswersDeadlineExceeded {
    async fn start_container(
        &self,
        _ctx: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Err(Box::new(nri_stub::Status::new(
            nri_stub::Code::DeadlineExceeded,
            "backend too slow",
        )))
    }
}

#[tokio::test]
async fn a_deadline_exceeded_answer_is_an_ordinary_error_whatever_the_policy() {
    for (policy, announced) in [
        (TimeoutPolicy::DropPlugin, None),
        (
            TimeoutPolicy::DropPlugin,
            Some(FailurePolicy {
                fail_request: false,
                keep_connected: false,
            }),
        ),
        (
            TimeoutPolicy::DropPlugin,
            Some(FailurePolicy {
                fail_request: false,
                keep_connected: true,
            }),
        ),
        (TimeoutPolicy::SkipCall, None),
        (TimeoutPolicy::FailCall, None),
    ] {
        let env = Env::new();
        let nri = env
            .builder()
            .plugin_timeout_policy("answers", policy)
            .build();
        bounded(nri.start()).await.unwrap();
        let mut b = nri_stub::Stub::builder(AnswersDeadlineExceeded)
            .name("answers")
            .index("10")
            .socket_path(env.socket());
        if let Some(p) = announced {
            b = b.failure_policy(p);
        }
        let stub = b.build().unwrap();
        tokio::spawn(async move { stub.run().await });
        wait_plugins(&nri, &["10-answers"]).await;
        let err = bounded(nri.start_container(start_req("ctr0")))
            .await
            .unwrap_err();
        let what = format!("{policy:?} {announced:?}: {err}");
        assert!(matches!(err, Error::Plugin { .. }), "{what}");
        assert!(
            err.to_string()
                .ends_with("rpc error: code = DeadlineExceeded desc = backend too slow"),
            "{what}"
        );
        // The call failed and the plugin stays.
        assert_eq!(nri.plugins().len(), 1, "{what}");
        nri.stop().await;
    }
}
