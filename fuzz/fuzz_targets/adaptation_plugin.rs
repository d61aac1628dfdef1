//! nri-adaptation: a plugin that sends arbitrary requests and replies.
//!
//! The adaptation runs with its external-plugin socket in a temporary
//! directory. A plugin made of nri-mux and nri-ttrpc connects, calls the
//! Runtime service (RegisterPlugin, UpdateContainers) with fuzzed or valid
//! payloads, and answers every Plugin request with the reply the input
//! gives for that method (fuzzed bytes, an error status, or nothing
//! special). The runtime then runs a pod and container lifecycle with
//! fuzzed requests, so the adaptation decodes and merges the fuzzed
//! replies.
//!
//! Real sockets need the real clock (a paused clock jumps while the kernel
//! holds data in flight), so the adaptation's timeouts are short.
//!
//! Checked: no panic, no hang: every lifecycle call returns Ok or Err, and
//! `stop` returns.
#![no_main]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::service::{
    plugin as method, runtime as runtime_method, PLUGIN_SERVICE, RUNTIME_SERVICE,
};
use nri_api::*;
use nri_fuzz::run_real;
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{BoxFuture, Client, Code, Server, Status};
use prost::Message;

#[derive(Arbitrary, Debug, Clone)]
enum Reply {
    Bytes(Vec<u8>),
    Fail(u8, String),
}

#[derive(Arbitrary, Debug)]
enum Register {
    Valid { name: String, index: u8 },
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    register: Register,
    /// Events subscribed to in the Configure reply (unless `replies` has one).
    events: i32,
    /// Replies by Plugin method (index into the method list).
    replies: Vec<(u8, Reply)>,
    updates: Vec<Vec<u8>>,
    /// Requests for the runtime's lifecycle calls, as protobuf bytes.
    lifecycle: Vec<(u8, Vec<u8>)>,
}

struct Hooks;

#[nri_adaptation::async_trait]
impl RuntimeHooks for Hooks {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let pod = PodSandbox {
            id: "pod0".into(),
            name: "pod".into(),
            ..Default::default()
        };
        let ctr = Container {
            id: "ctr0".into(),
            pod_sandbox_id: "pod0".into(),
            ..Default::default()
        };
        sync.synchronize(&[pod], &[ctr]).await?;
        Ok(())
    }

    async fn update_containers(
        &self,
        _plugin: &str,
        updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(updates
            .into_iter()
            .filter(|u| u.container_id != "ctr0")
            .collect())
    }
}

fn plugin_server(replies: BTreeMap<&'static str, Reply>, events: i32) -> Server {
    let mut server = Server::new();
    for &name in method::ALL {
        let reply = replies.get(name).cloned();
        server.register(PLUGIN_SERVICE, name, move |_ctx, _payload| {
            let reply = reply.clone();
            Box::pin(async move {
                match reply {
                    Some(Reply::Bytes(b)) => Ok(b),
                    Some(Reply::Fail(code, msg)) => {
                        Err(Status::new(Code::from(i32::from(code % 17)), msg))
                    }
                    None if name == method::CONFIGURE => Ok(ConfigureResponse {
                        events,
                        ..Default::default()
                    }
                    .encode_to_vec()),
                    None => Ok(Vec::new()),
                }
            }) as BoxFuture<'static, _>
        });
    }
    server
}

async fn lifecycle(nri: &Adaptation, op: u8, bytes: &[u8]) {
    macro_rules! call {
        ($req:ty, $f:ident) => {{
            if let Ok(req) = <$req>::decode(bytes) {
                let _ = nri.$f(req).await;
            }
        }};
    }
    match op % 13 {
        0 => call!(RunPodSandboxRequest, run_pod_sandbox),
        1 => call!(UpdatePodSandboxRequest, update_pod_sandbox),
        2 => call!(PostUpdatePodSandboxRequest, post_update_pod_sandbox),
        3 => call!(StopPodSandboxRequest, stop_pod_sandbox),
        4 => call!(RemovePodSandboxRequest, remove_pod_sandbox),
        5 => call!(CreateContainerRequest, create_container),
        6 => call!(PostCreateContainerRequest, post_create_container),
        7 => call!(StartContainerRequest, start_container),
        8 => call!(PostStartContainerRequest, post_start_container),
        9 => call!(UpdateContainerRequest, update_container),
        10 => call!(PostUpdateContainerRequest, post_update_container),
        11 => call!(StopContainerRequest, stop_container),
        _ => call!(RemoveContainerRequest, remove_container),
    }
}

fuzz_target!(|input: Input| {
    let replies: BTreeMap<&'static str, Reply> = input
        .replies
        .into_iter()
        .map(|(i, r)| (method::ALL[usize::from(i) % method::ALL.len()], r))
        .collect();
    run_real(Duration::from_secs(30), async move {
        let dir = tempfile::tempdir().expect("temporary directory");
        let socket = dir.path().join("nri.sock");
        let nri = Adaptation::builder("fuzz-runtime", "v2.0.0", Arc::new(Hooks))
            .plugin_path(dir.path().join("plugins"))
            .plugin_config_path(dir.path().join("conf.d"))
            .socket_path(&socket)
            .registration_timeout(Duration::from_millis(300))
            .request_timeout(Duration::from_millis(300))
            .build();
        nri.start().await.expect("the adaptation starts");

        let stream = tokio::net::UnixStream::connect(&socket)
            .await
            .expect("connect to the adaptation");
        let mux = Mux::new(stream, MuxOptions::default());
        let plugin_conn = mux.open(PLUGIN_SERVICE_CONN).expect("conn 1");
        let runtime_conn = mux.open(RUNTIME_SERVICE_CONN).expect("conn 2");
        let serving =
            tokio::spawn(Arc::new(plugin_server(replies, input.events)).serve(plugin_conn));
        let client = Client::new(runtime_conn);
        let timeout = Some(Duration::from_secs(2));

        let register = match input.register {
            Register::Valid { name, index } => RegisterPluginRequest {
                plugin_name: if name.is_empty() { "fuzz".into() } else { name },
                plugin_idx: format!("{:02}", index % 100),
                nri_version: String::new(),
            }
            .encode_to_vec(),
            Register::Raw(b) => b,
        };
        let registered = client
            .call(
                RUNTIME_SERVICE,
                runtime_method::REGISTER_PLUGIN,
                register,
                timeout,
            )
            .await
            .is_ok();
        if registered {
            // Wait until the plugin is in (configured and synchronized) or out.
            for _ in 0..500 {
                if !nri.plugins().is_empty() || mux.is_closed() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        for update in input.updates.into_iter().take(3) {
            let _ = client
                .call(
                    RUNTIME_SERVICE,
                    runtime_method::UPDATE_CONTAINERS,
                    update,
                    timeout,
                )
                .await;
        }
        for (op, bytes) in input.lifecycle.iter().take(6) {
            lifecycle(&nri, *op, bytes).await;
        }
        nri.stop().await;
        client.close();
        mux.close();
        serving.abort();
    });
});
