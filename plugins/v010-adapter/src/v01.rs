//! The NRI v0.1 data types: the configuration list (`/etc/nri/conf.json`), the
//! request a plugin reads on standard input and the result it writes on standard
//! output. JSON field names and omissions are those of the v0.1 Go types.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The default configuration list.
pub const DEFAULT_CONF_PATH: &str = "/etc/nri/conf.json";
/// The default directory of plugin executables.
pub const DEFAULT_BINARY_PATH: &str = "/opt/nri/bin";
/// The version used when there is no configuration list.
pub const VERSION: &str = "0.1";
/// Largest configuration list read, in bytes.
pub const MAX_CONF_SIZE: u64 = 1 << 20;

/// A configured plugin.
#[derive(Debug, Clone, Deserialize)]
pub struct PluginConf {
    /// The plugin's type: the name of its executable.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Its configuration, passed on verbatim in the request's `conf`.
    #[serde(default)]
    pub conf: Option<Box<RawValue>>,
}

/// The configuration list, `{"version": "0.1", "plugins": [...]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ConfigList {
    /// Version, copied into requests.
    #[serde(default)]
    pub version: String,
    /// Plugins, invoked in this order.
    #[serde(default)]
    pub plugins: Vec<PluginConf>,
}

/// Reading the configuration list failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It is too large.
    #[error("{path}: file too large ({size} bytes)")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
    },
    /// It is not a valid configuration list.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: String,
        /// The decoding error.
        source: serde_json::Error,
    },
}

impl ConfigList {
    /// Reads the configuration list; a missing file is an empty list.
    ///
    /// ```
    /// use nri_plugin_v010_adapter::v01::ConfigList;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("conf.json");
    /// assert!(ConfigList::load(&path).unwrap().plugins.is_empty());
    /// std::fs::write(&path, r#"{"version": "0.1", "plugins": [{"type": "clearcfs"}]}"#).unwrap();
    /// assert_eq!(ConfigList::load(&path).unwrap().plugins[0].kind, "clearcfs");
    /// ```
    pub fn load(path: &Path) -> Result<ConfigList, ConfigError> {
        let name = || path.display().to_string();
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ConfigList {
                    version: VERSION.into(),
                    plugins: Vec::new(),
                })
            }
            Err(source) => {
                return Err(ConfigError::Io {
                    path: name(),
                    source,
                })
            }
        };
        if meta.len() > MAX_CONF_SIZE {
            return Err(ConfigError::TooLarge {
                path: name(),
                size: meta.len(),
            });
        }
        let text = std::fs::read(path).map_err(|source| ConfigError::Io {
            path: name(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|source| ConfigError::Json {
            path: name(),
            source,
        })
    }
}

/// The lifecycle step a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// A pod or container is being set up.
    Create,
    /// A pod or container is being torn down.
    Delete,
    /// Resources are updated (not sent by the adapter).
    Update,
    /// Paused (not sent by the adapter).
    Pause,
    /// Resumed (not sent by the adapter).
    Resume,
}

/// The container or pod description in a request.
#[derive(Debug, Clone, Serialize)]
pub struct Spec {
    /// OCI `linux.resources`, or `null`.
    pub resources: Value,
    /// Namespace type to path.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, String>,
    /// The cgroups path.
    #[serde(rename = "cgroupsPath", skip_serializing_if = "String::is_empty")]
    pub cgroups_path: String,
    /// OCI annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What a plugin reads on standard input.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// The plugin's configuration from the configuration list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conf: Option<Box<RawValue>>,
    /// Version of the configuration list.
    pub version: String,
    /// The lifecycle step.
    pub state: State,
    /// Container id (the pod id for pod requests).
    pub id: String,
    /// The pod's id; equal to `id` for pod requests.
    #[serde(rename = "sandboxID", skip_serializing_if = "String::is_empty")]
    pub sandbox_id: String,
    /// Process id, omitted when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub pid: i64,
    /// The container or pod.
    pub spec: Spec,
    /// The pod's labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Results of the plugins invoked before this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<PluginResult>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// What a plugin writes on standard output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginResult {
    /// The plugin's name.
    pub plugin: String,
    /// Version.
    pub version: String,
    /// An error message; non-empty means the plugin failed.
    pub error: String,
    /// What the plugin did.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl PluginResult {
    /// Decodes a result; field names match case-insensitively and unknown fields are
    /// ignored, as the Go client reads them.
    pub fn decode(output: &[u8]) -> Result<PluginResult, serde_json::Error> {
        let value: Value = serde_json::from_slice(output)?;
        let value = match value {
            Value::Object(object) => {
                let fields = ["plugin", "version", "error", "metadata"];
                let mut out = serde_json::Map::new();
                for (key, v) in object.iter().filter(|(k, _)| fields.contains(&k.as_str())) {
                    out.insert(key.clone(), v.clone());
                }
                for (key, v) in object {
                    if let Some(f) = fields.iter().find(|f| f.eq_ignore_ascii_case(&key)) {
                        out.entry(f.to_string()).or_insert(v);
                    }
                }
                out.retain(|_, v| !v.is_null());
                Value::Object(out)
            }
            other => other,
        };
        serde_json::from_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_json_matches_the_v01_form() {
        let req = Request {
            conf: Some(RawValue::from_string(r#"{"a": 1}"#.into()).unwrap()),
            version: "0.1".into(),
            state: State::Create,
            id: "redis".into(),
            sandbox_id: "pod".into(),
            pid: 1234,
            spec: Spec {
                resources: Value::Null,
                namespaces: BTreeMap::from([("pid".into(), "/proc/44/ns/pid".into())]),
                cgroups_path: "default/redis".into(),
                annotations: BTreeMap::new(),
            },
            labels: BTreeMap::new(),
            results: Vec::new(),
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"conf":{"a": 1},"version":"0.1","state":"create","id":"redis","sandboxID":"pod","pid":1234,"spec":{"resources":null,"namespaces":{"pid":"/proc/44/ns/pid"},"cgroupsPath":"default/redis"}}"#
        );
        let bare = Request {
            conf: None,
            pid: 0,
            sandbox_id: String::new(),
            ..req
        };
        let v: Value = serde_json::to_value(&bare).unwrap();
        assert_eq!(v.get("conf"), None);
        assert_eq!(v.get("pid"), None);
        assert_eq!(v.get("sandboxID"), None);
    }

    #[test]
    fn results_decode_leniently() {
        let r =
            PluginResult::decode(br#"{"Plugin": "x", "error": "", "metadata": null, "extra": 1}"#)
                .unwrap();
        assert_eq!(
            r,
            PluginResult {
                plugin: "x".into(),
                ..Default::default()
            }
        );
        assert!(PluginResult::decode(b"").is_err());
        assert!(PluginResult::decode(br#"{"metadata": {"a": 1}}"#).is_err());
        let r: PluginResult = serde_json::from_value(json!({"error": "boom"})).unwrap();
        assert_eq!(r.error, "boom");
    }

    #[test]
    fn bad_config_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conf.json");
        std::fs::write(&path, "{").unwrap();
        assert!(ConfigList::load(&path)
            .unwrap_err()
            .to_string()
            .contains("conf.json"));
    }
}
