//! The default validator's rules.

use nri_api::security_profile::ProfileType;
use nri_api::{OwningPlugins, ValidateContainerAdjustmentRequest};

use crate::annotations::{effective_annotation, parse_plugin_list, REQUIRED_PLUGINS_ANNOTATION};
use crate::error::{SeccompProfileKind, ValidationError};
use crate::{owners, plugin_map, DefaultValidatorConfig};
use nri_api::goparse as gobool;

/// The default validator: a fixed set of rules, each switched on by its
/// [`DefaultValidatorConfig`] option.
///
/// [`validate`](Self::validate) checks, in this order, and returns the first
/// failure:
///
/// 1. OCI hook injection (`reject_oci_hook_adjustment`);
/// 2. seccomp policy adjustment, by the container's original profile kind
///    (`reject_unconfined_…`, `reject_runtime_default_…`, `reject_custom_…`);
/// 3. namespace adjustment (`reject_namespace_adjustment`);
/// 4. required plugins (`required_plugins` plus the
///    `required-plugins.noderesource.dev` annotation, unless the
///    tolerate annotation says true); checked even when no plugin adjusted
///    the container;
/// 5. sysctl adjustment (`reject_sysctl_adjustment`).
///
/// Rules 1–3 and 5 look only at fields that some plugin owns (see
/// [`owners`](crate::owners)) and are skipped when the request has no
/// adjustment.
///
/// # Example
///
/// ```
/// use nri_api::{Field, FieldOwners, OwningPlugins, ContainerAdjustment, Container,
///               ValidateContainerAdjustmentRequest};
/// use nri_validator::{DefaultValidator, DefaultValidatorConfig};
///
/// let validator = DefaultValidator::new(DefaultValidatorConfig {
///     enable: true,
///     reject_oci_hook_adjustment: true,
///     ..Default::default()
/// });
///
/// let mut fields = FieldOwners::default();
/// fields.simple.insert(Field::OciHooks as i32, "10-hooks".into());
/// let req = ValidateContainerAdjustmentRequest {
///     container: Some(Container { id: "ctr0".into(), ..Default::default() }),
///     adjust: Some(ContainerAdjustment::default()),
///     owners: Some(OwningPlugins { owners: [("ctr0".to_string(), fields)].into() }),
///     ..Default::default()
/// };
///
/// let err = validator.validate(&req).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"validation error: plugin "10-hooks" attempted restricted OCI hook injection"#,
/// );
/// ```
#[derive(Debug, Clone, Default)]
pub struct DefaultValidator {
    cfg: DefaultValidatorConfig,
}

impl DefaultValidator {
    /// A validator with the given configuration. `enable` is not looked at
    /// here: it tells a runtime whether to install the validator at all.
    pub fn new(config: DefaultValidatorConfig) -> Self {
        Self { cfg: config }
    }

    /// Replaces the configuration.
    pub fn set_config(&mut self, config: DefaultValidatorConfig) {
        self.cfg = config;
    }

    /// The configuration in use.
    pub fn config(&self) -> &DefaultValidatorConfig {
        &self.cfg
    }

    /// Validates the merged adjustment of a container; `Ok(())` accepts it.
    ///
    /// A request without a container is treated as one with an empty id and
    /// name, and a request without ownership data as one where no plugin owns
    /// anything.
    pub fn validate(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        let ctr = req.container.as_ref();
        tracing::debug!(
            pod_namespace = req.pod.as_ref().map_or("", |p| p.namespace.as_str()),
            pod = req.pod.as_ref().map_or("", |p| p.name.as_str()),
            container = ctr.map_or("", |c| c.name.as_str()),
            "validating container adjustment"
        );
        let result = self
            .check_oci_hooks(req)
            .and_then(|()| self.check_seccomp_policy(req))
            .and_then(|()| self.check_namespaces(req))
            .and_then(|()| self.check_required_plugins(req))
            .and_then(|()| self.check_sysctls(req));
        if let Err(err) = &result {
            tracing::warn!(
                pod_namespace = req.pod.as_ref().map_or("", |p| p.namespace.as_str()),
                pod = req.pod.as_ref().map_or("", |p| p.name.as_str()),
                container = ctr.map_or("", |c| c.name.as_str()),
                "rejecting container adjustment: {err}"
            );
        }
        result
    }

    fn check_oci_hooks(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        if req.adjust.is_none() || !self.cfg.reject_oci_hook_adjustment {
            return Ok(());
        }
        match owners_of(req).and_then(|o| owners::hooks_owner(o, container_id(req))) {
            Some(owners) => Err(ValidationError::OciHookInjection {
                owners: owners.to_owned(),
            }),
            None => Ok(()),
        }
    }

