//! The [`Plugin`] trait: one method per NRI request, all optional.

#[cfg(feature = "async")]
use async_trait::async_trait;
#[cfg(feature = "async")]
use nri_api::{
    Container, EventMask, LinuxResources, PodSandbox, ValidateContainerAdjustmentRequest,
};
use nri_api::{ContainerAdjustment, ContainerEviction, ContainerUpdate};

#[cfg(feature = "async")]
use crate::{ConfigureInfo, Context, HandlerResult};

/// An NRI plugin: implement the handlers for the events you care about.
///
/// Every handler has a default that does nothing and succeeds. Put
/// [`#[nri_stub::plugin]`](crate::plugin) on the `impl` block: it makes the `async fn`s
/// work (it applies [`async_trait`](crate::async_trait)) and writes
/// [`implemented_events`](Plugin::implemented_events) from the handlers you wrote, so
/// the plugin is subscribed to exactly those events.
///
/// A handler error fails the request: the runtime receives it as a ttRPC error with
/// code `Unknown` and the error's text (for [`validate_container_adjustment`](Plugin::validate_container_adjustment),
/// the adjustment is rejected with the text as reason, as the Go stub does).
///
/// # Example
///
/// ```
/// use nri_stub::api::{Container, ContainerUpdate, PodSandbox};
/// use nri_stub::{Context, EventMask, Plugin};
///
/// #[derive(Default)]
/// struct Logger;
///
/// #[nri_stub::plugin]
/// impl Plugin for Logger {
///     async fn start_container(&self, ctx: &Context, pod: &PodSandbox, ctr: &Container) -> nri_stub::HandlerResult<()> {
///         println!("{}: container {} of pod {} started", ctx.name(), ctr.name, pod.name);
///         Ok(())
///     }
///
///     async fn stop_container(&self, _: &Context, _: &PodSandbox, _: &Container) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
///         Ok(Vec::new())
///     }
/// }
///
/// let events = Logger.implemented_events();
/// assert!(events.is_set(nri_stub::api::Event::StartContainer));
/// assert!(events.is_set(nri_stub::api::Event::StopContainer));
/// assert!(!events.is_set(nri_stub::api::Event::CreateContainer));
/// ```
///
/// # Forgetting the attribute
///
/// Without `#[nri_stub::plugin]` the `impl` does not compile, and the error says so:
/// "`Mine` implements `nri_stub::Plugin` without `#[nri_stub::plugin]`", next to
/// rustc's E0195 (the `async fn`s do not match the trait's lifetimes).
///
/// ```compile_fail,E0277
/// use nri_stub::api::PodSandbox;
/// use nri_stub::{Context, Plugin};
///
/// struct Mine;
///
/// impl Plugin for Mine {
///     async fn run_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
///         Ok(())
///     }
/// }
/// ```
#[cfg(feature = "async")]
#[async_trait]
pub trait Plugin: crate::__private::PluginAttribute + Send + Sync + 'static {
    /// The events this plugin has handlers for.
    ///
    /// Written by `#[nri_stub::plugin]`; write it yourself only without the macro. The
    /// stub refuses to start a plugin whose mask is empty. `configure`, `synchronize`
    /// and `shutdown` are requests every plugin receives and are not part of the mask.
    fn implemented_events(&self) -> EventMask {
        EventMask::default()
    }

    /// The runtime configures the plugin; this is the first request after registration.
    ///
    /// Returns the events to subscribe to: an empty mask means every implemented event.
    /// Subscribing to an event without a handler is an error, and so is subscribing to
    /// an event the runtime's NRI version cannot deliver (see
    /// [`Error::EventsNotSupported`](crate::Error::EventsNotSupported)); `info.runtime`
    /// says which version the runtime speaks.
    async fn configure(&self, ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        let _ = (ctx, info);
        Ok(EventMask::default())
    }

    /// The runtime's existing pods and containers, once after `configure`.
    ///
    /// A runtime may send them in several parts; the stub collects them and calls this
    /// once with everything. Returns updates to apply to existing containers.
    async fn synchronize(
        &self,
        ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (ctx, pods, containers);
        Ok(Vec::new())
    }

    /// The runtime asks the plugin to shut down; [`Stub::run`](crate::Stub::run) then
    /// returns `Ok(())`.
    async fn shutdown(&self, ctx: &Context) {
        let _ = ctx;
    }

    /// A pod sandbox is being started.
    async fn run_pod_sandbox(&self, ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = (ctx, pod);
        Ok(())
    }

    /// The resources of a pod sandbox are being updated.
    async fn update_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, overhead, resources);
        Ok(())
    }

    /// The resources of a pod sandbox were updated.
    async fn post_update_pod_sandbox(&self, ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = (ctx, pod);
        Ok(())
    }

    /// A pod sandbox is being stopped.
    async fn stop_pod_sandbox(&self, ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = (ctx, pod);
        Ok(())
    }

    /// A pod sandbox is being removed.
    async fn remove_pod_sandbox(&self, ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        let _ = (ctx, pod);
        Ok(())
    }

    /// A container is being created: adjust it, update or evict other containers.
    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        let _ = (ctx, pod, container);
        Ok(CreateContainerResult::default())
    }

    /// A container was created.
    async fn post_create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, container);
        Ok(())
    }

    /// A container is being started.
    async fn start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, container);
        Ok(())
    }

    /// A container was started.
    async fn post_start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, container);
        Ok(())
    }

    /// The resources of a container are being updated. An update of this container in
    /// the result replaces the requested one.
    async fn update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (ctx, pod, container, resources);
        Ok(Vec::new())
    }

    /// The resources of a container were updated.
    async fn post_update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, container);
        Ok(())
    }

    /// A container is being stopped; the result updates other containers.
    async fn stop_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        let _ = (ctx, pod, container);
        Ok(Vec::new())
    }

    /// A container is being removed.
    async fn remove_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> HandlerResult<()> {
        let _ = (ctx, pod, container);
        Ok(())
    }

    /// Validate the merged adjustments of all plugins for a container being created.
    ///
    /// An error rejects the adjustment, with the error's text as the reason; the
    /// container is then not created.
    async fn validate_container_adjustment(
        &self,
        ctx: &Context,
        request: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        let _ = (ctx, request);
        Ok(())
    }
}

