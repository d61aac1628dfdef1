//! Runtime policies that go beyond the reference: per-plugin request
//! timeouts, what a timeout does to a plugin, required plugins and the
//! replacement of a plugin by a new connection with the same identity.
//!
//! Every option defaults to the reference's behaviour; `docs/beyond-the-reference.md`
//! describes the problem each one solves.

use std::collections::HashMap;
use std::time::Duration;

use nri_api::{FailurePolicy, PodSandbox};
use nri_validator::annotations::{
    effective_annotation, parse_plugin_list, REQUIRED_PLUGINS_ANNOTATION,
};

use crate::adaptation_error::{Error, PluginError};

/// What a request timeout does to the plugin that timed out.
///
/// Only timeouts are concerned, and only our own deadline passing is one: a
/// lost connection or a protocol error always drops the plugin, and an error
/// the plugin's handler returns (a `DeadlineExceeded` status included)
/// always fails the call and keeps the plugin, as in the reference (v0.12.5).
///
/// Validators' ValidateContainerAdjustment calls follow it too: with
/// `DropPlugin` a validator that times out is closed and the creation fails,
/// unless it announced `keep_connected` (then it stays connected and the
/// creation still fails), as in the reference; `FailCall` fails the creation
/// and keeps the validator; `SkipCall` keeps it and ignores its verdict.
///
/// ```
/// use std::time::Duration;
/// use nri_adaptation::{Adaptation, TimeoutPolicy};
/// # use std::sync::Arc;
/// # struct R;
/// # #[nri_adaptation::async_trait]
/// # impl nri_adaptation::RuntimeHooks for R {
/// #     async fn synchronize(&self, _: &mut dyn nri_adaptation::Synchronizer) -> Result<(), nri_adaptation::BoxError> { Ok(()) }
/// # }
/// let nri = Adaptation::builder("runtime", "1.0", Arc::new(R))
///     // A slow resource manager gets more time, and a timeout only fails that call.
///     .plugin_request_timeout("10-resource-manager", Duration::from_secs(10))
///     .plugin_timeout_policy("resource-manager", TimeoutPolicy::FailCall)
///     .build();
/// # drop(nri);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TimeoutPolicy {
    /// The plugin is closed and the call goes on without it (the
    /// reference's behaviour, and the default). A plugin that answered
    /// Configure with a `failure_policy` gets what it asked for: it stays
    /// connected if it set `keep_connected`, and the call fails if it set
    /// `fail_request`.
    #[default]
    DropPlugin,
    /// The plugin stays connected and the call fails, naming the plugin.
    FailCall,
    /// The plugin stays connected and the call goes on without its answer.
    SkipCall,
}

/// The policies of one adaptation, set on its builder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policies {
    /// Request timeouts by plugin name (`<idx>-<name>` or base name).
    pub timeouts: HashMap<String, Duration>,
    /// The timeout policy of plugins not named in `timeout_policies`.
    pub timeout_policy: TimeoutPolicy,
    /// Timeout policies by plugin name (`<idx>-<name>` or base name).
    pub timeout_policies: HashMap<String, TimeoutPolicy>,
    /// Plugins without which no container is created.
    pub required: Vec<String>,
    /// Whether required plugins are checked at all (the runtime's list and
    /// the pod annotation); off by default, as in the reference.
    pub check_required: bool,
    /// A new external connection takes over the plugin with its identity.
    pub replace_same_identity: bool,
    /// The longest request timeout a plugin may ask for in its Configure
    /// reply; `None`: requests are ignored, as in the reference.
    pub max_requested_timeout: Option<Duration>,
    /// Events of plugins that are synchronizing are queued and delivered
    /// afterwards.
    pub deliver_events_during_sync: bool,
    /// A teardown event stops at the first plugin that fails it (the
    /// reference's behaviour); otherwise every plugin gets it.
    pub teardown_stops_at_first_error: bool,
}

/// What to do after a failed call to one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Close the plugin.
    pub drop_plugin: bool,
    /// Fail the call (otherwise it goes on without the plugin).
    pub fail_call: bool,
}

/// The entry of `map` for the plugin: its full name first, then its base name.
fn lookup<'a, T>(map: &'a HashMap<String, T>, full: &str, base: &str) -> Option<&'a T> {
    map.get(full).or_else(|| map.get(base))
}

