//! The lifecycle entry points of [`Adaptation`]: each takes the lifecycle
//! lock, calls the subscribed plugins in index order, merges their replies
//! where the event has any, and drops plugins that closed.
//!
//! Each entry point returns its call's state boxed (one allocation per
//! call): the future the runtime holds, moves and nests in timeouts is a
//! pointer, however much the requests, the merge state and the nested
//! plugin calls weigh (10 to 31 KiB unboxed, in release builds as in debug
//! ones; `tests/future_sizes.rs` keeps them small).

use std::future::Future;
use std::sync::Arc;

use nri_api::*;

use crate::adaptation::Adaptation;
use crate::adaptation_error::{Error, PluginError};
use crate::merge::{CreateResult, StopResult, UpdateResult};
use crate::plugin::{Plugin, Rpc};
use crate::trace::RequestTrace;
use tracing::Instrument;

/// A failed plugin call: fatal errors drop the plugin and the call goes on
/// (`Ok`), other errors fail the call.
///
/// Which fatal errors drop the plugin and which fail the call follows the
/// plugin's [`TimeoutPolicy`](crate::TimeoutPolicy) and announced failure
/// policy (by default: drop it and go on, as the reference does).
fn handle_error(plugin: &Plugin, event: &str, err: PluginError) -> Result<(), Error> {
    if err.is_fatal() {
        let outcome = plugin.on_fatal(&err);
        if outcome.drop_plugin {
            tracing::warn!(plugin = %plugin.name, event, error = %err,
                "closing plugin, failed to handle request");
            plugin.close();
        }
        if outcome.fail_call {
            return Err(Error::PluginFailed {
                plugin: plugin.name.clone(),
                event: event.to_string(),
                source: err,
            });
        }
        tracing::warn!(plugin = %plugin.name, event, error = %err,
            "plugin failed to handle request; proceeding without it");
        Ok(())
    } else {
        Err(Error::Plugin {
            plugin: plugin.name.clone(),
            source: err,
        })
    }
}

/// Logs a plugin's failure of a teardown event that goes on to the others.
fn teardown_failed(plugin: &Plugin, event: &str, err: &Error) {
    tracing::warn!(plugin = %plugin.name, event, error = %err,
        "plugin failed a teardown event; delivering it to the remaining plugins");
}

