//! One connection's worth of plugin-side state, and the handlers of the Plugin service.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nri_api::*;
use nri_ttrpc::Status;
use tokio::sync::{oneshot, Notify};

use crate::context::runtime_info;
use crate::error::handler_status;
use crate::events::subscription;
use crate::identity::Identity;
use crate::panic::{Caught, HandlerPanic};
use crate::stub::SessionParts;
use crate::sync::{Pending, SyncMessage, Tables};
use crate::{ConfigureInfo, Context, Error, Plugin, RuntimeHandle};

/// What the stub adds to its Configure reply besides the subscription.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConfigureExtras {
    /// The failure policy asked of the runtime.
    pub failure_policy: Option<FailurePolicy>,
    /// The request timeout asked of the runtime (an nri-rs extension).
    pub requested_timeout: Option<Duration>,
}

impl ConfigureExtras {
    fn requested_timeout_ms(&self) -> i64 {
        self.requested_timeout
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// State of one run of the stub: created per connection, dropped with it (so a pending
/// split synchronization never outlives its connection).
pub(crate) struct Session<P> {
    plugin: Arc<P>,
    identity: Arc<Identity>,
    implemented: EventMask,
    handle: RuntimeHandle,
    extras: ConfigureExtras,
    state: Mutex<State>,
    /// Receives the outcome of the first Configure.
    configured: Mutex<Option<oneshot::Sender<Result<(), Error>>>>,
    /// Signalled after the Shutdown request was handled.
    shutdown: Arc<Notify>,
}

#[derive(Default)]
struct State {
    context: Option<Context>,
    subscribed: EventMask,
    /// The messages of a split Synchronize received so far.
    pending_sync: Option<Pending>,
}

impl<P: Plugin> Session<P> {
    pub(crate) fn new(plugin: Arc<P>, parts: SessionParts) -> Self {
        Session {
            plugin,
            identity: parts.identity,
            implemented: parts.implemented,
            handle: parts.handle,
            extras: parts.extras,
            state: Mutex::new(State::default()),
            configured: Mutex::new(Some(parts.configured)),
            shutdown: parts.shutdown,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The handler context; events before Configure are a protocol violation.
    fn context(&self) -> Result<Context, Status> {
        let ctx = self.state().context.clone().ok_or_else(|| {
            Status::new(
                nri_ttrpc::Code::FailedPrecondition,
                "plugin has not been configured",
            )
        })?;
        Ok(ctx.with_trace(crate::trace::current()))
    }

    /// The plugin's full name, for spans.
    pub(crate) fn plugin_name(&self) -> String {
        self.identity.full_name()
    }

    fn report_configured(&self, outcome: Result<(), Error>) {
        let waiter = self
            .configured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(waiter) = waiter {
            // The run may have ended already; then nobody needs the outcome.
            let _ = waiter.send(outcome);
        }
    }

    /// Logs a handler's panic, fails a pending configuration with it, and
    /// gives the status the runtime receives: the panic's message and location.
    pub(crate) fn handler_panicked(&self, method: &str, caught: Caught) -> Status {
        let panic = HandlerPanic {
            plugin: self.identity.full_name(),
            method: method.to_string(),
            message: caught.message,
            location: caught.location,
        };
        tracing::error!(
            plugin = %panic.plugin,
            method,
            location = panic.location.as_deref().unwrap_or("unknown"),
            "plugin handler panicked: {}",
            panic.message
        );
        let status = Status::internal(panic.to_string());
        self.report_configured(Err(Error::HandlerPanicked(panic)));
        status
    }

    pub(crate) async fn configure(
        &self,
        req: Box<ConfigureRequest>,
    ) -> Result<ConfigureResponse, Status> {
        let mut req = *req;
        let config = std::mem::take(&mut req.config);
        let runtime = runtime_info(req);
        tracing::info!(
            plugin = %self.identity.full_name(),
            runtime = %runtime.name,
            runtime_version = %runtime.version,
            nri_version = runtime.nri_version.as_deref().unwrap_or("unknown"),
            "configuring plugin"
        );
        let ctx = Context::new(
            &self.identity.index,
            &self.identity.name,
            runtime.clone(),
            self.handle.clone(),
        );
        self.state().context = Some(ctx.clone());
        let ctx = ctx.with_trace(crate::trace::current());

        let info = ConfigureInfo { config, runtime };
        let requested = match self.plugin.configure(&ctx, &info).await {
            Ok(mask) => mask,
            Err(err) => {
                tracing::error!(plugin = %ctx.name(), "plugin configuration failed: {err}");
                let status = Status::unknown(err.to_string());
                self.report_configured(Err(Error::Configure(err)));
                return Err(status);
            }
        };
        match subscription(requested, self.implemented, &info.runtime) {
            Ok(events) => {
                tracing::info!(plugin = %ctx.name(), events = %events.pretty_string(), "subscribing plugin");
                self.state().subscribed = events;
                self.report_configured(Ok(()));
                Ok(ConfigureResponse {
                    events: events.raw(),
                    failure_policy: self.extras.failure_policy,
                    requested_timeout_ms: self.extras.requested_timeout_ms(),
                })
            }
            Err(err) => {
                tracing::error!(plugin = %ctx.name(), "{err}");
                let status = Status::unknown(err.to_string());
                self.report_configured(Err(err));
                Err(status)
            }
        }
    }

    pub(crate) async fn synchronize(
        &self,
        req: Box<SyncMessage>,
    ) -> Result<SynchronizeResponse, Status> {
        let ctx = self.context()?;
        let pending = self.state().pending_sync.take();
        if req.more {
            let pending = match pending {
                None => Pending::start::<P>(*req),
                Some(mut pending) => pending.add::<P>(*req).map(|()| pending),
            }?;
            tracing::debug!("collecting split synchronize");
            self.state().pending_sync = Some(pending);
            return Ok(SynchronizeResponse {
                update: Vec::new(),
                more: true,
            });
        }
        let (pods, containers) = match pending {
            None => {
                let mut tables = Tables::default();
                req.decode_into::<P>(&mut tables)?;
                tables
            }
            Some(pending) => pending.finish::<P>(*req).await?,
        };
        let update = self
            .plugin
            .synchronize(&ctx, &pods, &containers)
            .await
            .map_err(handler_status);
        release_lists(pods, containers);
        Ok(SynchronizeResponse {
            update: update?,
            more: false,
        })
    }

    pub(crate) async fn shutdown(&self, _req: Box<Empty>) -> Result<Empty, Status> {
        let ctx = self.context()?;
        tracing::info!(plugin = %ctx.name(), "runtime requested shutdown");
        self.plugin.shutdown(&ctx).await;
        self.shutdown.notify_one();
        Ok(Empty {})
    }

    pub(crate) async fn run_pod_sandbox(
        &self,
        req: Box<RunPodSandboxRequest>,
    ) -> Result<RunPodSandboxResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        self.plugin
            .run_pod_sandbox(&ctx, &pod)
            .await
            .map_err(handler_status)?;
        Ok(RunPodSandboxResponse {})
    }

    pub(crate) async fn update_pod_sandbox(
        &self,
        req: Box<UpdatePodSandboxRequest>,
    ) -> Result<UpdatePodSandboxResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        self.plugin
            .update_pod_sandbox(
                &ctx,
                &pod,
                req.overhead_linux_resources.as_ref(),
                req.linux_resources.as_ref(),
            )
            .await
            .map_err(handler_status)?;
        Ok(UpdatePodSandboxResponse {})
    }

    pub(crate) async fn post_update_pod_sandbox(
        &self,
        req: Box<PostUpdatePodSandboxRequest>,
    ) -> Result<PostUpdatePodSandboxResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        self.plugin
            .post_update_pod_sandbox(&ctx, &pod)
            .await
            .map_err(handler_status)?;
        Ok(PostUpdatePodSandboxResponse {})
    }

    pub(crate) async fn stop_pod_sandbox(
        &self,
        req: Box<StopPodSandboxRequest>,
    ) -> Result<StopPodSandboxResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        self.plugin
            .stop_pod_sandbox(&ctx, &pod)
            .await
            .map_err(handler_status)?;
        Ok(StopPodSandboxResponse {})
    }

