//! Plugins written directly on nri-mux and nri-ttrpc, to play old or broken
//! peers: StateChange-only plugins, invalid registrations, plugins that
//! never register or do not understand split synchronization.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nri_api::service::{
    plugin as method, runtime as runtime_method, PLUGIN_SERVICE, RUNTIME_SERVICE,
};
use nri_api::*;
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{Client, Server, Status};
use support::*;
use tokio::net::UnixStream;

/// The plugin side of one raw connection.
struct RawPlugin {
    mux: Mux,
    client: Client,
    /// Each Synchronize message: `pods ctrs more encoded-size`.
    syncs: Log,
}

/// Connects to `socket` and serves a Plugin service with Configure
/// (answering `events`), Synchronize (acknowledging split messages only if
/// `split`), CreateContainer (empty) and StateChange (logged); no dedicated
/// notification RPCs, no UpdatePodSandbox, no validation.
async fn connect(socket: &Path, events: i32, split: bool, log: Log) -> RawPlugin {
    let stream = bounded(UnixStream::connect(socket)).await.unwrap();
    let mux = Mux::new(stream, MuxOptions::default());
    let plugin_conn = mux.open(PLUGIN_SERVICE_CONN).unwrap();
    let runtime_conn = mux.open(RUNTIME_SERVICE_CONN).unwrap();
    let mut server = Server::new();
    server.register_msg(
        PLUGIN_SERVICE,
        method::CONFIGURE,
        move |_ctx, _req: ConfigureRequest| async move {
            Ok::<_, Status>(ConfigureResponse {
                events,
                ..Default::default()
            })
        },
    );
    let syncs = Log::default();
    let sync_log = syncs.clone();
    server.register_msg(
        PLUGIN_SERVICE,
        method::SYNCHRONIZE,
        move |_ctx, req: SynchronizeRequest| {
            let log = sync_log.clone();
            async move {
                log.push(format!(
                    "{} {} {} {}",
                    req.pods.len(),
                    req.containers.len(),
                    req.more,
                    prost::Message::encoded_len(&req)
                ));
                Ok::<_, Status>(SynchronizeResponse {
                    update: Vec::new(),
                    more: split && req.more,
                })
            }
        },
    );
    server.register_msg(
        PLUGIN_SERVICE,
        method::CREATE_CONTAINER,
        |_ctx, _req: CreateContainerRequest| async move {
            Ok::<_, Status>(CreateContainerResponse::default())
        },
    );
    let state_log = log.clone();
    server.register_msg(
        PLUGIN_SERVICE,
        method::STATE_CHANGE,
        move |_ctx, req: StateChangeEvent| {
            let log = state_log.clone();
            async move {
                let ctr = req.container.map(|c| c.id).unwrap_or_default();
                let pod = req.pod.map(|p| p.id).unwrap_or_default();
                log.push(format!("StateChange {} {pod} {ctr}", req.event));
                Ok::<_, Status>(Empty {})
            }
        },
    );
    tokio::spawn(Arc::new(server).serve(plugin_conn));
    RawPlugin {
        mux,
        client: Client::new(runtime_conn),
        syncs,
    }
}

impl RawPlugin {
    async fn register(&self, name: &str, idx: &str) -> Result<Empty, nri_ttrpc::Error> {
        let req = RegisterPluginRequest {
            plugin_name: name.into(),
            plugin_idx: idx.into(),
            nri_version: String::new(),
        };
        bounded(self.client.call_msg(
            RUNTIME_SERVICE,
            runtime_method::REGISTER_PLUGIN,
            &req,
            Some(WAIT),
        ))
        .await
    }
}

fn mask(events: &[Event]) -> i32 {
    EventMask::from_events(events).raw()
}