impl Policies {
    /// The request timeout of the plugin `full` (`<idx>-<name>`) / `base`.
    pub fn request_timeout(&self, full: &str, base: &str, default: Duration) -> Duration {
        lookup(&self.timeouts, full, base)
            .copied()
            .unwrap_or(default)
    }

    /// The timeout policy of the plugin `full` / `base`.
    pub fn timeout_policy(&self, full: &str, base: &str) -> TimeoutPolicy {
        lookup(&self.timeout_policies, full, base)
            .copied()
            .unwrap_or(self.timeout_policy)
    }

    /// The request timeout granted to a plugin that asked for `requested_ms`
    /// in its Configure reply: clamped to the runtime's maximum, `None` when
    /// nothing was asked or requests are not allowed.
    pub fn granted_timeout(&self, requested_ms: i64) -> Option<Duration> {
        let max = self.max_requested_timeout?;
        let ms = u64::try_from(requested_ms).ok().filter(|ms| *ms > 0)?;
        Some(Duration::from_millis(ms).min(max))
    }

    /// Decides what a fatal error (`err.is_fatal()`) of one call does, given
    /// the plugin's timeout policy and the failure policy it announced.
    pub fn on_fatal(
        policy: TimeoutPolicy,
        announced: Option<&FailurePolicy>,
        err: &PluginError,
    ) -> Outcome {
        let timeout = is_timeout(err);
        if let Some(outcome) = Self::on_timeout(policy, timeout) {
            return outcome;
        }
        let keep = announced.is_some_and(|p| p.keep_connected);
        let fail = announced.is_some_and(|p| p.fail_request);
        Outcome {
            drop_plugin: !(timeout && keep),
            fail_call: fail,
        }
    }

    /// What a timeout does under `FailCall` (keep the plugin, fail the call)
    /// and `SkipCall` (keep it, go on without it); `None` for any other
    /// error or policy.
    fn on_timeout(policy: TimeoutPolicy, timeout: bool) -> Option<Outcome> {
        match policy {
            TimeoutPolicy::FailCall if timeout => Some(Outcome {
                drop_plugin: false,
                fail_call: true,
            }),
            TimeoutPolicy::SkipCall if timeout => Some(Outcome {
                drop_plugin: false,
                fail_call: false,
            }),
            _ => None,
        }
    }

    /// Decides what a fatal error of a validator's ValidateContainerAdjustment
    /// call does. As in the reference (v0.12.5), the creation fails whatever
    /// the error, and the validator is closed unless the error is a timeout
    /// and it announced `keep_connected` ([`TimeoutPolicy::DropPlugin`]); its
    /// `fail_request` changes nothing, a failed validation failing the
    /// creation anyway. On a timeout, `FailCall` keeps the validator and
    /// fails the creation, and `SkipCall` keeps it and ignores its verdict.
    pub fn on_validator_fatal(
        policy: TimeoutPolicy,
        announced: Option<&FailurePolicy>,
        err: &PluginError,
    ) -> Outcome {
        let timeout = is_timeout(err);
        Self::on_timeout(policy, timeout).unwrap_or(Outcome {
            drop_plugin: !(timeout && announced.is_some_and(|p| p.keep_connected)),
            fail_call: true,
        })
    }

    /// Whether [`check_required`](Self::check_required) checks anything.
    pub fn checks_required(&self) -> bool {
        self.check_required
    }

    /// Fails if a required plugin (by the runtime's list or the pod's
    /// `required-plugins.noderesource.dev` annotation for `container`) is
    /// not among `connected` (`(index, base name)` pairs).
    pub fn check_required(
        &self,
        pod: Option<&PodSandbox>,
        container: &str,
        connected: &[(String, String)],
    ) -> Result<(), Error> {
        if !self.check_required {
            return Ok(());
        }
        let annotated = match effective_annotation(pod, REQUIRED_PLUGINS_ANNOTATION, container) {
            Some(value) => {
                parse_plugin_list(value).map_err(|source| Error::InvalidRequiredPlugins {
                    value: value.to_owned(),
                    reason: source.message,
                })?
            }
            None => Vec::new(),
        };
        let present = |name: &str| {
            connected.iter().any(|(idx, base)| {
                base == name || nri_api::plugin::qualified_name(idx, base) == name
            })
        };
        match self
            .required
            .iter()
            .chain(annotated.iter())
            .find(|r| !present(r))
        {
            Some(missing) => Err(Error::RequiredPluginMissing(missing.clone())),
            None => Ok(()),
        }
    }
}

