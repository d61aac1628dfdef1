//! WebAssembly plugins from the plugin directory (feature `wasm`): the
//! module runs in-process (`nri-wasm`), on the task that makes the call;
//! requests and replies are the protobuf messages of the other plugin
//! kinds.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::task::Poll;
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

/// How long an event waits, at most, for the re-synchronization of a
/// replaced instance to be taken up (see [`Wasm::replacement_taken_up`]).
/// Taking it up needs no lock, only the task's turn on the executor; the
/// bound keeps a task that was never started from stalling events.
const TAKE_UP_LIMIT: Duration = Duration::from_secs(1);

pub(crate) struct Wasm {
    plugin: WasmPlugin,
    closed: watch::Sender<bool>,
    /// How many instances were thrown away (`WasmPlugin::discarded`).
    discarded: watch::Receiver<u64>,
    /// Up to which count of thrown-away instances the re-synchronization
    /// task has taken them up: [`TAKEN_ALL`] while it is queued for the
    /// sync lock or synchronizing (what it synchronizes covers every
    /// replacement until then; later ones queue it again), and also once no
    /// task will take any up; otherwise the count its last synchronization
    /// covered.
    taken_up: Arc<watch::Sender<u64>>,
}

/// [`Wasm::taken_up`] while every replacement is (or will be) covered.
const TAKEN_ALL: u64 = u64::MAX;

impl Wasm {
    pub(crate) fn new(plugin: WasmPlugin) -> Wasm {
        let discarded = plugin.discarded();
        let now = *discarded.borrow();
        Wasm {
            plugin,
            closed: watch::Sender::new(false),
            discarded,
            taken_up: Arc::new(watch::Sender::new(now)),
        }
    }

    /// Waits until the re-synchronization of every instance thrown away so
    /// far has been taken up by its task (queued for the sync lock, or
    /// done). An event calls this before it returns, so that the runtime's
    /// next event, if the runtime blocks plugin synchronization around its
    /// events ([`Adaptation::block_plugin_sync`](crate::Adaptation::block_plugin_sync)),
    /// waits for the fresh instance's Synchronize and never reaches it
    /// unsynchronized. Returns at once when nothing was thrown away.
    pub(crate) async fn replacement_taken_up(&self) {
        let replaced = *self.discarded.borrow();
        if *self.taken_up.borrow() >= replaced {
            return;
        }
        let mut taken = self.taken_up.subscribe();
        let closed = self.closed();
        let waited = tokio::time::timeout(TAKE_UP_LIMIT, async {
            tokio::select! {
                _ = taken.wait_for(|t| *t >= replaced) => {}
                _ = closed => {}
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!(plugin = %self.plugin.name(),
                "the synchronization of a replaced WASM plugin instance was not taken up");
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
    // What happened before this task existed is not its to take up.
    w.taken_up.send_replace(*discarded.borrow_and_update());
    let closed = w.closed();
    let inner: Weak<Inner> = Arc::downgrade(inner);
    let weak: Weak<Plugin> = Arc::downgrade(plugin);
    let taken_up = TakenUp(w.taken_up.clone());
    tokio::spawn(async move {
        // Ends the events' waits whichever way the task ends.
        let taken_up = taken_up;
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
            let mut lock = std::pin::pin!(inner.sync_lock.clone().write_owned());
            // Polled once, the lock has queued this task: a runtime event
            // that blocks plugin synchronization now waits for it.
            let first = std::future::poll_fn(|cx| Poll::Ready(lock.as_mut().poll(cx))).await;
            taken_up.set(TAKEN_ALL);
            let _sync = match first {
                Poll::Ready(guard) => guard,
                Poll::Pending => lock.await,
            };
            if inner.is_stopped() || plugin.is_closed() {
                return;
            }
            // Replacements during this synchronization call for another.
            let covered = *discarded.borrow_and_update();
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
            taken_up.set(covered);
        }
    });
}

/// Sets [`Wasm::taken_up`] of a plugin, and [`TAKEN_ALL`] when dropped (no
/// task takes up more replacements).
struct TakenUp(Arc<watch::Sender<u64>>);

impl TakenUp {
    fn set(&self, value: u64) {
        self.0.send_replace(value);
    }
}

impl Drop for TakenUp {
    fn drop(&mut self) {
        self.set(TAKEN_ALL);
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
