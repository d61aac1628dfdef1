//! Domains with nri-stub plugins on a socket: synchronization lists every
//! domain, plugin updates and evictions reach the domain that has the
//! container and failures go back to the plugin, and the start-up race
//! (events before any domain is registered).

// The adaptation's log capture, shared rather than copied: tests/capture is a
// link to nri-adaptation's tests/capture, which `cargo package` turns into a
// copy so that the packaged crate's tests build on their own.
mod capture;
mod support;

use capture::Captured;
use nri_api::*;
use nri_integration::{Error, LifecycleState};
use support::*;

use ContainerState::{ContainerRunning as Running, ContainerStopped as Stopped};

#[tokio::test]
async fn synchronization_lists_every_domain() {
    let env = Env::new();
    let a = TestDomain::new("a.ns").with("pa", &[("ca", Running)]);
    let b = TestDomain::new("b.ns").with("pb", &[("cb", Stopped), ("cb2", Running)]);
    // Registered in reverse order: listing goes by domain name.
    let nri = env.start(&[b.clone(), a.clone()]).await;
    assert_eq!(nri.domains(), ["a.ns", "b.ns"]);

    let log = Log::default();
    let _p = run_stub(
        Recorder {
            sync_updates: vec![update("ca", false), update("cb2", false)],
            ..Recorder::new(&log)
        },
        "recorder",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-recorder"]).await;
    assert_eq!(
        log.take(),
        ["Synchronize pods=[pa,pb] containers=[ca,cb,cb2]"]
    );
    // Updates returned by the synchronization went to their domains.
    assert_eq!(a.applied.get(), ["update ca"]);
    assert_eq!(b.applied.get(), ["update cb2"]);

    // The listed states are what plugins know: a stopped container is only
    // removed, a running one is stopped first.
    assert_eq!(nri.container_state("ca"), LifecycleState::Running);
    assert_eq!(nri.container_state("cb"), LifecycleState::Stopped);
    assert_eq!(nri.pod_state("pb"), LifecycleState::Running);
    let pb = pod("pb");
    bounded(nri.remove_container(&pb, &container("cb", "pb")))
        .await
        .unwrap();
    let pa = pod("pa");
    bounded(nri.remove_container(&pa, &container("ca", "pa")))
        .await
        .unwrap();
    assert_eq!(
        log.take(),
        [
            "RemoveContainer cb",
            "StopContainer ca begin",
            "StopContainer ca",
            "RemoveContainer ca"
        ]
    );
    bounded(nri.stop()).await;
}

/// An eviction no domain can perform is logged by the adaptation with the
/// plugin that asked for it (the protocol has no field to return it).
/// Logs are captured with a thread-local subscriber: the test runs on a
/// current-thread runtime, so the adaptation's tasks log into it.
#[tokio::test]
async fn failed_evictions_are_logged_with_the_plugin() {
    let logs = Captured::default();
    let _guard = tracing::subscriber::set_default(logs.subscriber());
    let env = Env::new();
    let a = TestDomain::new("a.ns").with("pa", &[("ca", Running)]);
    let nri = env.start(std::slice::from_ref(&a)).await;
    let log = Log::default();
    let (_p, handle) = run_stub(Recorder::new(&log), "evicter", "10", &env.socket());
    wait_plugins(&nri, &["10-evicter"]).await;

    let failed = bounded(handle.update_containers(
        Vec::new(),
        vec![
            ContainerEviction {
                container_id: "ghost".into(),
                reason: "make room".into(),
            },
            ContainerEviction {
                container_id: "ca".into(),
                reason: "make room".into(),
            },
        ],
    ))
    .await
    .unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(a.applied.take(), ["evict ca"]);
    let warned = logs.lines_with(&["failed to evict", "10-evicter", "ghost"]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
    assert!(
        logs.lines_with(&["failed to evict", "container=ca "])
            .is_empty(),
        "{}",
        logs.text()
    );
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn duplicate_domain_names_are_refused() {
    let env = Env::new();
    let nri = env.nri();
    nri.register_domain(TestDomain::new("k8s.io")).unwrap();
    let err = nri.register_domain(TestDomain::new("k8s.io")).unwrap_err();
    assert!(matches!(err, Error::DomainExists(ref n) if n == "k8s.io"));
    assert!(nri.unregister_domain("k8s.io").is_some());
    assert!(nri.unregister_domain("k8s.io").is_none());
    nri.register_domain(TestDomain::new("k8s.io")).unwrap();
}

#[tokio::test]
async fn plugin_updates_reach_the_right_domain_and_failures_go_back() {
    let env = Env::new();
    let a = TestDomain::new("a.ns").with("pa", &[("ca", Running), ("ca-bad", Running)]);
    let b = TestDomain::new("b.ns").with("pb", &[("cb", Running)]);
    a.fail_updates_of("ca-bad");
    let nri = env.start(&[a.clone(), b.clone()]).await;
    let log = Log::default();
    let (_p, handle) = run_stub(
        Recorder {
            create_updates: vec![update("cb", false), update("ghost", false)],
            create_evictions: vec![ContainerEviction {
                container_id: "ca".into(),
                reason: "make room".into(),
            }],
            ..Recorder::new(&log)
        },
        "updater",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-updater"]).await;

    // Unsolicited updates: routed by container, failures returned.
    let failed = bounded(handle.update_containers(
        vec![
            update("ca", false),
            update("cb", false),
            update("ca-bad", false),
            update("ghost", false),
            update("ghost-ignored", true),
        ],
        vec![ContainerEviction {
            container_id: "cb".into(),
            reason: "too greedy".into(),
        }],
    ))
    .await
    .unwrap();
    let failed: Vec<_> = failed.iter().map(|u| u.container_id.as_str()).collect();
    assert_eq!(failed, ["ca-bad", "ghost"]);
    assert_eq!(a.applied.take(), ["update ca"]);
    assert_eq!(b.applied.take(), ["evict cb", "update cb"]);

    // Updates and evictions in a lifecycle reply are routed the same way.
    let created = bounded(nri.create_container(&pod("pb"), &container("new", "pb")))
        .await
        .unwrap();
    assert_eq!(a.applied.take(), ["evict ca"]);
    assert_eq!(b.applied.take(), ["update cb"]);
    let failed: Vec<_> = created
        .failed
        .updates
        .iter()
        .map(|u| u.container_id.as_str())
        .collect();
    assert_eq!(failed, ["ghost"]);
    assert!(created.failed.evictions.is_empty());
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn events_before_domain_registration_are_kept_or_clearly_refused() {
    let env = Env::new();
    let nri = env.nri();
    // An exit before anything runs: queued, no panic.
    nri.notify_container_exit(pod("pod0"), container("early", "pod0"));
    assert_eq!(nri.pending_exits(), 1);
    bounded(nri.start()).await.unwrap();

    let log = Log::default();
    let (_p, handle) = run_stub(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    assert_eq!(log.take(), ["Synchronize pods=[] containers=[]"]);

    // A plugin update with no domain: refused as a whole, with a clear
    // error the plugin receives.
    let err = bounded(handle.update_containers(vec![update("ctr0", false)], vec![]))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no NRI domain is registered"),
        "{err}"
    );

    // The runtime recovers a container and it exits, still before its
    // domain registers: the exit waits.
    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    bounded(nri.create_container(&p0, &c0)).await.unwrap();
    bounded(nri.start_container(&p0, &c0)).await.unwrap();
    nri.notify_container_exit(p0.clone(), c0.clone());
    tokio::task::yield_now().await;
    assert_eq!(nri.pending_exits(), 2);
    assert!(!log.has("StopContainer ctr0 begin"));

    // Registration releases the queue: the exit reaches the plugin; the
    // early one (a container plugins never heard of) sends nothing.
    let domain = TestDomain::new("k8s.io").with("pod0", &[("ctr0", Running)]);
    nri.register_domain(domain.clone()).unwrap();
    eventually("queued exit delivered", || log.has("StopContainer ctr0")).await;
    eventually("queue empty", || nri.pending_exits() == 0).await;
    assert!(!log.get().iter().any(|e| e.contains("early")));
    assert_eq!(nri.container_state("ctr0"), LifecycleState::Stopped);

    // Updates now reach the domain.
    let failed = bounded(handle.update_containers(vec![update("ctr0", false)], vec![]))
        .await
        .unwrap();
    assert!(failed.is_empty());
    assert_eq!(domain.applied.get(), ["update ctr0"]);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn an_exit_queued_before_start_is_delivered_after_start() {
    let env = Env::new();
    let domain = TestDomain::new("k8s.io").with("pod0", &[("ctr0", Running)]);
    let nri = env.nri();
    nri.notify_container_exit(pod("pod0"), container("ctr0", "pod0"));
    nri.register_domain(domain).unwrap();
    // Registered but not started: nothing to deliver to yet.
    assert_eq!(nri.pending_exits(), 1);
    bounded(nri.start()).await.unwrap();
    // The start-up synchronization learnt ctr0 as running; the exit then
    // stops it.
    eventually("exit delivered", || {
        nri.container_state("ctr0") == LifecycleState::Stopped
    })
    .await;
    assert_eq!(nri.pending_exits(), 0);
    bounded(nri.stop()).await;
}
