//! An NRI plugin that sets the Intel RDT configuration of containers (class of
//! service, schemata, monitoring) from pod annotations. A Rust version of the rdt
//! sample plugin of `containerd/nri`, with the same annotation keys.
//!
//! | annotation key | value |
//! |---|---|
//! | `closid.rdt.noderesource.dev/container.<name>` | `intelRdt.closID` |
//! | `schemata.rdt.noderesource.dev/container.<name>` | `intelRdt.schemata`, lines separated by `,` |
//! | `enablemonitoring.rdt.noderesource.dev/container.<name>` | `intelRdt.enableMonitoring` (`true`, `false`, `1`, `0`, ...) |
//!
//! ```
//! use std::collections::BTreeMap;
//! use nri_plugin_rdt::adjust_rdt;
//!
//! let mut pod = BTreeMap::new();
//! pod.insert("closid.rdt.noderesource.dev/container.db".to_string(), "gold".to_string());
//! pod.insert("schemata.rdt.noderesource.dev/container.db".to_string(), "L3:0=ff,MB:0=50".to_string());
//! let adjust = adjust_rdt(&pod, "db").unwrap();
//! let rdt = adjust.linux.unwrap().rdt.unwrap();
//! assert_eq!(rdt.clos_id.unwrap().value, "gold");
//! assert_eq!(rdt.schemata.unwrap().value, ["L3:0=ff", "MB:0=50"]);
//! ```
#![warn(missing_docs)]

pub mod cli;
mod plugin;

use std::collections::BTreeMap;

use nri_stub::api::gofmt::quote;
use nri_stub::api::ContainerAdjustment;

pub use plugin::Rdt;

/// The key suffix of the RDT annotations, followed by the container name.
pub const ANNOTATION_SUFFIX: &str = ".rdt.noderesource.dev/container.";

/// A malformed RDT annotation; the container is then not created (as with the Go
/// plugin).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdtError {
    /// `enablemonitoring` is not a boolean.
    #[error("invalid boolean value {} in annotation {key}", quote(value))]
    NotABool {
        /// The annotation key.
        key: String,
        /// Its value.
        value: String,
    },
}

/// The adjustment the RDT annotations of a pod ask for its container `container`.
/// Unknown fields (`<field>.rdt.noderesource.dev/container.<name>`) are logged and
/// ignored.
pub fn adjust_rdt(
    annotations: &BTreeMap<String, String>,
    container: &str,
) -> Result<ContainerAdjustment, RdtError> {
    let suffix = format!("{ANNOTATION_SUFFIX}{container}");
    let mut adjust = ContainerAdjustment::default();
    for (key, value) in annotations {
        let Some(field) = key.strip_suffix(&suffix) else {
            continue;
        };
        match field {
            "closid" => {
                tracing::info!(closid = %value, "adjust closid");
                adjust.set_linux_rdt_clos_id(value.clone());
            }
            "schemata" => {
                let lines: Vec<&str> = value.split(',').collect();
                tracing::info!(schemata = ?lines, "adjust schemata");
                adjust.set_linux_rdt_schemata(&lines);
            }
            "enablemonitoring" => {
                let enable =
                    nri_plugin_util::parse_go_bool(value).map_err(|_| RdtError::NotABool {
                        key: key.clone(),
                        value: value.clone(),
                    })?;
                tracing::info!(enablemonitoring = enable, "adjust enablemonitoring");
                adjust.set_linux_rdt_enable_monitoring(enable);
            }
            other => tracing::info!(field_name = %other, "unknown rdt field"),
        }
    }
    Ok(adjust)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_interop::plugin_tests::annotations;

    #[test]
    fn only_the_named_container_is_adjusted() {
        let a = annotations(&[
            ("closid.rdt.noderesource.dev/container.c1", "x"),
            ("closid.rdt.noderesource.dev/container.xc0", "y"),
        ]);
        assert_eq!(
            adjust_rdt(&a, "c0").unwrap(),
            ContainerAdjustment::default()
        );
        let rdt = adjust_rdt(&a, "c1").unwrap().linux.unwrap().rdt.unwrap();
        assert_eq!(rdt.clos_id.unwrap().value, "x");
    }

    #[test]
    fn monitoring_takes_go_booleans() {
        for (text, expected) in [("true", true), ("1", true), ("F", false), ("False", false)] {
            let a = annotations(&[("enablemonitoring.rdt.noderesource.dev/container.c", text)]);
            let rdt = adjust_rdt(&a, "c").unwrap().linux.unwrap().rdt.unwrap();
            assert_eq!(rdt.enable_monitoring.unwrap().value, expected, "{text}");
        }
        let a = annotations(&[("enablemonitoring.rdt.noderesource.dev/container.c", "yes")]);
        assert_eq!(
            adjust_rdt(&a, "c").unwrap_err().to_string(),
            "invalid boolean value \"yes\" in annotation enablemonitoring.rdt.noderesource.dev/container.c"
        );
    }

    #[test]
    fn schemata_split_on_commas_and_unknown_fields_ignored() {
        let a = annotations(&[
            ("schemata.rdt.noderesource.dev/container.c", "L3:0=f"),
            ("bogus.rdt.noderesource.dev/container.c", "1"),
        ]);
        let adjust = adjust_rdt(&a, "c").unwrap();
        let rdt = adjust.linux.unwrap().rdt.unwrap();
        assert_eq!(rdt.schemata.unwrap().value, ["L3:0=f"]);
        assert!(rdt.clos_id.is_none());
        let a = annotations(&[("schemata.rdt.noderesource.dev/container.c", "")]);
        let rdt = adjust_rdt(&a, "c").unwrap().linux.unwrap().rdt.unwrap();
        assert_eq!(rdt.schemata.unwrap().value, [""]);
    }
}
