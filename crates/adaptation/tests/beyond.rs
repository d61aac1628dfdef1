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

#[tokio::test]
async fn timeout_drops_the_plugin_by_default() {
    let env = Env::new();
    let log = Log::default();
    let nri = setup(&env, |b| b, None, &log).await;
    bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap();
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
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.start_container(start_req("ctr1")))
        .await
        .unwrap();
    assert!(log.get().contains(&"10-sleepy ctr1".to_string()));
    nri.stop().await;
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
    bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap();
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.start_container(start_req("ctr1")))
        .await
        .unwrap();
    assert!(log.get().contains(&"10-sleepy ctr1".to_string()));
    nri.stop().await;
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
    bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap();
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
    bounded(nri.start_container(start_req("slow0")))
        .await
        .unwrap();
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
    let _a = run_stub(
        Tagged {
            tag: "a",
            log: log.clone(),
        },
        "up",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-up"]).await;
    let _b = run_stub(
        Tagged {
            tag: "b",
            log: log.clone(),
        },
        "up",
        "10",
        &env.socket(),
    );
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
    let _a = run_stub(
        Tagged {
            tag: "a",
            log: log.clone(),
        },
        "up",
        "10",
        &env.socket(),
    );
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
    let _b = run_stub(
        Tagged {
            tag: "b",
            log: log.clone(),
        },
        "up",
        "10",
        &env.socket(),
    );
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
