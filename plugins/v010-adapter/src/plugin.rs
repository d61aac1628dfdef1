//! The NRI plugin: pod and container start/stop events run the v0.1 plugins.

use std::time::Duration;

use nri_stub::api::{Container, ContainerUpdate, PodSandbox};
use nri_stub::{Context, Plugin};

use crate::invoke::{InvokeError, Invoker};
use crate::request::Subject;
use crate::v01::State;

/// The v0.1 adapter: RunPodSandbox and StartContainer invoke the v0.1 plugins with
/// state `create`, StopPodSandbox and StopContainer with state `delete`.
///
/// ```no_run
/// use nri_plugin_v010_adapter::{invoke::Invoker, V010Adapter};
/// # async fn run() -> Result<(), nri_stub::Error> {
/// let invoker = Invoker {
///     conf_path: "/etc/nri/conf.json".into(),
///     bin_dir: "/opt/nri/bin".into(),
///     search_path: std::env::var_os("PATH"),
///     timeout: std::time::Duration::from_secs(2),
/// };
/// let adapter = V010Adapter::new(invoker, false);
/// nri_stub::Stub::builder(adapter).name("v010-adapter").index("00").build()?.run().await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct V010Adapter {
    invoker: Invoker,
    runtime_timeout: bool,
}

impl V010Adapter {
    /// An adapter running plugins with `invoker`. With `runtime_timeout`, each
    /// plugin may run as long as the runtime's request timeout instead of
    /// `invoker.timeout`.
    pub fn new(invoker: Invoker, runtime_timeout: bool) -> Self {
        V010Adapter {
            invoker,
            runtime_timeout,
        }
    }

    async fn invoke(
        &self,
        ctx: &Context,
        subject: Subject,
        state: State,
    ) -> Result<(), InvokeError> {
        let mut invoker = self.invoker.clone();
        if self.runtime_timeout {
            invoker.timeout = ctx
                .runtime()
                .request_timeout
                .max(Duration::from_millis(100));
        }
        invoker.invoke(&subject, state).await.map(|_| ())
    }
}

#[nri_stub::plugin]
impl Plugin for V010Adapter {
    async fn run_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        tracing::info!("started pod {}/{}", pod.namespace, pod.name);
        self.invoke(ctx, Subject::pod(pod), State::Create)
            .await
            .inspect_err(|e| tracing::error!("v0.1 invocation failed: {e}"))?;
        Ok(())
    }

    async fn stop_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        tracing::info!("stopped pod {}/{}", pod.namespace, pod.name);
        self.invoke(ctx, Subject::pod(pod), State::Delete)
            .await
            .inspect_err(|e| tracing::error!("v0.1 delete failed for {:?}: {e}", pod.id))?;
        Ok(())
    }

    async fn start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        tracing::info!(
            "starting container {}/{}/{}",
            pod.namespace,
            pod.name,
            ctr.name
        );
        self.invoke(ctx, Subject::container(pod, ctr), State::Create)
            .await
            .inspect_err(|e| tracing::error!("v0.1 invocation failed: {e}"))?;
        Ok(())
    }

    async fn stop_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        tracing::info!(
            "stopped container {}/{}/{}",
            pod.namespace,
            pod.name,
            ctr.name
        );
        // As in the Go adapter, a failure here does not fail the stop.
        if let Err(e) = self
            .invoke(ctx, Subject::container(pod, ctr), State::Delete)
            .await
        {
            tracing::error!("v0.1 delete failed for {:?}: {e}", ctr.id);
        }
        Ok(Vec::new())
    }
}
