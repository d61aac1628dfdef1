//! WebAssembly plugins from the plugin directory (feature `wasm`): the
//! module runs in-process on a thread of its own (`nri-wasm`); requests and
//! replies are the protobuf messages of the other plugin kinds.

use std::future::Future;
use std::time::Duration;

use nri_api::Event;
use nri_wasm::{WasmEvent, WasmPlugin};
use prost::Message;
use tokio::sync::watch;

use crate::adaptation_error::PluginError;

/// How long past its timeout a call may take before the adaptation stops
/// waiting. The engine interrupts the module at the timeout; only a module
/// blocked inside a host call (a WASI sleep) can overrun it, and then its
/// thread stays busy until the host call returns.
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
