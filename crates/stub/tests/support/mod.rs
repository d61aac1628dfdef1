//! An in-process fake runtime: the runtime side of NRI built from nri-mux and
//! nri-ttrpc, on one end of a Unix socket pair.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use nri_api::service::{
    plugin as method, runtime as runtime_method, PLUGIN_SERVICE, RUNTIME_SERVICE,
};
use nri_api::*;
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{Client, Server, Status};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// Bound on every wait in the tests, so a bug shows as a failure, not a hang.
pub const WAIT: Duration = Duration::from_secs(10);

/// Container id for which the fake runtime reports an unsolicited update as failed.
pub const FAILING_CONTAINER: &str = "ctr-fails";

/// How the fake runtime answers RegisterPlugin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    Accept,
    Refuse,
    /// Never answers the registration (a runtime that configures the plugin
    /// before its registration reply is sent).
    Hold,
}

/// The runtime side of one plugin connection.
pub struct FakeRuntime {
    pub mux: Mux,
    pub client: Client,
    registrations: mpsc::UnboundedReceiver<RegisterPluginRequest>,
    updates: mpsc::UnboundedReceiver<UpdateContainersRequest>,
    _serving: tokio::task::JoinHandle<Result<(), nri_ttrpc::Error>>,
}

impl FakeRuntime {
    /// A fake runtime on `trunk`, serving the Runtime service on conn 2.
    pub fn new(trunk: UnixStream, registration: Registration) -> Self {
        let mux = Mux::new(trunk, MuxOptions::default());
        let plugin_conn = mux.open(PLUGIN_SERVICE_CONN).unwrap();
        let runtime_conn = mux.open(RUNTIME_SERVICE_CONN).unwrap();
        let (reg_tx, registrations) = mpsc::unbounded_channel();
        let (upd_tx, updates) = mpsc::unbounded_channel();

        let mut server = Server::new();
        server.register_msg(
            RUNTIME_SERVICE,
            runtime_method::REGISTER_PLUGIN,
            move |_ctx, req: RegisterPluginRequest| {
                let reg_tx = reg_tx.clone();
                async move {
                    let _ = reg_tx.send(req);
                    match registration {
                        Registration::Accept => Ok(Empty {}),
                        Registration::Refuse => {
                            Err(Status::invalid_argument("invalid plugin name: nope"))
                        }
                        Registration::Hold => std::future::pending().await,
                    }
                }
            },
        );
        server.register_msg(
            RUNTIME_SERVICE,
            runtime_method::UPDATE_CONTAINERS,
            move |_ctx, req: UpdateContainersRequest| {
                let upd_tx = upd_tx.clone();
                async move {
                    let failed = req
                        .update
                        .iter()
                        .filter(|u| u.container_id == FAILING_CONTAINER)
                        .cloned()
                        .collect();
                    let _ = upd_tx.send(req);
                    Ok::<_, Status>(UpdateContainersResponse { failed })
                }
            },
        );
        let serving = tokio::spawn(Arc::new(server).serve(runtime_conn));
        FakeRuntime {
            mux,
            client: Client::new(plugin_conn),
            registrations,
            updates,
            _serving: serving,
        }
    }

    /// Waits for the plugin's RegisterPlugin request.
    pub async fn registration(&mut self) -> RegisterPluginRequest {
        tokio::time::timeout(WAIT, self.registrations.recv())
            .await
            .expect("no registration in time")
            .expect("registration channel closed")
    }

    /// Waits for an unsolicited UpdateContainers request.
    pub async fn update_request(&mut self) -> UpdateContainersRequest {
        tokio::time::timeout(WAIT, self.updates.recv())
            .await
            .expect("no UpdateContainers in time")
            .expect("update channel closed")
    }

    /// Calls a Plugin-service method.
    pub async fn call<Req, Resp>(&self, method: &str, req: &Req) -> Result<Resp, nri_ttrpc::Error>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        self.client
            .call_msg(PLUGIN_SERVICE, method, req, Some(WAIT))
            .await
    }

    /// Sends Configure as a containerd v2.2 runtime would.
    pub async fn configure(&self) -> Result<ConfigureResponse, nri_ttrpc::Error> {
        self.call(method::CONFIGURE, &configure_request()).await
    }

    /// Closes the connection, as a runtime that goes away.
    pub fn disappear(&self) {
        self.client.close();
        self.mux.close();
    }
}