impl Adaptation {
    /// Runs `call` for the event `req` on the current plugin list under the
    /// lifecycle lock, then removes plugins that closed. The event is
    /// numbered and queued for synchronizing plugins first (see
    /// `crate::backlog`).
    ///
    /// The request runs in a `nri.request` span and gets its trace context
    /// (see `crate::trace`), which `call` passes on to the plugin calls.
    async fn dispatch<R, T, F, Fut>(&self, req: Box<R>, call: F) -> Result<T, Error>
    where
        R: Rpc,
        F: FnOnce(Vec<Arc<Plugin>>, Box<R>, RequestTrace) -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let (trace, parent) = crate::trace::request_context();
        let span = crate::trace::request_span(R::METHOD, &*req, &trace, parent.as_ref());
        let trace = RequestTrace::new(trace, parent.as_ref(), &span);
        let recorder = span.clone();
        async move {
            let _lifecycle = self.inner.lifecycle.lock().await;
            let shown = self.inner.backlogs.record(|| req.queued());
            let mut plugins = self.inner.snapshot();
            if !shown.is_empty() {
                // Their synchronization showed this event already.
                plugins.retain(|p| !shown.iter().any(|s| Arc::ptr_eq(s, p)));
            }
            // WebAssembly plugins whose instance this event may replace.
            #[cfg(feature = "wasm")]
            let wasm: Vec<Arc<Plugin>> = plugins.iter().filter(|p| p.is_wasm()).cloned().collect();
            let result = call(plugins, req, trace).await;
            // A replaced instance is synchronized again before the runtime's
            // next event reaches it (for a runtime that blocks plugin
            // synchronization around its events).
            #[cfg(feature = "wasm")]
            for p in &wasm {
                p.replacement_taken_up().await;
            }
            self.inner.remove_closed();
            recorder.record("outcome", if result.is_ok() { "ok" } else { "error" });
            result
        }
        .instrument(span)
        .await
    }

    /// Delivers a notification to every subscribed plugin. A failure ends
    /// the delivery and is returned, except for teardown events (`teardown`),
    /// which reach every plugin unless the runtime asked for the reference's
    /// stop-at-first-error: the first failure is returned after all plugins
    /// were called.
    async fn notify<R: Rpc>(&self, req: Box<R>, teardown: bool) -> Result<(), Error> {
        let go_on = self.delivers_on(teardown);
        self.dispatch(req, |plugins, req, trace| async move {
            let mut first = None;
            for p in &plugins {
                if p.is_closed() {
                    continue;
                }
                if let Err(e) = p.call_event(&*req, Some(&trace)).await {
                    if let Err(e) = handle_error(p, R::METHOD, e) {
                        if !go_on {
                            return Err(e);
                        }
                        teardown_failed(p, R::METHOD, &e);
                        first.get_or_insert(e);
                    }
                }
            }
            first.map_or(Ok(()), Err)
        })
        .await
    }

    /// Whether a failed plugin leaves the event going on to the next ones.
    fn delivers_on(&self, teardown: bool) -> bool {
        teardown && !self.inner.settings.policies.teardown_stops_at_first_error
    }

    /// A pod sandbox is being started.
    pub fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A pod's resources are being updated; plugins' replies carry nothing.
    pub fn update_pod_sandbox(
        &self,
        req: UpdatePodSandboxRequest,
    ) -> impl Future<Output = Result<UpdatePodSandboxResponse, Error>> + Send + '_ {
        Box::pin(async move {
            self.notify(Box::new(req), false).await?;
            Ok(UpdatePodSandboxResponse::default())
        })
    }

    /// A pod's resources were updated.
    pub fn post_update_pod_sandbox(
        &self,
        req: PostUpdatePodSandboxRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A pod sandbox is being stopped.
    pub fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), true))
    }

    /// A pod sandbox is being removed.
    pub fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), true))
    }

    /// A container is being created: every subscribed plugin may adjust it
    /// (each sees the earlier plugins' changes) and update other
    /// containers; the merged result is then validated.
    ///
    /// The reply holds the merged adjustment, the updates of other
    /// containers and the evictions plugins asked for (decision 15). On
    /// error the runtime must not create the container nor apply anything.
    pub fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> impl Future<Output = Result<CreateContainerResponse, Error>> + Send + '_ {
        Box::pin(self.create_call(Box::new(req)))
    }

    async fn create_call(
        &self,
        req: Box<CreateContainerRequest>,
    ) -> Result<CreateContainerResponse, Error> {
        self.dispatch(req, |plugins, req, trace| async move {
            let policies = &self.inner.settings.policies;
            // The connected plugins' names are only listed when they are checked.
            if policies.checks_required() {
                let connected: Vec<(String, String)> = plugins
                    .iter()
                    .filter(|p| !p.is_closed())
                    .map(|p| (p.idx.clone(), p.base.clone()))
                    .collect();
                policies.check_required(
                    req.pod.as_ref(),
                    req.container.as_ref().map_or("", |c| c.name.as_str()),
                    &connected,
                )?;
            }
            let mut result = CreateResult::new(*req);
            let has_validators = plugins
                .iter()
                .any(|p| !p.is_closed() && p.subscribed(Event::ValidateContainerAdjustment));
            // The container as the runtime sent it (normalized), for validators.
            // Boxed: a large message, kept across every plugin's call.
            let mut validate = has_validators.then(|| {
                Box::new(ValidateContainerAdjustmentRequest {
                    pod: result.request().pod.clone(),
                    container: result.request().container.clone(),
                    ..Default::default()
                })
            });

            for p in &plugins {
                if p.is_closed() {
                    continue;
                }
                if let Some(v) = validate.as_mut() {
                    v.plugins.push(PluginInstance {
                        name: p.base.clone(),
                        index: p.idx.clone(),
                    });
                }
                let reply = match p.call_event(result.request(), Some(&trace)).await {
                    Ok(Some(reply)) => reply,
                    Ok(None) => continue,
                    Err(e) => {
                        handle_error(p, method_name::CREATE, e)?;
                        continue;
                    }
                };
                p.record_adjustments(
                    method_name::CREATE,
                    reply.adjust.as_ref(),
                    &reply.update,
                    reply.evict.len(),
                );
                result.apply(&p.name, *reply)?;
            }

            let outcome = result.into_outcome();
            if let Some(mut v) = validate {
                let validators: Vec<_> = plugins
                    .iter()
                    .filter(|p| !p.is_closed() && p.subscribed(Event::ValidateContainerAdjustment))
                    .cloned()
                    .collect();
                if !validators.is_empty() {
                    v.adjust = outcome.response.adjust.clone();
                    v.update = outcome.response.update.clone();
                    v.owners = Some(outcome.owners.into_proto());
                    crate::validate::validate(validators, Arc::from(v), &trace).await?;
                }
            }
            Ok(outcome.response)
        })
        .await
    }

    /// A container was created.
    pub fn post_create_container(
        &self,
        req: PostCreateContainerRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A container is being started.
    pub fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A container was started.
    pub fn post_start_container(
        &self,
        req: PostStartContainerRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A container's resources are being updated: plugins may change the
    /// requested resources (each sees the earlier plugins' changes) and
    /// update other containers. The reply lists the updates of other
    /// containers, then the merged update of this one if a plugin touched
    /// it (decision 8), and the evictions plugins asked for.
    pub fn update_container(
        &self,
        req: UpdateContainerRequest,
    ) -> impl Future<Output = Result<UpdateContainerResponse, Error>> + Send + '_ {
        Box::pin(self.update_call(Box::new(req)))
    }

    async fn update_call(
        &self,
        req: Box<UpdateContainerRequest>,
    ) -> Result<UpdateContainerResponse, Error> {
        self.dispatch(req, |plugins, req, trace| async move {
            let mut result = UpdateResult::new(*req);
            for p in &plugins {
                if p.is_closed() {
                    continue;
                }
                let reply = match p.call_event(result.request(), Some(&trace)).await {
                    Ok(Some(reply)) => reply,
                    Ok(None) => continue,
                    Err(e) => {
                        handle_error(p, method_name::UPDATE, e)?;
                        continue;
                    }
                };
                p.record_adjustments(method_name::UPDATE, None, &reply.update, reply.evict.len());
                result.apply(&p.name, *reply)?;
            }
            Ok(result.into_response())
        })
        .await
    }

    /// A container's resources were updated.
    pub fn post_update_container(
        &self,
        req: PostUpdateContainerRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), false))
    }

    /// A container is being stopped; plugins may update other containers.
    pub fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> impl Future<Output = Result<StopContainerResponse, Error>> + Send + '_ {
        Box::pin(self.stop_call(Box::new(req)))
    }

    async fn stop_call(
        &self,
        req: Box<StopContainerRequest>,
    ) -> Result<StopContainerResponse, Error> {
        let go_on = self.delivers_on(true);
        self.dispatch(req, |plugins, req, trace| async move {
            let mut result = StopResult::new();
            let mut first = None;
            for p in &plugins {
                if p.is_closed() {
                    continue;
                }
                let outcome = match p.call_event(&*req, Some(&trace)).await {
                    Ok(Some(reply)) => {
                        p.record_adjustments(method_name::STOP, None, &reply.update, 0);
                        result.apply(&p.name, *reply).map_err(Error::from)
                    }
                    Ok(None) => Ok(()),
                    Err(e) => handle_error(p, method_name::STOP, e),
                };
                if let Err(e) = outcome {
                    if !go_on {
                        return Err(e);
                    }
                    teardown_failed(p, method_name::STOP, &e);
                    first.get_or_insert(e);
                }
            }
            match first {
                Some(e) => Err(e),
                None => Ok(result.into_response()),
            }
        })
        .await
    }

    /// A container is being removed.
    pub fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
        Box::pin(self.notify(Box::new(req), true))
    }
}

/// Operation names used in logs and metrics.
mod method_name {
    pub const CREATE: &str = nri_api::service::plugin::CREATE_CONTAINER;
    pub const UPDATE: &str = nri_api::service::plugin::UPDATE_CONTAINER;
    pub const STOP: &str = nri_api::service::plugin::STOP_CONTAINER;
}