    pub(crate) async fn remove_pod_sandbox(
        &self,
        req: Box<RemovePodSandboxRequest>,
    ) -> Result<RemovePodSandboxResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        self.plugin
            .remove_pod_sandbox(&ctx, &pod)
            .await
            .map_err(handler_status)?;
        Ok(RemovePodSandboxResponse {})
    }

    pub(crate) async fn create_container(
        &self,
        req: Box<CreateContainerRequest>,
    ) -> Result<CreateContainerResponse, Status> {
        let ctx = self.context()?;
        let pod = req.pod.unwrap_or_default();
        let ctr = req.container.unwrap_or_default();
        let result = self
            .plugin
            .create_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(CreateContainerResponse {
            adjust: result.adjust,
            update: result.updates,
            evict: result.evictions,
        })
    }

    pub(crate) async fn post_create_container(
        &self,
        req: Box<PostCreateContainerRequest>,
    ) -> Result<PostCreateContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        self.plugin
            .post_create_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(PostCreateContainerResponse {})
    }

    pub(crate) async fn start_container(
        &self,
        req: Box<StartContainerRequest>,
    ) -> Result<StartContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        self.plugin
            .start_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(StartContainerResponse {})
    }

    pub(crate) async fn post_start_container(
        &self,
        req: Box<PostStartContainerRequest>,
    ) -> Result<PostStartContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        self.plugin
            .post_start_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(PostStartContainerResponse {})
    }

    pub(crate) async fn update_container(
        &self,
        req: Box<UpdateContainerRequest>,
    ) -> Result<UpdateContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        let update = self
            .plugin
            .update_container(&ctx, &pod, &ctr, req.linux_resources.as_ref())
            .await
            .map_err(handler_status)?;
        Ok(UpdateContainerResponse {
            update,
            ..Default::default()
        })
    }

    pub(crate) async fn post_update_container(
        &self,
        req: Box<PostUpdateContainerRequest>,
    ) -> Result<PostUpdateContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        self.plugin
            .post_update_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(PostUpdateContainerResponse {})
    }

    pub(crate) async fn stop_container(
        &self,
        req: Box<StopContainerRequest>,
    ) -> Result<StopContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        let update = self
            .plugin
            .stop_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(StopContainerResponse { update })
    }

    pub(crate) async fn remove_container(
        &self,
        req: Box<RemoveContainerRequest>,
    ) -> Result<RemoveContainerResponse, Status> {
        let ctx = self.context()?;
        let (pod, ctr) = (
            req.pod.unwrap_or_default(),
            req.container.unwrap_or_default(),
        );
        self.plugin
            .remove_container(&ctx, &pod, &ctr)
            .await
            .map_err(handler_status)?;
        Ok(RemoveContainerResponse {})
    }

    /// A handler error rejects the adjustment with the error's text as reason (the
    /// call itself succeeds), as in the Go stub.
    pub(crate) async fn validate_container_adjustment(
        &self,
        req: Box<ValidateContainerAdjustmentRequest>,
    ) -> Result<ValidateContainerAdjustmentResponse, Status> {
        let ctx = self.context()?;
        match self.plugin.validate_container_adjustment(&ctx, &req).await {
            Ok(()) => Ok(ValidateContainerAdjustmentResponse::default()),
            Err(err) => Ok(ValidateContainerAdjustmentResponse {
                reject: true,
                reason: err.to_string(),
            }),
        }
    }

    /// The deprecated generic notification of runtimes before NRI v0.12: dispatched to
    /// the dedicated handler when the plugin is subscribed to the event; other events
    /// are acknowledged and ignored.
    pub(crate) async fn state_change(&self, evt: Box<StateChangeEvent>) -> Result<Empty, Status> {
        let ctx = self.context()?;
        let Ok(event) = Event::try_from(evt.event) else {
            tracing::debug!(event = evt.event, "ignoring StateChange with unknown event");
            return Ok(Empty {});
        };
        if !self.state().subscribed.is_set(event) {
            tracing::debug!(event = ?event, "ignoring StateChange for unsubscribed event");
            return Ok(Empty {});
        }
        let pod = evt.pod.unwrap_or_default();
        let ctr = evt.container.unwrap_or_default();
        let p = &self.plugin;
        let result = match event {
            Event::RunPodSandbox => p.run_pod_sandbox(&ctx, &pod).await,
            Event::PostUpdatePodSandbox => p.post_update_pod_sandbox(&ctx, &pod).await,
            Event::StopPodSandbox => p.stop_pod_sandbox(&ctx, &pod).await,
            Event::RemovePodSandbox => p.remove_pod_sandbox(&ctx, &pod).await,
            Event::PostCreateContainer => p.post_create_container(&ctx, &pod, &ctr).await,
            Event::StartContainer => p.start_container(&ctx, &pod, &ctr).await,
            Event::PostStartContainer => p.post_start_container(&ctx, &pod, &ctr).await,
            Event::PostUpdateContainer => p.post_update_container(&ctx, &pod, &ctr).await,
            Event::RemoveContainer => p.remove_container(&ctx, &pod, &ctr).await,
            _ => Ok(()),
        };
        result.map_err(handler_status)?;
        Ok(Empty {})
    }
}

