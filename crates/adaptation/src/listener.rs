//! Plugins reaching the runtime: the socket for external plugins and their
//! start sequence (register, configure, synchronize). Launched plugins
//! start in `launch`.

use std::path::Path;
use std::sync::{Arc, Weak};

use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::adaptation::Inner;
use crate::adaptation_error::Error;
use crate::plugin::remote::Remote;
use crate::plugin::{Backend, Plugin, PluginKind};
use crate::runtime::Synchronizer;
use crate::socket::{PeerCredentials, SocketAccess};

/// Creates the socket with the access's mode and group (replacing a stale
/// one, creating a missing directory; see [`crate::socket::bind`]) and
/// spawns the accept loop.
pub(crate) fn listen(
    inner: Weak<Inner>,
    path: &Path,
    access: &SocketAccess,
) -> Result<JoinHandle<()>, Error> {
    let fail = |source| Error::Socket {
        path: path.to_path_buf(),
        source,
    };
    let listener = crate::socket::bind(path, access).map_err(|e| fail(e.into()))?;
    let listener = UnixListener::from_std(listener).map_err(fail)?;
    tracing::info!(socket = %path.display(), mode = format!("{:04o}", access.mode),
        group = access.group, allowed_uids = ?access.allowed_uids,
        allowed_gids = ?access.allowed_gids, "accepting external NRI plugins");
    Ok(tokio::spawn(accept_loop(inner, listener)))
}

/// Accepts connections and starts their plugins one at a time. Holds only a
/// weak reference, so a dropped adaptation ends the loop.
async fn accept_loop(inner: Weak<Inner>, listener: UnixListener) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::info!(error = %e, "stopped accepting plugin connections");
                return;
            }
        };
        let Some(inner) = inner.upgrade() else { return };
        // Checked before a byte is read: a refused peer never reaches
        // plugin code.
        let peer = match inner.paths.socket_access.admit_stream(&stream) {
            Ok(peer) => peer,
            Err(refused) => {
                tracing::warn!(peer = %refused.peer_text(), reason = %refused.reason,
                    "refused external plugin connection");
                continue;
            }
        };
        if let Err(e) = start_external(&inner, stream, peer).await {
            tracing::error!(error = %e, "failed to start external plugin");
        }
    }
}

/// Registration, Configure and Synchronize of one external plugin. Only the
/// synchronization holds a lock (the plugin-sync lock, exclusively); the
/// lifecycle lock is never taken, so lifecycle calls go on meanwhile.
async fn start_external(
    inner: &Arc<Inner>,
    stream: UnixStream,
    peer: Option<PeerCredentials>,
) -> Result<(), Error> {
    let settings = &inner.settings;
    let pending = Remote::connect(stream, None, None, settings)?;
    let (remote, idx, base) = pending.register(settings.registration_timeout).await?;
    let pid = remote.pid();
    let plugin = Arc::new(Plugin::new(
        &idx,
        &base,
        PluginKind::External,
        Backend::Remote(remote),
        settings.clone(),
    ));
    match &peer {
        Some(p) => tracing::info!(plugin = %plugin.name, pid = p.pid, uid = p.uid, gid = p.gid,
            exe = %p.exe.as_deref().map_or_else(|| "unknown".into(), |e| e.display().to_string()),
            "external plugin registered"),
        None => tracing::info!(plugin = %plugin.name, pid, "external plugin registered"),
    }
    settings.metrics.record_plugin_registration(&plugin.name);
    if let Err(e) = plugin.configure(String::new()).await {
        tracing::warn!(plugin = %plugin.name, error = %e, "failed to configure plugin");
        return Err(e);
    }

    let _sync = inner.sync_lock.clone().write_owned().await;
    // Events are queued from here on: replayed with
    // `deliver_events_during_sync`, otherwise only read to keep the events
    // of objects the plugin never learned of from it (`crate::backlog`).
    let backlog = Some(inner.attach_backlog(plugin.clone()).await);
    let mut sync = OnePluginSync {
        plugin: plugin.clone(),
        result: None,
        backlog: backlog.clone(),
    };
    let hook = settings.hooks.synchronize(&mut sync).await;
    match (hook, sync.result) {
        (Err(e), _) => {
            tracing::error!(plugin = %plugin.name, error = %e, "failed to synchronize plugin");
            plugin.close();
        }
        (Ok(()), Some(false)) => plugin.close(),
        (Ok(()), result) => {
            if result.is_none() {
                tracing::warn!(plugin = %plugin.name,
                    "runtime did not synchronize the plugin; adding it anyway");
            }
            if let Some(backlog) = backlog.clone() {
                if !inner.is_stopped() && !plugin.is_closed() {
                    let _ = inner.replay_and_add(backlog).await;
                    return Ok(());
                }
            }
            if inner.is_stopped() {
                plugin.close();
            } else if !plugin.is_closed() {
                inner.add_or_replace(plugin.clone()).await;
                tracing::info!(plugin = %plugin.name, "plugin connected and synchronized");
            }
        }
    }
    if let Some(backlog) = &backlog {
        inner.drop_backlog(backlog);
    }
    Ok(())
}

/// The synchronizer of one plugin joining a running adaptation (external or
/// restarted): its failure is the call's.
pub(crate) struct OnePluginSync {
    pub(crate) plugin: Arc<Plugin>,
    /// Whether the last synchronization succeeded; `None` if never called.
    pub(crate) result: Option<bool>,
    /// The plugin's queue of events while it is synchronized.
    pub(crate) backlog: Option<Arc<crate::backlog::Backlog>>,
}

#[async_trait::async_trait]
impl Synchronizer for OnePluginSync {
    async fn synchronize(
        &mut self,
        pods: &[nri_api::PodSandbox],
        containers: &[nri_api::Container],
    ) -> Result<Vec<nri_api::ContainerUpdate>, Error> {
        if let Some(backlog) = &self.backlog {
            backlog.set_snapshot(pods, containers);
        }
        let result = self.plugin.synchronize(pods, containers).await;
        self.result = Some(result.is_ok());
        result
    }
}
