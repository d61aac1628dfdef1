//! Lifecycle bookkeeping with nri-stub plugins on a socket: stops and
//! removals reach plugins exactly once, undo of a failed create, exit
//! notifications delivered in the background, and the disabled no-op.

mod support;

use std::sync::Arc;

use nri_api::*;
use nri_integration::{Config, LifecycleState, Nri};
use support::*;
use tokio::sync::Semaphore;

#[tokio::test]
async fn stops_and_removals_reach_plugins_exactly_once() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let _p = run_stub(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    log.take();

    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    let c1 = container("ctr1", "pod0");
    bounded(async {
        nri.run_pod_sandbox(&p0).await.unwrap();
        nri.create_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Created);
        nri.start_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Running);
        // Stop, then stop again, then remove twice.
        nri.stop_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Stopped);
        nri.stop_container(&p0, &c0).await.unwrap();
        nri.remove_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Removed);
        nri.remove_container(&p0, &c0).await.unwrap();
        nri.stop_container(&p0, &c0).await.unwrap();

        // Removed without a stop: the stop is sent first.
        nri.create_container(&p0, &c1).await.unwrap();
        nri.start_container(&p0, &c1).await.unwrap();
        nri.remove_container(&p0, &c1).await.unwrap();

        // The pod: stopped twice, removed twice.
        nri.stop_pod_sandbox(&p0).await.unwrap();
        nri.stop_pod_sandbox(&p0).await.unwrap();
        nri.remove_pod_sandbox(&p0).await.unwrap();
        nri.remove_pod_sandbox(&p0).await.unwrap();

        // Another pod removed without a stop.
        let p1 = pod("pod1");
        nri.run_pod_sandbox(&p1).await.unwrap();
        nri.remove_pod_sandbox(&p1).await.unwrap();
    })
    .await;

    assert_eq!(
        log.take(),
        [
            "RunPodSandbox pod0",
            "CreateContainer ctr0",
            "StartContainer ctr0",
            "StopContainer ctr0 begin",
            "StopContainer ctr0",
            "RemoveContainer ctr0",
            "CreateContainer ctr1",
            "StartContainer ctr1",
            "StopContainer ctr1 begin",
            "StopContainer ctr1",
            "RemoveContainer ctr1",
            "StopPodSandbox pod0",
            "RemovePodSandbox pod0",
            "RunPodSandbox pod1",
            "StopPodSandbox pod1",
            "RemovePodSandbox pod1",
        ]
    );
    assert_eq!(nri.pod_state("pod0"), LifecycleState::Removed);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn a_failed_stop_or_removal_is_delivered_again_on_retry() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let recorder = Recorder::new(&log);
    let fail = recorder.fail_teardown.clone();
    let _p = run_stub(recorder, "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    let arm = || fail.store(true, std::sync::atomic::Ordering::SeqCst);

    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    let c1 = container("ctr1", "pod0");
    bounded(async {
        nri.run_pod_sandbox(&p0).await.unwrap();
        nri.create_container(&p0, &c0).await.unwrap();
        nri.start_container(&p0, &c0).await.unwrap();
        log.take();

        // A failed stop leaves the container running for the plugins; the
        // retry reaches them.
        arm();
        nri.stop_container(&p0, &c0).await.unwrap_err();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Running);
        nri.stop_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Stopped);
        // A failed removal: the retry sends it again (and no stop).
        arm();
        nri.remove_container(&p0, &c0).await.unwrap_err();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Stopped);
        nri.remove_container(&p0, &c0).await.unwrap();
        assert_eq!(nri.container_state("ctr0"), LifecycleState::Removed);
        // A removal whose implied stop failed but which reached the
        // plugins is over: nothing is sent again.
        nri.create_container(&p0, &c1).await.unwrap();
        nri.start_container(&p0, &c1).await.unwrap();
        arm();
        nri.remove_container(&p0, &c1).await.unwrap_err();
        assert_eq!(nri.container_state("ctr1"), LifecycleState::Removed);
        nri.remove_container(&p0, &c1).await.unwrap();
        // The pod.
        arm();
        nri.stop_pod_sandbox(&p0).await.unwrap_err();
        nri.stop_pod_sandbox(&p0).await.unwrap();
        arm();
        nri.remove_pod_sandbox(&p0).await.unwrap_err();
        nri.remove_pod_sandbox(&p0).await.unwrap();
        // Done: nothing more is sent.
        nri.remove_pod_sandbox(&p0).await.unwrap();
        nri.remove_container(&p0, &c0).await.unwrap();
    })
    .await;

    assert_eq!(
        log.take(),
        [
            "StopContainer ctr0 begin",
            "StopContainer ctr0",
            "StopContainer ctr0 begin",
            "StopContainer ctr0",
            "RemoveContainer ctr0",
            "RemoveContainer ctr0",
            "CreateContainer ctr1",
            "StartContainer ctr1",
            "StopContainer ctr1 begin",
            "StopContainer ctr1",
            "RemoveContainer ctr1",
            "StopPodSandbox pod0",
            "StopPodSandbox pod0",
            "RemovePodSandbox pod0",
            "RemovePodSandbox pod0",
        ]
    );
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn concurrent_stops_reach_plugins_once() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let _p = run_stub(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;

    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    bounded(nri.create_container(&p0, &c0)).await.unwrap();
    bounded(nri.start_container(&p0, &c0)).await.unwrap();
    // An exit notification and two explicit stops race.
    nri.notify_container_exit(p0.clone(), c0.clone());
    let (a, b) =
        bounded(async { tokio::join!(nri.stop_container(&p0, &c0), nri.stop_container(&p0, &c0)) })
            .await;
    a.unwrap();
    b.unwrap();
    eventually("exit queue drained", || nri.pending_exits() == 0).await;
    bounded(nri.remove_container(&p0, &c0)).await.unwrap();
    assert_eq!(log.count("StopContainer ctr0"), 1, "{:?}", log.get());
    assert_eq!(log.count("RemoveContainer ctr0"), 1);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn undo_of_a_failed_create_sends_stop_and_remove() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let first = Log::default();
    let refusing = Log::default();
    let _a = run_stub(Recorder::new(&first), "first", "10", &env.socket());
    let _b = run_stub(
        Recorder {
            fail_create: Some("bad".into()),
            ..Recorder::new(&refusing)
        },
        "refusing",
        "20",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-first", "20-refusing"]).await;
    first.take();
    refusing.take();

    let p0 = pod("pod0");
    let bad = container("bad", "pod0");
    let err = bounded(nri.create_container(&p0, &bad)).await.unwrap_err();
    assert!(err.to_string().contains("refusing this container"), "{err}");
    // The first plugin saw the creation and may have reserved something.
    assert_eq!(first.get(), ["CreateContainer bad"]);
    assert_eq!(nri.container_state("bad"), LifecycleState::Created);

    bounded(nri.undo_create_container(&p0, &bad)).await.unwrap();
    for log in [&first, &refusing] {
        let got = log.get();
        assert_eq!(
            got[got.len() - 3..],
            [
                "StopContainer bad begin",
                "StopContainer bad",
                "RemoveContainer bad"
            ]
        );
    }
    assert_eq!(nri.container_state("bad"), LifecycleState::Removed);
    // Undo and removal after the undo send nothing more.
    let before = first.get().len();
    bounded(nri.undo_create_container(&p0, &bad)).await.unwrap();
    bounded(nri.remove_container(&p0, &bad)).await.unwrap();
    assert_eq!(first.get().len(), before);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn exit_notifications_do_not_wait_for_plugins() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let gate = Arc::new(Semaphore::new(0));
    let _p = run_stub(
        Recorder {
            stop_gate: Some(gate.clone()),
            ..Recorder::new(&log)
        },
        "slow",
        "10",
        &env.socket(),
    );
    wait_plugins(&nri, &["10-slow"]).await;

    let p0 = pod("pod0");
    let ids = ["ctr0", "ctr1", "ctr2"];
    for id in ids {
        let c = container(id, "pod0");
        bounded(nri.create_container(&p0, &c)).await.unwrap();
        bounded(nri.start_container(&p0, &c)).await.unwrap();
    }

    nri.notify_container_exit(p0.clone(), container("ctr0", "pod0"));
    // The plugin's StopContainer handler is now blocked on the gate...
    eventually("StopContainer ctr0 reached the plugin", || {
        log.has("StopContainer ctr0 begin")
    })
    .await;
    // ...and notifications still return at once: they queue up, coalesced
    // per container.
    nri.notify_container_exit(p0.clone(), container("ctr1", "pod0"));
    nri.notify_container_exit(p0.clone(), container("ctr2", "pod0"));
    nri.notify_container_exit(p0.clone(), container("ctr1", "pod0"));
    nri.notify_container_exit(p0.clone(), container("ctr0", "pod0"));
    assert_eq!(nri.pending_exits(), 3);
    assert!(!log.has("StopContainer ctr0"));

    gate.add_permits(100);
    eventually("every exit delivered", || {
        ids.iter().all(|id| log.has(&format!("StopContainer {id}")))
    })
    .await;
    eventually("queue empty", || nri.pending_exits() == 0).await;
    for id in ids {
        assert_eq!(nri.container_state(id), LifecycleState::Stopped);
        assert_eq!(
            log.count(&format!("StopContainer {id}")),
            1,
            "{:?}",
            log.get()
        );
        // A late explicit stop sends nothing; removal sends only the removal.
        let c = container(id, "pod0");
        bounded(nri.stop_container(&p0, &c)).await.unwrap();
        bounded(nri.remove_container(&p0, &c)).await.unwrap();
        assert_eq!(log.count(&format!("StopContainer {id}")), 1);
        assert_eq!(log.count(&format!("RemoveContainer {id}")), 1);
    }
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn a_pending_exit_is_dropped_by_removal() {
    let env = Env::new();
    // No domain yet: exits are held.
    let nri = env.nri();
    bounded(nri.start()).await.unwrap();
    let log = Log::default();
    let _p = run_stub(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    bounded(nri.create_container(&p0, &c0)).await.unwrap();
    nri.notify_container_exit(p0.clone(), c0.clone());
    assert_eq!(nri.pending_exits(), 1);
    bounded(nri.remove_container(&p0, &c0)).await.unwrap();
    assert_eq!(nri.pending_exits(), 0);
    nri.register_domain(TestDomain::new("ns")).unwrap();
    assert_eq!(log.count("StopContainer ctr0"), 1);
    assert_eq!(log.count("RemoveContainer ctr0"), 1);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn disabled_is_a_no_op() {
    let env = Env::new();
    let nri = Nri::new(Config {
        enable: false,
        ..env.config()
    });
    assert!(!nri.is_enabled());
    nri.register_domain(TestDomain::new("ns")).unwrap();
    bounded(nri.start()).await.unwrap();
    assert!(!nri.is_running());
    assert!(!env.socket().exists(), "no socket when disabled");
    assert!(nri.plugins().is_empty());
    assert!(!bounded(nri.block_plugin_sync()).await.is_active());

    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    let mut resources = LinuxResources::default();
    resources.memory_mut().limit = opt(1 << 20);
    bounded(async {
        nri.run_pod_sandbox(&p0).await.unwrap();
        nri.update_pod_sandbox(&p0, None, Some(&resources))
            .await
            .unwrap();
        let created = nri.create_container(&p0, &c0).await.unwrap();
        assert_eq!(created, Default::default());
        nri.post_create_container(&p0, &c0).await.unwrap();
        nri.start_container(&p0, &c0).await.unwrap();
        let updated = nri
            .update_container(&p0, &c0, Some(&resources))
            .await
            .unwrap();
        assert_eq!(updated.resources.as_ref(), Some(&resources));
        assert!(!updated.adjusted && updated.failed.is_empty());
        assert!(nri.stop_container(&p0, &c0).await.unwrap().is_empty());
        nri.notify_container_exit(p0.clone(), c0.clone());
        nri.remove_container(&p0, &c0).await.unwrap();
        nri.undo_create_container(&p0, &c0).await.unwrap();
        nri.stop_pod_sandbox(&p0).await.unwrap();
        nri.remove_pod_sandbox(&p0).await.unwrap();
    })
    .await;
    assert_eq!(nri.pending_exits(), 0);
    assert_eq!(nri.container_state("ctr0"), LifecycleState::Removed);
    assert_eq!(nri.pod_state("pod0"), LifecycleState::Removed);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn update_container_returns_the_merged_resources() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let p0 = pod("pod0");
    let c0 = container("ctr0", "pod0");
    let mut resources = LinuxResources::default();
    resources.memory_mut().limit = opt(1 << 20);
    // No plugin: the requested resources come back unchanged.
    let same = bounded(nri.update_container(&p0, &c0, Some(&resources)))
        .await
        .unwrap();
    assert!(!same.adjusted);
    assert_eq!(same.resources.as_ref(), Some(&resources));

    let log = Log::default();
    let _p = run_stub(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    let changed = bounded(nri.update_container(&p0, &c0, Some(&resources)))
        .await
        .unwrap();
    assert!(changed.adjusted);
    let got = changed.resources.unwrap();
    assert_eq!(got.cpu.unwrap().shares.unwrap().value, 123);
    assert_eq!(got.memory.unwrap().limit.unwrap().value, 1 << 20);
    bounded(nri.stop()).await;
}