/// Lists of more pods and containers than this are freed on a thread of
/// their own rather than before the reply.
const RELEASE_ELSEWHERE: usize = 1024;

/// Frees the pods and containers of a Synchronize once the plugin has seen
/// them. A large table is tens of thousands of small allocations (maps of
/// annotations and labels, strings): freeing them takes about as long as
/// decoding them did, and the runtime waits for the reply meanwhile. So a
/// large table is freed on another thread (in parallel with the reply) and
/// a small one here, where that costs nothing worth a thread.
fn release_lists(pods: Vec<PodSandbox>, containers: Vec<Container>) {
    let count = pods.len() + containers.len();
    release(count, (pods, containers));
}

/// Drops `value`, which holds `count` objects: on a short-lived thread of
/// its own when there are more than [`RELEASE_ELSEWHERE`], here otherwise
/// (also when no thread can be started: the refused closure drops it). A
/// plain thread rather than the Tokio runtime's blocking pool, so that a
/// plugin on a current-thread runtime does not carry the pool's code for
/// this one use.
fn release<T: Send + 'static>(count: usize, value: T) {
    if count <= RELEASE_ELSEWHERE {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("nri-stub-release".into())
        .spawn(move || drop(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends the id of the thread that drops it.
    struct Witness(std::sync::mpsc::Sender<std::thread::ThreadId>);

    impl Drop for Witness {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    #[test]
    fn a_large_table_is_freed_on_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        release(RELEASE_ELSEWHERE + 1, Witness(tx));
        let dropped_on = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the table was never freed");
        assert_ne!(dropped_on, std::thread::current().id());
    }

    #[test]
    fn a_small_table_is_freed_at_once() {
        let (tx, rx) = std::sync::mpsc::channel();
        release(RELEASE_ELSEWHERE, Witness(tx));
        assert_eq!(rx.try_recv(), Ok(std::thread::current().id()));
    }
}
