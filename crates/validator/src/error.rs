//! Why the default validator refused a request.

use std::fmt;

use nri_api::gofmt::quote;

use crate::annotations::{PluginListError, REQUIRED_PLUGINS_ANNOTATION};
use nri_api::goparse::ParseBoolError;

/// The kind of seccomp profile a container had before plugins adjusted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeccompProfileKind {
    /// `UNCONFINED`, or no seccomp profile at all.
    Unconfined,
    /// `RUNTIME_DEFAULT`.
    RuntimeDefault,
    /// `LOCALHOST`: a custom profile.
    Custom,
}

/// Why the default validator refused a container adjustment.
///
/// The texts are those of the reference implementation, word for word
/// (including the double space of the unconfined and custom seccomp
/// messages). Every rejection of a rule starts with `validation error: `
/// ([`is_rejection`](Self::is_rejection) is true); the two annotation errors
/// do not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// OCI hooks were injected while that is forbidden. `owners` is the
    /// comma-separated list of the plugins that injected them.
    #[error("validation error: {} attempted restricted OCI hook injection", PluginOrPlugins(.owners))]
    OciHookInjection {
        /// Every plugin that injected hooks, comma-separated.
        owners: String,
    },
    /// The seccomp policy was changed while that is forbidden for the
    /// container's profile kind.
    #[error("validation error: plugin {owner} attempted restricted {} seccomp policy adjustment", seccomp_words(*.profile))]
    SeccompPolicyAdjustment {
        /// The plugin that set the policy (not quoted in the message).
        owner: String,
        /// The profile kind of the container before adjustment.
        profile: SeccompProfileKind,
    },
    /// Linux namespaces were changed while that is forbidden.
    #[error("validation error: attempted restricted namespace adjustment by plugin(s) {}", NamespaceOffenders(.offenders))]
    NamespaceAdjustment {
        /// `(namespace type, plugin)` pairs, sorted by namespace type.
        offenders: Vec<(String, String)>,
    },
    /// Required plugins did not take part in creating the container.
    #[error("validation error: {} not present", MissingPlugins(.missing))]
    MissingRequiredPlugins {
        /// The missing plugins, in the order they were required (configured
        /// ones first, then the annotated ones); never empty.
        missing: Vec<String>,
    },
    /// Sysctls were changed while that is forbidden.
    #[error("validation error: attempted restricted sysctl adjustment by plugin(s) {}", .owners.join(", "))]
    SysctlAdjustment {
        /// The plugin of every adjusted sysctl, in sysctl key order.
        owners: Vec<String>,
    },
    /// The tolerate-missing-plugins annotation is not a boolean.
    #[error("invalid {key} annotation {}: {source}", quote(.value))]
    InvalidTolerateAnnotation {
        /// The configured annotation key.
        key: String,
        /// The annotation's value.
        value: String,
        /// The boolean parse error.
        source: ParseBoolError,
    },
    /// The required-plugins annotation is not a list of plugin names.
    #[error("invalid {REQUIRED_PLUGINS_ANNOTATION} annotation {}: {source}", quote(.value))]
    InvalidRequiredPluginsAnnotation {
        /// The annotation's value.
        value: String,
        /// The parse error (our own wording).
        source: PluginListError,
    },
}

impl ValidationError {
    /// True for a rejection by one of the rules (the reference's
    /// `ErrValidation`), false for an unreadable annotation.
    pub fn is_rejection(&self) -> bool {
        !matches!(
            self,
            Self::InvalidTolerateAnnotation { .. } | Self::InvalidRequiredPluginsAnnotation { .. }
        )
    }
}

/// The reference writes `"restricted " + " unconfined ..."`: two spaces.
fn seccomp_words(profile: SeccompProfileKind) -> &'static str {
    match profile {
        SeccompProfileKind::Unconfined => " unconfined",
        SeccompProfileKind::RuntimeDefault => "runtime default",
        SeccompProfileKind::Custom => " custom",
    }
}

/// `plugin "a"` for one owner, `plugins "a,b"` when the list has a comma.
struct PluginOrPlugins<'a>(&'a str);

impl fmt::Display for PluginOrPlugins<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.0.contains(',') {
            "plugins"
        } else {
            "plugin"
        };
        write!(f, "{noun} {}", quote(self.0))
    }
}

/// `"p1" (namespace "network"), "p2" (namespace "pid")`.
struct NamespaceOffenders<'a>(&'a [(String, String)]);

impl fmt::Display for NamespaceOffenders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        for (ns, plugin) in self.0 {
            write!(f, "{sep}{} (namespace {})", quote(plugin), quote(ns))?;
            sep = ", ";
        }
        Ok(())
    }
}

/// `required plugin "a"` or `required plugins "a,b"`.
struct MissingPlugins<'a>(&'a [String]);

impl fmt::Display for MissingPlugins<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "required plugin {}", quote(one)),
            many => write!(f, "required plugins {}", quote(&many.join(","))),
        }
    }
}