#[tokio::test]
async fn old_plugins_get_notifications_through_state_change() {
    let env = Env::new();
    let nri = env.start().await;
    let log = Log::default();
    let events = mask(&[
        Event::RunPodSandbox,
        Event::StartContainer,
        Event::RemoveContainer,
    ]);
    let raw = connect(&env.socket(), events, true, log.clone()).await;
    raw.register("old", "10").await.unwrap();
    wait_plugins(&nri, &["10-old"]).await;

    let pod = Some(pod("pod0"));
    let ctr = Some(container("ctr0", "pod0"));
    bounded(async {
        nri.run_pod_sandbox(RunPodSandboxRequest { pod: pod.clone() })
            .await
            .unwrap();
        for _ in 0..2 {
            nri.start_container(StartContainerRequest {
                pod: pod.clone(),
                container: ctr.clone(),
            })
            .await
            .unwrap();
        }
        nri.remove_container(RemoveContainerRequest {
            pod: pod.clone(),
            container: ctr.clone(),
        })
        .await
        .unwrap();
        // Not subscribed: nothing sent.
        nri.stop_pod_sandbox(StopPodSandboxRequest { pod: pod.clone() })
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        log.take(),
        [
            "StateChange 1 pod0 ",
            "StateChange 6 pod0 ctr0",
            "StateChange 6 pod0 ctr0",
            "StateChange 11 pod0 ctr0",
        ]
    );
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn subscribe_all_plugin_without_new_methods_is_unsubscribed_from_them() {
    let env = Env::new();
    let nri = env.start().await;
    let log = Log::default();
    let raw = connect(&env.socket(), 0, true, log.clone()).await;
    raw.register("all", "10").await.unwrap();
    wait_plugins(&nri, &["10-all"]).await;
    let events = nri.plugins()[0].events;
    assert_eq!(events, EventMask::VALID_EVENTS);

    let pod = Some(pod("pod0"));
    bounded(nri.update_pod_sandbox(UpdatePodSandboxRequest {
        pod: pod.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    bounded(nri.create_container(CreateContainerRequest {
        pod: pod.clone(),
        container: Some(container("c", "pod0")),
    }))
    .await
    .unwrap();
    let events = nri.plugins()[0].events;
    assert!(!events.is_set(Event::UpdatePodSandbox));
    assert!(!events.is_set(Event::ValidateContainerAdjustment));
    assert!(events.is_set(Event::CreateContainer));
    // Later calls do not try again.
    bounded(nri.update_pod_sandbox(UpdatePodSandboxRequest {
        pod,
        ..Default::default()
    }))
    .await
    .unwrap();
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn explicit_subscription_to_an_unimplemented_method_fails_the_call() {
    let env = Env::new();
    let nri = env.start().await;
    let raw = connect(
        &env.socket(),
        mask(&[Event::UpdatePodSandbox]),
        true,
        Log::default(),
    )
    .await;
    raw.register("partial", "10").await.unwrap();
    wait_plugins(&nri, &["10-partial"]).await;
    let err = bounded(nri.update_pod_sandbox(UpdatePodSandboxRequest::default()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Unimplemented"), "{err}");
    assert_eq!(nri.plugins().len(), 1);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn invalid_names_and_indices_are_refused() {
    let env = Env::new();
    let nri = env.start().await;
    let raw = connect(&env.socket(), 0, true, Log::default()).await;
    let err = raw.register("foo,bar", "10").await.unwrap_err();
    assert_eq!(
        err.status().unwrap().message(),
        r#"invalid plugin name: invalid plugin name "foo,bar": contains invalid character ','"#
    );
    let raw = connect(&env.socket(), 0, true, Log::default()).await;
    let err = raw.register("ok", "1").await.unwrap_err();
    assert_eq!(
        err.status().unwrap().message(),
        r#"invalid plugin index: invalid plugin index "1", must be 2 digits"#
    );
    // The refused connections do not hold up the next plugin.
    let raw = connect(&env.socket(), 0, true, Log::default()).await;
    raw.register("good", "10").await.unwrap();
    wait_plugins(&nri, &["10-good"]).await;
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn a_plugin_that_never_registers_is_disconnected() {
    let env = Env::new();
    let nri = env
        .builder()
        .registration_timeout(Duration::from_millis(200))
        .build();
    bounded(nri.start()).await.unwrap();
    let silent = connect(&env.socket(), 0, true, Log::default()).await;
    bounded(silent.mux.closed()).await;
    // The next connection is served.
    let raw = connect(&env.socket(), 0, true, Log::default()).await;
    raw.register("next", "10").await.unwrap();
    wait_plugins(&nri, &["10-next"]).await;
    bounded(nri.stop()).await;
}

/// The Synchronize messages a raw plugin received, once it is registered:
/// `(pods, containers, more, encoded size)` each.
async fn synchronized(
    nri: &nri_adaptation::Adaptation,
    raw: &RawPlugin,
    name: &str,
) -> Vec<(usize, usize, bool, usize)> {
    raw.register(name, "10").await.unwrap();
    wait_plugins(nri, &[&format!("10-{name}")]).await;
    raw.syncs
        .get()
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2] == "true",
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_table_that_fits_one_message_is_not_split() {
    let env = Env::new();
    {
        // About 3 MiB: less than the message size limit.
        let value = "z".repeat(40 * 1024);
        let mut ctrs = env.runtime.containers.lock().unwrap();
        for i in 0..75 {
            let mut c = container(&format!("ctr{i}"), "pod0");
            c.annotations.insert("big".into(), value.clone());
            ctrs.push(c);
        }
    }
    let nri = env.start().await;
    let raw = connect(&env.socket(), 0, false, Log::default()).await;
    let messages = synchronized(&nri, &raw, "whole").await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!((messages[0].1, messages[0].2), (75, false));
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn plugin_without_split_sync_support_is_rejected() {
    let env = Env::new();
    {
        let big = "y".repeat(512 * 1024);
        let mut ctrs = env.runtime.containers.lock().unwrap();
        for i in 0..12 {
            let mut c = container(&format!("ctr{i}"), "pod0");
            c.annotations.insert("big".into(), big.clone());
            ctrs.push(c);
        }
    }
    let nri = env.start().await;
    let raw = connect(&env.socket(), 0, false, Log::default()).await;
    raw.register("old", "10").await.unwrap();
    bounded(async {
        while env.runtime.sync_errors.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        env.runtime.sync_errors.lock().unwrap().clone(),
        ["plugin does not handle split sync requests"]
    );
    bounded(raw.mux.closed()).await;
    assert!(nri.plugins().is_empty());
    bounded(nri.stop()).await;
}
