//! Every error type of the adaptation: the crate's [`Error`] (entry points),
//! [`PluginError`] (one plugin call), [`RegistrationError`], [`DiscoverError`],
//! and those of the merge engine, [`ConflictError`] and [`MergeError`].
//!
//! The texts match the reference implementation exactly, since runtimes and
//! tests compare them.

pub use crate::adaptation_error::{BoxError, DiscoverError, Error, PluginError, RegistrationError};

use nri_api::gofmt::quote;
use nri_api::Field;

/// Two plugins (or one plugin twice) tried to set the same field, or the
/// same key of a compound field, of one container.
///
/// Displays as `plugins "<plugin>" and "<other>" both tried to set <Field> <key>`,
/// where `<Field>` is the protobuf name of the [`Field`] (`MemLimit`,
/// `Annotations`, ...). Simple fields have no key, so their text ends with a
/// single trailing space, as in the reference.
///
/// ```
/// use nri_adaptation::ConflictError;
/// use nri_api::Field;
///
/// let err = ConflictError {
///     plugin: "10-foo".into(),
///     other: "00-bar".into(),
///     field: Field::MemLimit,
///     key: None,
/// };
/// assert_eq!(err.to_string(), r#"plugins "10-foo" and "00-bar" both tried to set MemLimit "#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConflictError {
    /// The plugin whose claim failed.
    pub plugin: String,
    /// The plugin that owns (or last cleared) the field.
    pub other: String,
    /// The contested field.
    pub field: Field,
    /// The contested key of a compound field; `None` for simple fields.
    pub key: Option<String>,
}

impl std::fmt::Display for ConflictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "plugins {} and {} both tried to set {} {}",
            quote(&self.plugin),
            quote(&self.other),
            self.field.as_str_name(),
            self.key.as_deref().unwrap_or_default()
        )
    }
}

/// Why the result of a plugin could not be merged.
///
/// Any of these fails the whole runtime call (CreateContainer,
/// UpdateContainer or StopContainer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// A field or key is already owned by another plugin (or by the same
    /// plugin, which cannot set a field twice either).
    #[error(transparent)]
    Conflict(#[from] ConflictError),
    /// During CreateContainer a plugin asked to update the container being
    /// created; such changes belong in the adjustment.
    #[error(
        "plugin {} asked update of {} during creation",
        quote(plugin),
        quote(container_id)
    )]
    UpdateDuringCreation {
        /// The offending plugin.
        plugin: String,
        /// Id of the container being created.
        container_id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_field_conflict_ends_with_space() {
        let err = ConflictError {
            plugin: "10-foo".into(),
            other: "00-bar".into(),
            field: Field::CpuSetCpUs,
            key: None,
        };
        assert_eq!(
            err.to_string(),
            "plugins \"10-foo\" and \"00-bar\" both tried to set CPUSetCPUs "
        );
    }

    #[test]
    fn compound_field_conflict_names_key() {
        let err = ConflictError {
            plugin: "10-foo".into(),
            other: "00-bar".into(),
            field: Field::Annotations,
            key: Some("key".into()),
        };
        assert_eq!(
            err.to_string(),
            "plugins \"10-foo\" and \"00-bar\" both tried to set Annotations key"
        );
    }

    #[test]
    fn names_are_go_quoted() {
        let err = ConflictError {
            plugin: "a\"b".into(),
            other: "c\nd".into(),
            field: Field::Env,
            key: Some("X".into()),
        };
        assert_eq!(
            err.to_string(),
            r#"plugins "a\"b" and "c\nd" both tried to set Env X"#
        );
    }

    #[test]
    fn update_during_creation_text() {
        let err = MergeError::UpdateDuringCreation {
            plugin: "00-test".into(),
            container_id: "ctr0".into(),
        };
        assert_eq!(
            err.to_string(),
            r#"plugin "00-test" asked update of "ctr0" during creation"#
        );
    }

    #[test]
    fn conflict_is_transparent_in_merge_error() {
        let c = ConflictError {
            plugin: "p".into(),
            other: "q".into(),
            field: Field::OomScoreAdj,
            key: None,
        };
        assert_eq!(MergeError::from(c.clone()).to_string(), c.to_string());
    }
}
