//! The plugin: ValidateContainerAdjustment runs the default validator.

use std::sync::{Mutex, MutexGuard};

use nri_stub::api::ValidateContainerAdjustmentRequest;
use nri_stub::{ConfigureInfo, Context, EventMask, Plugin};
use nri_validator::DefaultValidator;

use crate::config::ValidatorSettings;

/// The default validator as a validating plugin.
pub struct Validator {
    state: Mutex<State>,
}

struct State {
    validator: DefaultValidator,
    enabled: bool,
}

impl Validator {
    /// A validator with the settings from the command line (its `-config` file).
    pub fn new(settings: ValidatorSettings) -> Validator {
        Validator {
            state: Mutex::new(State::from(settings)),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks one request: `Err` carries the rejection reason.
    pub fn check(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), nri_validator::ValidationError> {
        let state = self.state();
        if !state.enabled {
            return Ok(());
        }
        state.validator.validate(req)
    }
}

impl From<ValidatorSettings> for State {
    fn from(s: ValidatorSettings) -> State {
        State {
            validator: DefaultValidator::new(s.config),
            enabled: s.enabled,
        }
    }
}

#[nri_stub::plugin]
impl Plugin for Validator {
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
        if !info.config.trim().is_empty() {
            let settings = ValidatorSettings::from_yaml(&info.config)?;
            tracing::info!(config = ?settings.config, enabled = settings.enabled, "configuration from the runtime");
            *self.state() = State::from(settings);
        }
        if !self.state().enabled {
            tracing::warn!(
                "validation disabled by configuration (enable: false); accepting everything"
            );
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
    use nri_stub::api::{Container, ContainerAdjustment, Field, FieldOwners, OwningPlugins};

    fn hooked_request() -> ValidateContainerAdjustmentRequest {
        let mut owners = FieldOwners::default();
        owners
            .simple
            .insert(Field::OciHooks as i32, "10-hooks".into());
        ValidateContainerAdjustmentRequest {
            container: Some(Container {
                id: "c0".into(),
                ..Default::default()
            }),
            adjust: Some(ContainerAdjustment::default()),
            owners: Some(OwningPlugins {
                owners: [("c0".to_string(), owners)].into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rejects_by_configuration() {
        let v =
            Validator::new(ValidatorSettings::from_yaml("rejectOCIHookAdjustment: true").unwrap());
        assert_eq!(
            v.check(&hooked_request()).unwrap_err().to_string(),
            r#"validation error: plugin "10-hooks" attempted restricted OCI hook injection"#
        );
        let v = Validator::new(ValidatorSettings::from_yaml("").unwrap());
        assert!(v.check(&hooked_request()).is_ok());
    }

    #[test]
    fn disabled_accepts_everything() {
        let v = Validator::new(
            ValidatorSettings::from_yaml("enable: false\nrejectOCIHookAdjustment: true").unwrap(),
        );
        assert!(v.check(&hooked_request()).is_ok());
    }

    #[test]
    fn subscribes_to_validation_only() {
        let v = Validator::new(ValidatorSettings::default());
        assert_eq!(
            v.implemented_events(),
            EventMask::from(nri_stub::api::Event::ValidateContainerAdjustment)
        );
    }
}
