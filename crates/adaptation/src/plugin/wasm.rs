//! WebAssembly plugins from the plugin directory (feature `wasm`): the
//! module runs in-process (`nri-wasm`), on the task that makes the call;
//! requests and replies are the protobuf messages of the other plugin
//! kinds.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use nri_api::Event;
use nri_wasm::{WasmEvent, WasmPlugin};
use prost::Message;
use tokio::sync::watch;

use crate::adaptation::Inner;
use crate::adaptation_error::PluginError;
use crate::listener::OnePluginSync;
use crate::plugin::{Backend, Plugin};

/// How long past its timeout a call may take before the adaptation stops
/// waiting. `nri-wasm` ends the module's part of a call at the timeout
/// (interrupted at the next epoch tick, or cancelled in a host call); the
/// grace covers the wait for the plugin's earlier calls. Stopping to wait
/// drops the call, which throws the instance away as a timeout does.
const GRACE: Duration = Duration::from_secs(1);

pub(crate) struct Wasm {
    plugin: WasmPlugin,
    closed: watch::Sender<bool>,
}

impl Wasm {
    pub(crate) fn new(plugin: WasmPlugin) -> Wasm {
        Wasm {
            plugin,
            closed: watch::Sender::new(false),
        }
    }

    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Resolves once the plugin is closed.
    pub(crate) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.closed.subscribe();
        async move {
            let _ = rx.wait_for(|closed| *closed).await;
        }
    }

    /// One call: the request encoded, the module's handler, the reply
    /// decoded (an empty reply is the default message). A timeout is
    /// [`PluginError::Timeout`]; every other failure (the handler's error,
    /// a trap, a bad reply) is an ordinary error of the call.
    pub(crate) async fn call<Q: Message, A: Message + Default>(
        &self,
        event: WasmEvent,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, PluginError> {
        let call = self.plugin.call(event, req.encode_to_vec(), timeout);
        let reply = match tokio::time::timeout(timeout + GRACE, call).await {
            Err(_) => return Err(PluginError::Timeout),
            Ok(Err(e)) if e.is_timeout() => {
                tracing::warn!(plugin = %self.plugin.name(), error = %e, "WASM plugin call timed out");
                return Err(PluginError::Timeout);
            }
            Ok(Err(e)) => return Err(PluginError::Builtin(Box::new(e))),
            Ok(Ok(reply)) => reply,
        };
        A::decode(reply.as_slice()).map_err(|e| {
            PluginError::Builtin(
                format!(
                    "WASM plugin {}: {}: invalid reply: {e}",
                    self.plugin.name(),
                    event.export_name()
                )
                .into(),
            )
        })
    }
}

/// Synchronizes `plugin` again each time its module's instance is thrown
/// away (a trap, a timeout): the fresh instance gets the last Configure
/// replayed by `nri-wasm`, but it has lost what Synchronize and the events
/// since taught it. The runtime's synchronize hook gives the current pods
/// and containers, as for a plugin that connects; the plugin's sync lock is
/// held, so no runtime event that blocks plugin synchronization runs
/// meanwhile. A failed Synchronize closes the plugin. Not a WebAssembly
/// plugin: nothing to do. The task ends when the plugin is closed or
/// dropped, or the adaptation is stopped or dropped.
pub(crate) fn resync_after_replacement(inner: &Arc<Inner>, plugin: &Arc<Plugin>) {
    let Backend::Wasm(w) = &plugin.backend else {
        return;
    };
    let mut discarded = w.plugin.discarded();
    let closed = w.closed();
    let inner: Weak<Inner> = Arc::downgrade(inner);
    let weak: Weak<Plugin> = Arc::downgrade(plugin);
    tokio::spawn(async move {
        tokio::pin!(closed);
        loop {
            tokio::select! {
                biased;
                _ = &mut closed => return,
                changed = discarded.changed() => if changed.is_err() { return },
            }
            let (Some(inner), Some(plugin)) = (inner.upgrade(), weak.upgrade()) else {
                return;
            };
            let _sync = inner.sync_lock.clone().write_owned().await;
            if inner.is_stopped() || plugin.is_closed() {
                return;
            }
            // Replacements during this synchronization call for another.
            discarded.borrow_and_update();
            tracing::info!(plugin = %plugin.name,
                "synchronizing the replaced WASM plugin instance");
            let mut sync = OnePluginSync {
                plugin: plugin.clone(),
                result: None,
                backlog: None,
            };
            match (
                inner.settings.hooks.synchronize(&mut sync).await,
                sync.result,
            ) {
                (Err(e), _) => {
                    tracing::error!(plugin = %plugin.name, error = %e,
                        "failed to synchronize the replaced WASM plugin instance");
                    plugin.close();
                }
                (Ok(()), None) => tracing::warn!(plugin = %plugin.name,
                    "runtime did not synchronize the replaced WASM plugin instance"),
                (Ok(()), Some(_)) => {}
            }
            if plugin.is_closed() {
                inner.remove_closed();
                return;
            }
        }
    });
}

/// The module's handler of an event.
pub(crate) fn handler(event: Event) -> WasmEvent {
    match event {
        Event::RunPodSandbox => WasmEvent::RunPodSandbox,
        Event::UpdatePodSandbox => WasmEvent::UpdatePodSandbox,
        Event::PostUpdatePodSandbox => WasmEvent::PostUpdatePodSandbox,
        Event::StopPodSandbox => WasmEvent::StopPodSandbox,
        Event::RemovePodSandbox => WasmEvent::RemovePodSandbox,
        Event::CreateContainer => WasmEvent::CreateContainer,
        Event::PostCreateContainer => WasmEvent::PostCreateContainer,
        Event::StartContainer => WasmEvent::StartContainer,
        Event::PostStartContainer => WasmEvent::PostStartContainer,
        Event::UpdateContainer => WasmEvent::UpdateContainer,
        Event::PostUpdateContainer => WasmEvent::PostUpdateContainer,
        Event::StopContainer => WasmEvent::StopContainer,
        Event::RemoveContainer => WasmEvent::RemoveContainer,
        Event::ValidateContainerAdjustment => WasmEvent::ValidateContainerAdjustment,
        _ => WasmEvent::StateChange,
    }
}
