//! [`BuiltinPlugin`]: plugins compiled into the runtime.

use async_trait::async_trait;
use nri_api::*;

use crate::adaptation_error::BoxError;

/// A plugin that runs inside the runtime process.
///
/// It has no connection and no registration: it is configured at
/// [`Adaptation::start`](crate::Adaptation::start), synchronized with the
/// other plugins started then, and receives the events of its
/// [`events`](Self::events) mask in index order like every other plugin.
/// Every handler is optional and answers an empty reply by default. Errors
/// are ordinary plugin errors: they fail the runtime's call. An error of
/// [`validate_container_adjustment`](Self::validate_container_adjustment)
/// rejects the adjustment with the error text as reason.
///
/// ```
/// use nri_adaptation::{BoxError, BuiltinPlugin};
/// use nri_api::{ContainerAdjustment, CreateContainerRequest, CreateContainerResponse, Event, EventMask};
///
/// struct Tag;
///
/// #[nri_adaptation::async_trait]
/// impl BuiltinPlugin for Tag {
///     fn name(&self) -> &str { "tag" }
///     fn index(&self) -> &str { "05" }
///     fn events(&self) -> EventMask { Event::CreateContainer.into() }
///     async fn create_container(&self, _req: &CreateContainerRequest)
///         -> Result<CreateContainerResponse, BoxError> {
///         let mut adjust = ContainerAdjustment::default();
///         adjust.add_annotation("tagged", "yes");
///         Ok(CreateContainerResponse { adjust: Some(adjust), ..Default::default() })
///     }
/// }
/// ```
#[async_trait]
#[allow(unused_variables)]
pub trait BuiltinPlugin: Send + Sync + 'static {
    /// Base name (non-empty).
    fn name(&self) -> &str;
    /// Index (non-empty; two digits by convention).
    fn index(&self) -> &str;
    /// The events the plugin has handlers for; used when
    /// [`configure`](Self::configure) answers with no events.
    fn events(&self) -> EventMask;

    /// Configure; the default subscribes to [`events`](Self::events).
    async fn configure(&self, req: &ConfigureRequest) -> Result<ConfigureResponse, BoxError> {
        Ok(ConfigureResponse::default())
    }
    /// Synchronize with the existing pods and containers (always in one
    /// message).
    async fn synchronize(&self, req: &SynchronizeRequest) -> Result<SynchronizeResponse, BoxError> {
        Ok(SynchronizeResponse::default())
    }
    /// The adaptation is stopping.
    async fn shutdown(&self) {}
    /// RunPodSandbox.
    async fn run_pod_sandbox(
        &self,
        req: &RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, BoxError> {
        Ok(Default::default())
    }
    /// UpdatePodSandbox.
    async fn update_pod_sandbox(
        &self,
        req: &UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, BoxError> {
        Ok(Default::default())
    }
    /// PostUpdatePodSandbox.
    async fn post_update_pod_sandbox(
        &self,
        req: &PostUpdatePodSandboxRequest,
    ) -> Result<PostUpdatePodSandboxResponse, BoxError> {
        Ok(Default::default())
    }
    /// StopPodSandbox.
    async fn stop_pod_sandbox(
        &self,
        req: &StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, BoxError> {
        Ok(Default::default())
    }
    /// RemovePodSandbox.
    async fn remove_pod_sandbox(
        &self,
        req: &RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, BoxError> {
        Ok(Default::default())
    }
    /// CreateContainer.
    async fn create_container(
        &self,
        req: &CreateContainerRequest,
    ) -> Result<CreateContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// PostCreateContainer.
    async fn post_create_container(
        &self,
        req: &PostCreateContainerRequest,
    ) -> Result<PostCreateContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// StartContainer.
    async fn start_container(
        &self,
        req: &StartContainerRequest,
    ) -> Result<StartContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// PostStartContainer.
    async fn post_start_container(
        &self,
        req: &PostStartContainerRequest,
    ) -> Result<PostStartContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// UpdateContainer.
    async fn update_container(
        &self,
        req: &UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// PostUpdateContainer.
    async fn post_update_container(
        &self,
        req: &PostUpdateContainerRequest,
    ) -> Result<PostUpdateContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// StopContainer.
    async fn stop_container(
        &self,
        req: &StopContainerRequest,
    ) -> Result<StopContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// RemoveContainer.
    async fn remove_container(
        &self,
        req: &RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, BoxError> {
        Ok(Default::default())
    }
    /// ValidateContainerAdjustment: an error rejects with its text as reason.
    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, BoxError> {
        Ok(Default::default())
    }
}

/// The default validator (`nri-validator`) as a builtin plugin: index `00`,
/// name `default-validator`, subscribed to ValidateContainerAdjustment only.
pub struct DefaultValidatorPlugin {
    validator: nri_validator::DefaultValidator,
}

impl DefaultValidatorPlugin {
    /// Wraps a validator built from `config`.
    pub fn new(config: nri_validator::DefaultValidatorConfig) -> Self {
        DefaultValidatorPlugin {
            validator: nri_validator::DefaultValidator::new(config),
        }
    }
}

#[async_trait]
impl BuiltinPlugin for DefaultValidatorPlugin {
    fn name(&self) -> &str {
        nri_validator::DEFAULT_VALIDATOR_NAME
    }
    fn index(&self) -> &str {
        nri_validator::DEFAULT_VALIDATOR_INDEX
    }
    fn events(&self) -> EventMask {
        Event::ValidateContainerAdjustment.into()
    }
    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, BoxError> {
        self.validator.validate(req)?;
        Ok(ValidateContainerAdjustmentResponse::default())
    }
}