/// What [`Plugin::create_container`] returns: an adjustment of the new container,
/// updates of other containers, and containers to evict.
///
/// ```
/// use nri_stub::api::ContainerAdjustment;
/// use nri_stub::CreateContainerResult;
///
/// let result: CreateContainerResult = ContainerAdjustment::default().into();
/// assert!(result.adjust.is_some());
/// assert!(result.updates.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateContainerResult {
    /// Changes to the container being created.
    pub adjust: Option<ContainerAdjustment>,
    /// Updates of other containers.
    pub updates: Vec<ContainerUpdate>,
    /// Containers to evict.
    pub evictions: Vec<ContainerEviction>,
}

impl CreateContainerResult {
    /// A result with this adjustment and nothing else.
    pub fn adjust(adjust: ContainerAdjustment) -> Self {
        CreateContainerResult {
            adjust: Some(adjust),
            ..CreateContainerResult::default()
        }
    }

    /// Adds updates of other containers.
    pub fn with_updates(mut self, updates: impl IntoIterator<Item = ContainerUpdate>) -> Self {
        self.updates.extend(updates);
        self
    }

    /// Adds containers to evict.
    pub fn with_evictions(
        mut self,
        evictions: impl IntoIterator<Item = ContainerEviction>,
    ) -> Self {
        self.evictions.extend(evictions);
        self
    }
}

impl From<ContainerAdjustment> for CreateContainerResult {
    fn from(adjust: ContainerAdjustment) -> Self {
        CreateContainerResult::adjust(adjust)
    }
}
