//! The plugin: ValidateContainerAdjustment runs the policy validator.

use std::sync::Arc;

use nri_policy::{Policy, PolicyValidator};
use nri_stub::api::ValidateContainerAdjustmentRequest;
use nri_stub::{ConfigureInfo, Context, EventMask, Plugin};

/// The policy validator as a validating plugin.
pub struct PolicyPlugin {
    validator: Arc<PolicyValidator>,
}

impl PolicyPlugin {
    /// A plugin validating with `validator` (shared with the reload loop).
    pub fn new(validator: Arc<PolicyValidator>) -> PolicyPlugin {
        PolicyPlugin { validator }
    }

    /// Checks one request: `Err` carries the rejection reason.
    pub fn check(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), nri_policy::Refusal> {
        self.validator.validate(req)
    }
}

#[nri_stub::plugin]
impl Plugin for PolicyPlugin {
    async fn configure(
        &self,
        ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        tracing::info!(
            "{} connected to {} {}",
            ctx.name(),
            info.runtime.name,
            info.runtime.version
        );
        // A policy sent by the runtime (a pre-installed plugin's drop-in file)
        // replaces the file's; one that does not load fails Configure.
        if !info.config.trim().is_empty() {
            let policy = Policy::from_yaml_str(&info.config, "runtime configuration")?;
            self.validator.reload(policy);
        }
        Ok(EventMask::default())
    }

    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        Ok(self.check(req)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribes_to_validation_only() {
        let p = PolicyPlugin::new(Arc::new(PolicyValidator::new(Policy::empty("p"))));
        assert_eq!(
            p.implemented_events(),
            EventMask::from(nri_stub::api::Event::ValidateContainerAdjustment)
        );
    }
}
