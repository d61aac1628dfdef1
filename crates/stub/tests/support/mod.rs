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

/// A connected socket pair: (plugin end, runtime end).
pub fn socket_pair() -> (UnixStream, UnixStream) {
    UnixStream::pair().unwrap()
}
