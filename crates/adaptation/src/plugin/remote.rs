//! A plugin reached over a socket (external or launched): the mux, the
//! ttRPC client for the Plugin service, the ttRPC server of the Runtime
//! service, and the registration handshake.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nri_api::plugin::{check_plugin_index, check_plugin_name, qualified_name};
use nri_api::service::{
    plugin as method, runtime as runtime_method, PLUGIN_SERVICE, RUNTIME_SERVICE,
};
use nri_api::{Empty, RegisterPluginRequest, UpdateContainersRequest};
use nri_mux::{Mux, MuxOptions, UnixTrunk, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{Client, Server, Status};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use super::Settings;
use crate::adaptation_error::{Error, RegistrationError};

type Registered = Result<(String, String), RegistrationError>;

/// The connection to one socket-based plugin.
pub(crate) struct Remote {
    mux: Mux,
    client: Client,
    child: Mutex<Option<std::process::Child>>,
    serving: tokio::task::JoinHandle<()>,
    pid: Option<i32>,
}

/// A connection whose plugin has not registered yet.
pub(crate) struct Pending {
    remote: Remote,
    registered: oneshot::Receiver<Registered>,
}

impl Remote {
    /// Sets up the mux and both ttRPC sessions on `trunk`. `identity` is
    /// the launched plugin's `(idx, base)` from its file name; external
    /// plugins (`None`) get theirs from their registration, checked.
    pub(crate) fn connect(
        trunk: UnixStream,
        identity: Option<(&str, &str)>,
        child: Option<std::process::Child>,
        settings: &Arc<Settings>,
    ) -> Result<Pending, Error> {
        let pid = match &child {
            Some(c) => i32::try_from(c.id()).ok(),
            None => trunk.peer_cred().ok().and_then(|c| c.pid()),
        };
        let trunk = match UnixTrunk::from_tokio(trunk) {
            Ok(trunk) => trunk,
            Err(e) => {
                tracing::debug!(error = %e, "failed to register the plugin's socket");
                return Err(Error::RegistrationClosed);
            }
        };
        let mux = Mux::new(
            trunk,
            MuxOptions {
                blocked_read: true,
                ..MuxOptions::default()
            },
        );
        let (client_conn, server_conn) = match (
            mux.open(PLUGIN_SERVICE_CONN),
            mux.open(RUNTIME_SERVICE_CONN),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(error = %e, "failed to open mux connections");
                mux.close();
                return Err(Error::RegistrationClosed);
            }
        };
        let client = Client::new(client_conn).with_busy_poll(settings.busy_poll);
        let name = Arc::new(OnceLock::new());
        if let Some((idx, base)) = identity {
            let _ = name.set(qualified_name(idx, base));
        }
        let (tx, registered) = oneshot::channel();
        let server = runtime_service(identity.is_none(), tx, name.clone(), settings.clone());
        let closer = mux.clone();
        let plugin = name.clone();
        let serving = tokio::spawn(async move {
            if let Err(e) = Arc::new(server).serve(server_conn).await {
                tracing::debug!(error = %e, "runtime service connection ended");
            }
            // Why the mux gave up on the connection (a malformed or oversized
            // frame from the plugin), in the mux's words.
            if let Some(e) = closer.error() {
                let plugin = plugin.get().map_or("-", String::as_str);
                tracing::error!(plugin, error = %e, "error receiving message from plugin");
            }
            closer.close();
        });
        Ok(Pending {
            remote: Remote {
                mux,
                client,
                child: Mutex::new(child),
                serving,
                pid,
            },
            registered,
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.mux.is_closed() || self.client.is_closed()
    }

    /// Resolves once the connection is closed, for whatever reason (the
    /// plugin's process exited, or [`close`](Self::close)).
    pub(crate) fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mux = self.mux.clone();
        async move { mux.closed().await }
    }

    pub(crate) fn close(&self) {
        self.client.close();
        self.mux.close();
        self.serving.abort();
    }

    /// Kills (SIGKILL) and reaps a launched process.
    pub(crate) async fn kill(&self) {
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        if let Some(child) = child {
            reap(child).await;
        }
    }

    pub(crate) fn pid(&self) -> Option<i32> {
        self.pid
    }

    /// Calls the plugin; the request carries the trace context of the
    /// current plugin call (`crate::trace::plugin_call`), if any.
    pub(crate) async fn call<Req, Resp>(
        &self,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, nri_ttrpc::Error>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let metadata = crate::trace::call_metadata();
        self.client
            .call_msg_with_metadata(PLUGIN_SERVICE, method, req, Some(timeout), &metadata)
            .await
    }

    pub(crate) async fn shutdown(&self, timeout: Duration) -> Result<Empty, nri_ttrpc::Error> {
        self.call(method::SHUTDOWN, &Empty {}, timeout).await
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.close();
        let child = self.child.get_mut().ok().and_then(|c| c.take());
        if let Some(child) = child {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(reap(child));
                }
                Err(_) => {
                    let mut child = child;
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

/// SIGKILL and wait, without blocking the async runtime.
async fn reap(mut child: std::process::Child) {
    let pid = child.id();
    if let Err(e) = child.kill() {
        tracing::debug!(pid, error = %e, "failed to kill plugin process");
    }
    match tokio::task::spawn_blocking(move || child.wait()).await {
        Ok(Ok(status)) => tracing::debug!(pid, %status, "plugin process reaped"),
        Ok(Err(e)) => tracing::warn!(pid, error = %e, "failed to reap plugin process"),
        Err(e) => tracing::warn!(pid, error = %e, "failed to reap plugin process"),
    }
}

impl Pending {
    /// Unblocks the connection and waits for the plugin to register, for
    /// at most `timeout`. Returns the connection and the `(idx, base)` the
    /// plugin registered with.
    pub(crate) async fn register(
        self,
        timeout: Duration,
    ) -> Result<(Remote, String, String), Error> {
        let Pending { remote, registered } = self;
        remote.mux.unblock();
        let closed = remote.mux.clone();
        tokio::select! {
            biased;
            reg = registered => match reg {
                Ok(Ok((idx, base))) => Ok((remote, idx, base)),
                Ok(Err(e)) => {
                    // Let the plugin read its error reply; it closes on its own.
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(timeout, remote.mux.closed()).await;
                        drop(remote);
                    });
                    Err(Error::Registration(e))
                }
                Err(_) => Err(Error::RegistrationClosed),
            },
            _ = closed.closed() => Err(Error::RegistrationClosed),
            _ = tokio::time::sleep(timeout) => {
                remote.close();
                remote.kill().await;
                Err(Error::RegistrationTimeout)
            }
        }
    }
}

/// The Runtime service of one plugin connection: RegisterPlugin and
/// UpdateContainers. UpdateContainers goes straight to the runtime's hook;
/// it takes none of the adaptation's locks.
fn runtime_service(
    external: bool,
    registered: oneshot::Sender<Registered>,
    name: Arc<OnceLock<String>>,
    settings: Arc<Settings>,
) -> Server {
    let mut server = Server::new();
    let registered = Arc::new(Mutex::new(Some(registered)));
    let reg_name = name.clone();
    server.register_msg(
        RUNTIME_SERVICE,
        runtime_method::REGISTER_PLUGIN,
        move |_ctx, req: RegisterPluginRequest| {
            let registered = registered.clone();
            let name = reg_name.clone();
            async move {
                let signal = |r: Registered| match registered.lock().ok().and_then(|mut s| s.take())
                {
                    Some(tx) => {
                        let _ = tx.send(r);
                    }
                    None => tracing::warn!(
                        plugin = %name.get().map(String::as_str).unwrap_or(&req.plugin_name),
                        "plugin registered more than once; the registration is ignored"
                    ),
                };
                let mut identity = (req.plugin_idx.clone(), req.plugin_name.clone());
                if external {
                    if let Err(e) = check_plugin_name(&req.plugin_name) {
                        signal(Err(RegistrationError::InvalidName(e.clone())));
                        return Err(Status::unknown(format!("invalid plugin name: {e}")));
                    }
                    if let Err(e) = check_plugin_index(&req.plugin_idx) {
                        signal(Err(RegistrationError::InvalidIndex {
                            name: req.plugin_name.clone(),
                            source: e.clone(),
                        }));
                        return Err(Status::unknown(format!("invalid plugin index: {e}")));
                    }
                    let _ = name.set(qualified_name(&req.plugin_idx, &req.plugin_name));
                } else {
                    identity = (String::new(), String::new());
                }
                let version = if req.nri_version.is_empty() {
                    "unknown"
                } else {
                    req.nri_version.as_str()
                };
                tracing::info!(
                    plugin = %name.get().map(String::as_str).unwrap_or_default(),
                    nri_version = version,
                    "plugin registered"
                );
                signal(Ok(identity));
                Ok(Empty {})
            }
        },
    );
    server.register_msg(
        RUNTIME_SERVICE,
        runtime_method::UPDATE_CONTAINERS,
        move |_ctx, req: UpdateContainersRequest| {
            let name = name.clone();
            let hooks = settings.hooks.clone();
            async move {
                let plugin = name.get().cloned().unwrap_or_default();
                tracing::info!(plugin = %plugin, updates = req.update.len(),
                    evictions = req.evict.len(), "plugin requested container updates");
                crate::runtime::unsolicited_updates(hooks.as_ref(), &plugin, req)
                    .await
                    .map_err(|e| Status::unknown(e.to_string()))
            }
        },
    );
    server
}
