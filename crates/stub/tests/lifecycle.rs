//! A whole plugin session against the in-process fake runtime: registration,
//! configuration, split synchronization, every event (dedicated RPCs and StateChange),
//! an unsolicited update, and shutdown.

use crate::support;

use std::sync::Arc;

use nri_api::service::plugin as method;
use nri_api::*;
use nri_stub::{Stub, PLUGIN_NRI_VERSION};
use support::recorder::Recorder;
use support::*;

/// Starts a stub for `plugin` on a socket pair; returns the running stub task and the
/// runtime side, after registration.
async fn start(
    plugin: Recorder,
) -> (
    tokio::task::JoinHandle<Result<(), nri_stub::Error>>,
    FakeRuntime,
) {
    let (run, runtime, reg) = run_registered(plugin, "recorder", "42", Registration::Accept).await;
    assert_eq!(reg.plugin_name, "recorder");
    assert_eq!(reg.plugin_idx, "42");
    assert_eq!(reg.nri_version, PLUGIN_NRI_VERSION);
    (run, runtime)
}

#[tokio::test]
async fn full_session() {
    let plugin = Recorder::default();
    let (run, mut rt) = start(plugin.clone()).await;

    // Configure: empty mask from the handler means every implemented event.
    let reply = rt.configure().await.unwrap();
    assert_eq!(reply.events, 0x3FFF);
    assert_eq!(reply.failure_policy, None);
    let (name, info) = plugin.configured.lock().unwrap().clone().unwrap();
    assert_eq!(name, "42-recorder");
    assert_configured(&info);
    assert_eq!(info.runtime.version, "v2.2.0");
    assert!(!info.runtime.nri_version_inferred);

    // Split synchronize in three chunks: one handler call with everything.
    let chunks = [
        (
            vec![pod("p1"), pod("p2")],
            vec![container("c1", "p1")],
            true,
        ),
        (
            vec![pod("p3")],
            vec![container("c2", "p1"), container("c3", "p2")],
            true,
        ),
        (vec![], vec![container("c4", "p3")], false),
    ];
    rt.synchronize_chunks(chunks, || plugin.take_calls()).await;
    assert_eq!(
        plugin.take_calls(),
        vec!["synchronize pods=p1,p2,p3 ctrs=c1,c2,c3,c4"]
    );

    // Every event through its dedicated RPC.
    let p = || Some(pod("pod"));
    let c = || Some(container("ctr", "pod"));
    let ContainerReplies {
        created,
        updated,
        stopped,
    } = rt
        .lifecycle_events(&pod("pod"), &container("ctr", "pod"), 2048)
        .await;
    assert_recorder_created(created);
    // The unsolicited update the handler sent on the way.
    let unsolicited = rt.update_request().await;
    let ids: Vec<_> = unsolicited
        .update
        .iter()
        .map(|u| u.container_id.as_str())
        .collect();
    assert_eq!(ids, vec!["ctr-ok", FAILING_CONTAINER]);
    assert_eq!(unsolicited.evict[0].container_id, "ctr-evicted");

    assert_eq!(updated.update, vec![ContainerUpdate::for_container("ctr")]);
    assert_eq!(
        stopped.update,
        vec![ContainerUpdate::for_container("after-stop")]
    );
    let valid: ValidateContainerAdjustmentResponse = rt
        .call(
            method::VALIDATE_CONTAINER_ADJUSTMENT,
            &ValidateContainerAdjustmentRequest {
                pod: p(),
                container: c(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(!valid.reject);

    assert_eq!(
        plugin.take_calls(),
        vec![
            "run_pod_sandbox pod",
            "update_pod_sandbox pod overhead=10 resources=512",
            "post_update_pod_sandbox pod",
            "stop_pod_sandbox pod",
            "remove_pod_sandbox pod",
            "create_container pod/ctr",
            "update_containers failed=ctr-fails",
            "post_create_container pod/ctr",
            "start_container pod/ctr",
            "post_start_container pod/ctr",
            "update_container pod/ctr resources=2048",
            "post_update_container pod/ctr",
            "stop_container pod/ctr",
            "remove_container pod/ctr",
            "validate_container_adjustment ctr",
        ]
    );

    // Every StateChange variant, as runtimes before v0.12 send them.
    let legacy = [
        (Event::RunPodSandbox, false, "run_pod_sandbox sc-pod"),
        (
            Event::PostUpdatePodSandbox,
            false,
            "post_update_pod_sandbox sc-pod",
        ),
        (Event::StopPodSandbox, false, "stop_pod_sandbox sc-pod"),
        (Event::RemovePodSandbox, false, "remove_pod_sandbox sc-pod"),
        (
            Event::PostCreateContainer,
            true,
            "post_create_container sc-pod/sc-ctr",
        ),
        (Event::StartContainer, true, "start_container sc-pod/sc-ctr"),
        (
            Event::PostStartContainer,
            true,
            "post_start_container sc-pod/sc-ctr",
        ),
        (
            Event::PostUpdateContainer,
            true,
            "post_update_container sc-pod/sc-ctr",
        ),
        (
            Event::RemoveContainer,
            true,
            "remove_container sc-pod/sc-ctr",
        ),
    ];
    for (event, with_container, expected) in legacy {
        let evt = StateChangeEvent {
            event: event as i32,
            pod: Some(pod("sc-pod")),
            container: with_container.then(|| container("sc-ctr", "sc-pod")),
        };
        let _: Empty = rt.call(method::STATE_CHANGE, &evt).await.unwrap();
        assert_eq!(plugin.take_calls(), vec![expected.to_string()], "{event:?}");
    }
    // Events that have no StateChange form are acknowledged and ignored.
    for event in [
        Event::CreateContainer,
        Event::UpdateContainer,
        Event::StopContainer,
        Event::Unknown,
    ] {
        let evt = StateChangeEvent {
            event: event as i32,
            pod: Some(pod("x")),
            container: Some(container("y", "x")),
        };
        let _: Empty = rt.call(method::STATE_CHANGE, &evt).await.unwrap();
    }
    let unknown = StateChangeEvent {
        event: 99,
        pod: None,
        container: None,
    };
    let _: Empty = rt.call(method::STATE_CHANGE, &unknown).await.unwrap();
    assert!(plugin.take_calls().is_empty());

    // Shutdown: the handler runs and run() ends with Ok.
    let _: Empty = rt.call(method::SHUTDOWN, &Empty {}).await.unwrap();
    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(plugin.take_calls(), vec!["shutdown"]);
}

#[tokio::test]
async fn shutdown_ends_run_even_if_runtime_keeps_the_connection() {
    let plugin = Recorder::default();
    let (run, rt) = start(plugin.clone()).await;
    rt.configure().await.unwrap();
    let _: Empty = rt.call(method::SHUTDOWN, &Empty {}).await.unwrap();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    // The stub closed its end.
    tokio::time::timeout(WAIT, rt.mux.closed()).await.unwrap();
}

#[tokio::test]
async fn handler_errors_reach_the_runtime() {
    let plugin = Recorder::default();
    let (_run, rt) = start(plugin.clone()).await;
    rt.configure().await.unwrap();

    // A validator's error rejects the adjustment with the error text as reason.
    let reply: ValidateContainerAdjustmentResponse = rt
        .call(
            method::VALIDATE_CONTAINER_ADJUSTMENT,
            &ValidateContainerAdjustmentRequest {
                container: Some(container("forbidden", "p")),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(reply.reject);
    assert_eq!(reply.reason, "containers named forbidden are not allowed");

    // Any other handler's error fails the call with code Unknown and the error text.
    let err = rt
        .call::<_, RunPodSandboxResponse>(
            method::RUN_POD_SANDBOX,
            &RunPodSandboxRequest {
                pod: Some(pod("fail")),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), nri_ttrpc::Code::Unknown);
    assert_eq!(err.status().map(|s| s.message()), Some("pod fail refused"));
    // The same through StateChange.
    let evt = StateChangeEvent {
        event: Event::RunPodSandbox as i32,
        pod: Some(pod("fail")),
        container: None,
    };
    let err = rt
        .call::<_, Empty>(method::STATE_CHANGE, &evt)
        .await
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.message()), Some("pod fail refused"));
}

#[tokio::test]
async fn subscription_subset_filters_state_change() {
    let plugin = Recorder {
        subscribe: EventMask::from_events(&[Event::StartContainer]),
        ..Recorder::default()
    };
    let (_run, rt) = start(plugin.clone()).await;
    let reply = rt.configure().await.unwrap();
    assert_eq!(reply.events, 0x20);

    for event in [
        Event::StartContainer,
        Event::RemoveContainer,
        Event::RunPodSandbox,
    ] {
        let evt = StateChangeEvent {
            event: event as i32,
            pod: Some(pod("p")),
            container: Some(container("c", "p")),
        };
        let _: Empty = rt.call(method::STATE_CHANGE, &evt).await.unwrap();
    }
    assert_eq!(plugin.take_calls(), vec!["start_container p/c"]);
}

#[tokio::test]
async fn old_runtime_keeps_default_timeouts_and_gets_inferred_version() {
    let plugin = Recorder {
        subscribe: EventMask::from_events(&[Event::CreateContainer]),
        ..Recorder::default()
    };
    let (_run, rt) = start(plugin.clone()).await;
    // An NRI v0.6 runtime: no timeouts, no NRI version.
    let req = ConfigureRequest {
        runtime_name: "containerd".into(),
        runtime_version: "v1.7.20".into(),
        ..Default::default()
    };
    let reply: ConfigureResponse = rt.call(method::CONFIGURE, &req).await.unwrap();
    assert_eq!(reply.events, 0x8);
    let (_, info) = plugin.configured.lock().unwrap().clone().unwrap();
    assert_eq!(
        info.runtime.registration_timeout,
        nri_stub::DEFAULT_REGISTRATION_TIMEOUT
    );
    assert_eq!(
        info.runtime.request_timeout,
        nri_stub::DEFAULT_REQUEST_TIMEOUT
    );
    assert_eq!(info.runtime.nri_version.as_deref(), Some("v0.6.1"));
    assert!(info.runtime.nri_version_inferred);
}

#[tokio::test]
async fn one_chunk_synchronize() {
    let plugin = Recorder::default();
    let (_run, rt) = start(plugin.clone()).await;
    rt.configure().await.unwrap();
    let reply: SynchronizeResponse = rt
        .call(
            method::SYNCHRONIZE,
            &SynchronizeRequest {
                pods: vec![pod("a")],
                containers: vec![container("b", "a")],
                more: false,
            },
        )
        .await
        .unwrap();
    assert!(!reply.more);
    assert_eq!(reply.update.len(), 1);
    assert_eq!(plugin.take_calls(), vec!["synchronize pods=a ctrs=b"]);
}

#[tokio::test]
async fn events_before_configure_are_refused() {
    let plugin = Recorder::default();
    let (_run, rt) = start(plugin.clone()).await;
    let err = rt
        .call::<_, RunPodSandboxResponse>(
            method::RUN_POD_SANDBOX,
            &RunPodSandboxRequest {
                pod: Some(pod("p")),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), nri_ttrpc::Code::FailedPrecondition);
    assert!(plugin.take_calls().is_empty());
}

#[tokio::test]
async fn runtime_handle_follows_the_run() {
    let plugin = Recorder::default();
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = Arc::new(
        Stub::builder(plugin)
            .name("recorder")
            .index("42")
            .connection(plugin_end)
            .build()
            .unwrap(),
    );
    let handle = stub.runtime_handle();
    assert!(!handle.is_connected());
    assert!(matches!(
        handle.update_containers(vec![], vec![]).await,
        Err(nri_stub::Error::NotConnected)
    ));
    let run = tokio::spawn({
        let stub = Arc::clone(&stub);
        async move { stub.run().await }
    });
    rt.registration().await;
    rt.configure().await.unwrap();
    assert!(handle.is_connected());
    let failed = handle
        .update_containers(
            vec![ContainerUpdate::for_container(FAILING_CONTAINER)],
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        failed,
        vec![ContainerUpdate::for_container(FAILING_CONTAINER)]
    );
    assert_eq!(rt.update_request().await.update.len(), 1);

    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(
        matches!(outcome, Err(nri_stub::Error::Disconnected)),
        "{outcome:?}"
    );
    assert!(!handle.is_connected());
}