    fn check_seccomp_policy(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        if req.adjust.is_none() {
            return Ok(());
        }
        let Some(owner) =
            owners_of(req).and_then(|o| owners::seccomp_policy_owner(o, container_id(req)))
        else {
            return Ok(());
        };
        let profile = req
            .container
            .as_ref()
            .and_then(|c| c.linux.as_ref())
            .and_then(|l| l.seccomp_profile.as_ref());
        // An unknown profile type matches no rule, as in the reference.
        let (kind, rejected) = match profile.map(|p| ProfileType::try_from(p.profile_type)) {
            None | Some(Ok(ProfileType::Unconfined)) => (
                SeccompProfileKind::Unconfined,
                self.cfg.reject_unconfined_seccomp_adjustment,
            ),
            Some(Ok(ProfileType::RuntimeDefault)) => (
                SeccompProfileKind::RuntimeDefault,
                self.cfg.reject_runtime_default_seccomp_adjustment,
            ),
            Some(Ok(ProfileType::Localhost)) => (
                SeccompProfileKind::Custom,
                self.cfg.reject_custom_seccomp_adjustment,
            ),
            Some(Err(_)) => return Ok(()),
        };
        if !rejected {
            return Ok(());
        }
        Err(ValidationError::SeccompPolicyAdjustment {
            owner: owner.to_owned(),
            profile: kind,
        })
    }

    fn check_namespaces(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        if req.adjust.is_none() || !self.cfg.reject_namespace_adjustment {
            return Ok(());
        }
        match owners_of(req).and_then(|o| owners::namespace_owners(o, container_id(req))) {
            // Sorted by namespace type (the map is ordered); the reference
            // lists them in random map order.
            Some(map) => Err(ValidationError::NamespaceAdjustment {
                offenders: map.iter().map(|(ns, p)| (ns.clone(), p.clone())).collect(),
            }),
            None => Ok(()),
        }
    }

    fn check_required_plugins(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        let pod = req.pod.as_ref();
        let name = req.container.as_ref().map_or("", |c| c.name.as_str());

        let tolerate_key = &self.cfg.tolerate_missing_plugins_annotation;
        if !tolerate_key.is_empty() {
            if let Some(value) = effective_annotation(pod, tolerate_key, name) {
                let tolerate = gobool::parse_bool(value).map_err(|source| {
                    ValidationError::InvalidTolerateAnnotation {
                        key: tolerate_key.clone(),
                        value: value.to_owned(),
                        source,
                    }
                })?;
                if tolerate {
                    return Ok(());
                }
            }
        }

        let mut required: Vec<&str> = self
            .cfg
            .required_plugins
            .iter()
            .map(String::as_str)
            .collect();
        let annotated = match effective_annotation(pod, REQUIRED_PLUGINS_ANNOTATION, name) {
            Some(value) => parse_plugin_list(value).map_err(|source| {
                ValidationError::InvalidRequiredPluginsAnnotation {
                    value: value.to_owned(),
                    source,
                }
            })?,
            None => Vec::new(),
        };
        required.extend(annotated.iter().map(String::as_str));
        if required.is_empty() {
            return Ok(());
        }

        let present = plugin_map(req);
        let missing: Vec<String> = required
            .into_iter()
            .filter(|r| !present.contains_key(*r))
            .map(str::to_owned)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(ValidationError::MissingRequiredPlugins { missing })
    }

    fn check_sysctls(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<(), ValidationError> {
        let Some(linux) = req.adjust.as_ref().and_then(|a| a.linux.as_ref()) else {
            return Ok(());
        };
        if !self.cfg.reject_sysctl_adjustment {
            return Ok(());
        }
        let Some(all) = owners_of(req) else {
            return Ok(());
        };
        let id = container_id(req);
        // In sysctl key order; the reference uses random map order.
        let offenders: Vec<String> = linux
            .sysctl
            .keys()
            .filter_map(|key| owners::sysctl_owner(all, id, key))
            .map(str::to_owned)
            .collect();
        if offenders.is_empty() {
            return Ok(());
        }
        Err(ValidationError::SysctlAdjustment { owners: offenders })
    }
}

fn owners_of(req: &ValidateContainerAdjustmentRequest) -> Option<&OwningPlugins> {
    req.owners.as_ref()
}

fn container_id(req: &ValidateContainerAdjustmentRequest) -> &str {
    req.container.as_ref().map_or("", |c| c.id.as_str())
}

#[cfg(test)]
mod tests;
