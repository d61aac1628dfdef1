//! The plugins of a scenario: in-process plugins the scenario declares
//! ([`scripted`]) and programs launched as pre-installed plugins
//! ([`launch`]).

pub mod launch;
pub mod scripted;

/// The index used when a plugin declares none.
pub const DEFAULT_INDEX: &str = "50";
