//! The plugins that took part in creating a container.

use std::collections::BTreeMap;

use nri_api::{PluginInstance, ValidateContainerAdjustmentRequest};

/// Indexes the plugins of a validation request by both of their names.
///
/// Every plugin appears twice: under its base name (the value then has only
/// the name, no index) and under its qualified name `<index>-<name>` (the
/// full instance). Later plugins replace earlier ones under the same key.
///
/// ```
/// use nri_api::{PluginInstance, ValidateContainerAdjustmentRequest};
/// use nri_validator::plugin_map;
///
/// let req = ValidateContainerAdjustmentRequest {
///     plugins: vec![PluginInstance { name: "resources".into(), index: "10".into() }],
///     ..Default::default()
/// };
/// let map = plugin_map(&req);
/// assert_eq!(map.keys().collect::<Vec<_>>(), ["10-resources", "resources"]);
/// assert_eq!(map["resources"].index, "");
/// assert_eq!(map["10-resources"].index, "10");
/// ```
pub fn plugin_map(req: &ValidateContainerAdjustmentRequest) -> BTreeMap<String, PluginInstance> {
    let mut map = BTreeMap::new();
    for p in &req.plugins {
        map.insert(
            p.name.clone(),
            PluginInstance {
                name: p.name.clone(),
                index: String::new(),
            },
        );
        map.insert(format!("{}-{}", p.index, p.name), p.clone());
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(index: &str, name: &str) -> PluginInstance {
        PluginInstance {
            name: name.into(),
            index: index.into(),
        }
    }

    #[test]
    fn every_plugin_is_found_by_both_names() {
        let req = ValidateContainerAdjustmentRequest {
            plugins: vec![instance("00", "default-validator"), instance("10", "a")],
            ..Default::default()
        };
        let map = plugin_map(&req);
        assert_eq!(map.len(), 4);
        assert_eq!(map["default-validator"], instance("", "default-validator"));
        assert_eq!(
            map["00-default-validator"],
            instance("00", "default-validator")
        );
        assert_eq!(map["a"], instance("", "a"));
        assert_eq!(map["10-a"], instance("10", "a"));
        assert!(!map.contains_key("00"));
    }

    #[test]
    fn no_plugins_no_entries() {
        assert!(plugin_map(&ValidateContainerAdjustmentRequest::default()).is_empty());
    }

    #[test]
    fn same_name_at_two_indices() {
        let req = ValidateContainerAdjustmentRequest {
            plugins: vec![instance("10", "a"), instance("20", "a")],
            ..Default::default()
        };
        let map = plugin_map(&req);
        assert_eq!(map.len(), 3);
        assert!(map.contains_key("10-a") && map.contains_key("20-a") && map.contains_key("a"));
    }
}