/// One chunk of a split Synchronize: pods, containers and whether more follow.
pub type SyncChunk = (Vec<PodSandbox>, Vec<Container>, bool);

/// The replies of [`FakeRuntime::container_events`] that carry something.
pub struct ContainerReplies {
    pub created: CreateContainerResponse,
    pub updated: UpdateContainerResponse,
    pub stopped: StopContainerResponse,
}

impl FakeRuntime {
    /// Sends a Synchronize split into `chunks` and checks the replies of a
    /// recording plugin: nothing reaches its handler (`take_calls`) and no
    /// update comes back before the last chunk, whose reply carries the
    /// handler's `synced` update.
    pub async fn synchronize_chunks(
        &self,
        chunks: impl IntoIterator<Item = SyncChunk>,
        mut take_calls: impl FnMut() -> Vec<String>,
    ) {
        for (i, (pods, containers, more)) in chunks.into_iter().enumerate() {
            let req = SynchronizeRequest {
                pods,
                containers,
                more,
            };
            let reply: SynchronizeResponse = self.call(method::SYNCHRONIZE, &req).await.unwrap();
            assert_eq!(reply.more, more, "chunk {i}");
            if more {
                assert!(reply.update.is_empty(), "chunk {i}");
                assert!(take_calls().is_empty(), "handler called early at chunk {i}");
            } else {
                assert_eq!(reply.update, vec![ContainerUpdate::for_container("synced")]);
            }
        }
    }

    /// Sends the events of a pod's and then a container's life: [`Self::pod_events`]
    /// and [`Self::container_events`].
    pub async fn lifecycle_events(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        shares: u64,
    ) -> ContainerReplies {
        self.pod_events(pod).await;
        self.container_events(pod, ctr, shares).await
    }

    /// Sends the events of a pod's life for `pod`: run, update (overhead of
    /// 10 and resources of 512 CPU shares), post-update, stop and remove.
    pub async fn pod_events(&self, pod: &PodSandbox) {
        let p = || Some(pod.clone());
        let _: RunPodSandboxResponse = self
            .call(method::RUN_POD_SANDBOX, &RunPodSandboxRequest { pod: p() })
            .await
            .unwrap();
        let update = UpdatePodSandboxRequest {
            pod: p(),
            overhead_linux_resources: cpu_shares(10),
            linux_resources: cpu_shares(512),
        };
        let _: UpdatePodSandboxResponse = self
            .call(method::UPDATE_POD_SANDBOX, &update)
            .await
            .unwrap();
        let post_update = PostUpdatePodSandboxRequest { pod: p() };
        let _: PostUpdatePodSandboxResponse = self
            .call(method::POST_UPDATE_POD_SANDBOX, &post_update)
            .await
            .unwrap();
        let _: StopPodSandboxResponse = self
            .call(
                method::STOP_POD_SANDBOX,
                &StopPodSandboxRequest { pod: p() },
            )
            .await
            .unwrap();
        let _: RemovePodSandboxResponse = self
            .call(
                method::REMOVE_POD_SANDBOX,
                &RemovePodSandboxRequest { pod: p() },
            )
            .await
            .unwrap();
    }

    /// Sends the events of a container's life for `ctr` in `pod`: create,
    /// post-create, start, post-start, update (to `shares` CPU shares),
    /// post-update, stop and remove.
    pub async fn container_events(
        &self,
        pod: &PodSandbox,
        ctr: &Container,
        shares: u64,
    ) -> ContainerReplies {
        let (pod, container) = (Some(pod.clone()), Some(ctr.clone()));
        macro_rules! req {
            ($req:ident) => {
                $req {
                    pod: pod.clone(),
                    container: container.clone(),
                }
            };
        }
        let created = self
            .call(method::CREATE_CONTAINER, &req!(CreateContainerRequest))
            .await
            .unwrap();
        let _: PostCreateContainerResponse = self
            .call(
                method::POST_CREATE_CONTAINER,
                &req!(PostCreateContainerRequest),
            )
            .await
            .unwrap();
        let _: StartContainerResponse = self
            .call(method::START_CONTAINER, &req!(StartContainerRequest))
            .await
            .unwrap();
        let _: PostStartContainerResponse = self
            .call(
                method::POST_START_CONTAINER,
                &req!(PostStartContainerRequest),
            )
            .await
            .unwrap();
        let update = UpdateContainerRequest {
            pod: pod.clone(),
            container: container.clone(),
            linux_resources: cpu_shares(shares),
        };
        let updated = self.call(method::UPDATE_CONTAINER, &update).await.unwrap();
        let _: PostUpdateContainerResponse = self
            .call(
                method::POST_UPDATE_CONTAINER,
                &req!(PostUpdateContainerRequest),
            )
            .await
            .unwrap();
        let stopped = self
            .call(method::STOP_CONTAINER, &req!(StopContainerRequest))
            .await
            .unwrap();
        let _: RemoveContainerResponse = self
            .call(method::REMOVE_CONTAINER, &req!(RemoveContainerRequest))
            .await
            .unwrap();
        ContainerReplies {
            created,
            updated,
            stopped,
        }
    }
}

