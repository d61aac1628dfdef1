//! Errors of applying adjustments to a spec.

use nri_api::gofmt::quote;

/// Error type returned by the pluggable callbacks (resolvers, checkers,
/// filters, injectors).
pub use nri_api::BoxError;

/// Why an adjustment or update could not be applied.
///
/// The texts are those of the reference generator where it has them, so
/// that runtimes report the same messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdjustError {
    /// The annotation filter rejected the annotations.
    #[error("failed to adjust annotations in OCI Spec: {0}")]
    Annotations(#[source] BoxError),
    /// The CDI device injector failed (its error is passed on as is).
    #[error("{0}")]
    CdiDevices(#[source] BoxError),
    /// A namespace adjustment names an unknown namespace type.
    #[error("unrecognized namespace {}", quote(.0))]
    UnrecognizedNamespace(String),
    /// The resource checker rejected the adjusted resources.
    #[error("failed to adjust resources in OCI Spec: {0}")]
    Resources(#[source] BoxError),
    /// The block I/O class could not be resolved.
    #[error("failed to adjust BlockIO class in OCI Spec: {0}")]
    BlockIoClass(#[source] BoxError),
    /// The RDT class could not be resolved.
    #[error("failed to adjust RDT class in OCI Spec: {0}")]
    RdtClass(#[source] BoxError),
    /// A mount asks for a propagation its host source does not allow.
    #[error("failed to adjust mounts in OCI Spec: {0}")]
    Mounts(#[source] PropagationError),
    /// A part of the spec that must be changed has the wrong JSON type (for
    /// example `process` is not an object, or `process.env` holds a number).
    #[error("invalid OCI Spec: {field} is not {expected}")]
    InvalidSpec {
        /// Dotted path of the offending field, e.g. `linux.resources`.
        field: String,
        /// What was expected there, e.g. `an object`.
        expected: &'static str,
    },
}

impl AdjustError {
    pub(crate) fn invalid(field: impl Into<String>, expected: &'static str) -> Self {
        AdjustError::InvalidSpec {
            field: field.into(),
            expected,
        }
    }
}

/// Why a mount's propagation could not be honoured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PropagationError {
    /// The host mount of the source has the wrong propagation.
    #[error(
        "path {} mount propagation is {}, not {}",
        quote(path),
        quote(actual),
        quote(&accepted.join(" or "))
    )]
    NotAccepted {
        /// The mount source.
        path: String,
        /// Its host propagation (`rshared`, `rslave` or empty).
        actual: String,
        /// The propagations that would have been accepted.
        accepted: Vec<&'static str>,
    },
    /// The host propagation of the source could not be looked up.
    #[error("{0}")]
    Lookup(#[source] BoxError),
}