/// Whether the error is a request timeout: our own deadline passed (a
/// remote call's or a builtin plugin's). A plugin answering with a
/// `DeadlineExceeded` status is not one: its handler returned an error, which
/// the reference (v0.12.5) treats as any other.
pub(crate) fn is_timeout(err: &PluginError) -> bool {
    matches!(
        err,
        PluginError::Timeout | PluginError::Rpc(nri_ttrpc::Error::Timeout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(fail_request: bool, keep_connected: bool) -> FailurePolicy {
        FailurePolicy {
            fail_request,
            keep_connected,
        }
    }

    #[test]
    fn default_drops_a_timed_out_plugin_and_goes_on() {
        let o = Policies::on_fatal(TimeoutPolicy::default(), None, &PluginError::Timeout);
        assert_eq!(
            o,
            Outcome {
                drop_plugin: true,
                fail_call: false
            }
        );
        let closed = PluginError::Rpc(nri_ttrpc::Error::Closed);
        let o = Policies::on_fatal(TimeoutPolicy::FailCall, None, &closed);
        assert!(o.drop_plugin && !o.fail_call);
    }

    #[test]
    fn fail_and_skip_keep_the_plugin_on_timeouts() {
        let o = Policies::on_fatal(TimeoutPolicy::FailCall, None, &PluginError::Timeout);
        assert!(!o.drop_plugin && o.fail_call);
        let o = Policies::on_fatal(
            TimeoutPolicy::SkipCall,
            None,
            &PluginError::Rpc(nri_ttrpc::Error::Timeout),
        );
        assert!(!o.drop_plugin && !o.fail_call);
    }

    #[test]
    fn announced_failure_policy_follows_the_reference() {
        let t = PluginError::Timeout;
        let o = Policies::on_fatal(TimeoutPolicy::DropPlugin, Some(&fp(false, true)), &t);
        assert!(!o.drop_plugin && !o.fail_call);
        let o = Policies::on_fatal(TimeoutPolicy::DropPlugin, Some(&fp(true, false)), &t);
        assert!(o.drop_plugin && o.fail_call);
        // keep_connected does not survive a lost connection.
        let closed = PluginError::Rpc(nri_ttrpc::Error::Closed);
        let o = Policies::on_fatal(TimeoutPolicy::DropPlugin, Some(&fp(false, true)), &closed);
        assert!(o.drop_plugin);
    }

    #[test]
    fn lookups_prefer_the_full_name() {
        let mut p = Policies::default();
        p.timeouts.insert("foo".into(), Duration::from_secs(3));
        p.timeouts.insert("10-foo".into(), Duration::from_secs(7));
        let d = Duration::from_secs(2);
        assert_eq!(
            p.request_timeout("10-foo", "foo", d),
            Duration::from_secs(7)
        );
        assert_eq!(
            p.request_timeout("20-foo", "foo", d),
            Duration::from_secs(3)
        );
        assert_eq!(p.request_timeout("20-bar", "bar", d), d);
        p.timeout_policies
            .insert("bar".into(), TimeoutPolicy::SkipCall);
        assert_eq!(p.timeout_policy("20-bar", "bar"), TimeoutPolicy::SkipCall);
        assert_eq!(p.timeout_policy("10-foo", "foo"), TimeoutPolicy::DropPlugin);
    }

    #[test]
    fn validator_timeouts_follow_the_policy() {
        let t = PluginError::Timeout;
        let closed = PluginError::Rpc(nri_ttrpc::Error::Closed);
        let o = Policies::on_validator_fatal(TimeoutPolicy::DropPlugin, None, &t);
        assert!(o.drop_plugin && o.fail_call);
        let o = Policies::on_validator_fatal(TimeoutPolicy::FailCall, None, &t);
        assert!(!o.drop_plugin && o.fail_call);
        let o = Policies::on_validator_fatal(TimeoutPolicy::SkipCall, None, &t);
        assert!(!o.drop_plugin && !o.fail_call);
        for policy in [TimeoutPolicy::FailCall, TimeoutPolicy::SkipCall] {
            let o = Policies::on_validator_fatal(policy, None, &closed);
            assert!(o.drop_plugin && o.fail_call);
        }
    }

    #[test]
    fn validator_announced_policy_follows_the_reference() {
        let t = PluginError::Timeout;
        let closed = PluginError::Rpc(nri_ttrpc::Error::Closed);
        let keep = fp(false, true);
        // A timed-out validator with keep_connected stays; the creation fails.
        let o = Policies::on_validator_fatal(TimeoutPolicy::DropPlugin, Some(&keep), &t);
        assert!(!o.drop_plugin && o.fail_call);
        // keep_connected does not survive a lost connection.
        let o = Policies::on_validator_fatal(TimeoutPolicy::DropPlugin, Some(&keep), &closed);
        assert!(o.drop_plugin && o.fail_call);
        // fail_request changes nothing: a failed validation fails anyway.
        let o =
            Policies::on_validator_fatal(TimeoutPolicy::DropPlugin, Some(&fp(false, false)), &t);
        assert!(o.drop_plugin && o.fail_call);
        let o = Policies::on_validator_fatal(TimeoutPolicy::DropPlugin, Some(&fp(true, true)), &t);
        assert!(!o.drop_plugin && o.fail_call);
    }

    #[test]
    fn only_our_own_deadline_is_a_timeout() {
        let answered = PluginError::Rpc(nri_ttrpc::Error::Status(nri_ttrpc::Status::new(
            nri_ttrpc::Code::DeadlineExceeded,
            "context deadline exceeded",
        )));
        assert!(!is_timeout(&answered));
        assert!(!answered.is_fatal());
        assert!(is_timeout(&PluginError::Timeout));
        assert!(is_timeout(&PluginError::Rpc(nri_ttrpc::Error::Timeout)));
        // Even with keep_connected a plugin's own DeadlineExceeded answer is
        // not treated as a timeout by the policies.
        let o = Policies::on_fatal(TimeoutPolicy::SkipCall, None, &answered);
        assert!(o.drop_plugin);
    }

    #[test]
    fn requested_timeouts_are_clamped_or_ignored() {
        let mut p = Policies::default();
        assert_eq!(p.granted_timeout(3000), None);
        p.max_requested_timeout = Some(Duration::from_secs(2));
        assert_eq!(p.granted_timeout(3000), Some(Duration::from_secs(2)));
        assert_eq!(p.granted_timeout(1500), Some(Duration::from_millis(1500)));
        assert_eq!(p.granted_timeout(0), None);
        assert_eq!(p.granted_timeout(-5), None);
    }

    #[test]
    fn required_plugins_unchecked_by_default() {
        let mut pod = PodSandbox::default();
        pod.annotations
            .insert(REQUIRED_PLUGINS_ANNOTATION.into(), "[bar]".into());
        assert!(Policies::default()
            .check_required(Some(&pod), "c", &[])
            .is_ok());
    }

    #[test]
    fn required_plugins_by_name_and_annotation() {
        let p = Policies {
            required: vec!["10-foo".into()],
            check_required: true,
            ..Default::default()
        };
        let connected = vec![("10".to_string(), "foo".to_string())];
        assert!(p.check_required(None, "c", &connected).is_ok());
        let err = p.check_required(None, "c", &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"required NRI plugin "10-foo" is not connected"#
        );

        let mut pod = PodSandbox::default();
        pod.annotations.insert(
            format!("{REQUIRED_PLUGINS_ANNOTATION}/container.c"),
            "[bar]".into(),
        );
        let err = p.check_required(Some(&pod), "c", &connected).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"required NRI plugin "bar" is not connected"#
        );
        // The annotation of another container does not apply.
        assert!(p.check_required(Some(&pod), "d", &connected).is_ok());
        pod.annotations
            .insert(REQUIRED_PLUGINS_ANNOTATION.into(), "{not: a list}".into());
        assert!(matches!(
            p.check_required(Some(&pod), "d", &connected),
            Err(Error::InvalidRequiredPlugins { .. })
        ));
    }
}
