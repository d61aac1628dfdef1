//! What the lifecycle calls of [`Nri`](crate::Nri) return.

use nri_api::{ContainerAdjustment, ContainerEviction, ContainerUpdate, LinuxResources};

/// Updates and evictions of *other* containers that plugins asked for in
/// their reply to a lifecycle call, and that could not be applied.
///
/// They were routed to the [`Domain`](crate::Domain) that has the
/// container; those listed here failed there (or no domain has the
/// container). Updates marked `ignore_failure` are never listed. Each
/// failure is also logged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailedUpdates {
    /// Updates that failed.
    pub updates: Vec<ContainerUpdate>,
    /// Evictions that failed.
    pub evictions: Vec<ContainerEviction>,
}

impl FailedUpdates {
    /// True if everything was applied.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.evictions.is_empty()
    }
}

/// The result of [`Nri::create_container`](crate::Nri::create_container).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Adjustment {
    /// The merged changes plugins ask for, as the adaptation returns them
    /// (possibly with empty parts when no plugin changed anything); `None`
    /// when NRI is disabled or not running.
    pub adjust: Option<ContainerAdjustment>,
    /// Side effects on other containers that could not be applied.
    pub failed: FailedUpdates,
}

/// The result of [`Nri::update_container`](crate::Nri::update_container).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceUpdate {
    /// The resources to apply: the plugins' merged result if a plugin
    /// changed them, else the requested resources unchanged.
    pub resources: Option<LinuxResources>,
    /// Whether a plugin changed the requested resources.
    pub adjusted: bool,
    /// Side effects on other containers that could not be applied.
    pub failed: FailedUpdates,
}