/// Checks what a recording plugin's Configure handler saw of
/// [`configure_request`].
pub fn assert_configured(info: &nri_stub::ConfigureInfo) {
    assert_eq!(info.config, "some: config");
    assert_eq!(info.runtime.name, "containerd");
    assert_eq!(info.runtime.nri_version.as_deref(), Some("v0.12.2"));
    assert_eq!(info.runtime.registration_timeout.as_millis(), 7000);
    assert_eq!(info.runtime.request_timeout.as_millis(), 3000);
}

/// Checks a recording plugin's CreateContainer reply for container `ctr`:
/// its `recorder` annotation, its update of `other` and eviction of `victim`.
pub fn assert_recorder_created(created: CreateContainerResponse) {
    let adjust = created.adjust.unwrap();
    assert_eq!(
        adjust.annotations.get("recorder").map(String::as_str),
        Some("ctr")
    );
    assert_eq!(
        created.update,
        vec![ContainerUpdate::for_container("other")]
    );
    assert_eq!(created.evict.len(), 1);
    assert_eq!(created.evict[0].container_id, "victim");
}

/// How the recording plugins note a Synchronize: the pod and container ids.
pub fn synchronize_call(pods: &[PodSandbox], containers: &[Container]) -> String {
    let pods: Vec<_> = pods.iter().map(|p| p.id.as_str()).collect();
    let ctrs: Vec<_> = containers.iter().map(|c| c.id.as_str()).collect();
    format!(
        "synchronize pods={} ctrs={}",
        pods.join(","),
        ctrs.join(",")
    )
}

/// Linux resources of `shares` CPU shares.
pub fn cpu_shares(shares: u64) -> Option<LinuxResources> {
    Some(LinuxResources {
        cpu: Some(LinuxCpu {
            shares: Some(OptionalUInt64 { value: shares }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A ConfigureRequest of a current runtime.
pub fn configure_request() -> ConfigureRequest {
    ConfigureRequest {
        config: "some: config".into(),
        runtime_name: "containerd".into(),
        runtime_version: "v2.2.0".into(),
        registration_timeout: 7000,
        request_timeout: 3000,
        nri_version: "v0.12.2".into(),
    }
}

pub fn pod(id: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: format!("{id}-name"),
        namespace: "default".into(),
        ..Default::default()
    }
}

pub fn container(id: &str, pod_id: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: pod_id.into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

pub mod recorder;

/// The task running a stub, with what its run ended with.
pub type StubRun = tokio::task::JoinHandle<Result<(), nri_stub::Error>>;

/// Runs `plugin` as `<idx>-<name>` against a fake runtime that answers the
/// registration as `registration` says; returns the stub's task, the runtime
/// and the RegisterPlugin request it received.
pub async fn run_registered<P: nri_stub::Plugin>(
    plugin: P,
    name: &str,
    idx: &str,
    registration: Registration,
) -> (StubRun, FakeRuntime, RegisterPluginRequest) {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, registration);
    let stub = nri_stub::Stub::builder(plugin)
        .name(name)
        .index(idx)
        .connection(plugin_end)
        .build()
        .unwrap();
    let run = tokio::spawn(async move { stub.run().await });
    let reg = rt.registration().await;
    (run, rt, reg)
}

/// A connected socket pair: (plugin end, runtime end).
pub fn socket_pair() -> (UnixStream, UnixStream) {
    UnixStream::pair().unwrap()
}
