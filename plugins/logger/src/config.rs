//! The logger's configuration: flags first, then the YAML text of Configure on top.

use serde::Deserialize;

/// What the logger does. Every field may come from a flag and from the YAML
/// configuration the runtime sends (keys in parentheses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Log to this file instead of standard error (`logFile`).
    pub log_file: String,
    /// Events to subscribe to, as for `EventMask::parse` (`events`); empty: all.
    pub events: Vec<String>,
    /// Add this annotation to new containers (`addAnnotation`).
    pub add_annotation: String,
    /// Set (remove, then add) this annotation on new containers (`setAnnotation`).
    pub set_annotation: String,
    /// Add this environment variable to new containers (`addEnv`).
    pub add_env: String,
    /// Set (remove, then add) this environment variable in new containers (`setEnv`).
    pub set_env: String,
}

/// The YAML form: keys left out keep their current value.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ConfigPatch {
    #[serde(rename = "logFile")]
    log_file: Option<String>,
    events: Option<Vec<String>>,
    #[serde(rename = "addAnnotation")]
    add_annotation: Option<String>,
    #[serde(rename = "setAnnotation")]
    set_annotation: Option<String>,
    #[serde(rename = "addEnv")]
    add_env: Option<String>,
    #[serde(rename = "setEnv")]
    set_env: Option<String>,
}

/// The configuration text is not a logger configuration.
#[derive(Debug, thiserror::Error)]
#[error("failed to parse provided configuration: {0}")]
pub struct ConfigError(#[from] serde_norway::Error);

impl Config {
    /// This configuration with the keys present in the YAML `text` replaced.
    pub fn merged_with_yaml(&self, text: &str) -> Result<Config, ConfigError> {
        let mut cfg = self.clone();
        if text.trim().is_empty() {
            return Ok(cfg);
        }
        let patch: Option<ConfigPatch> = serde_norway::from_str(text)?;
        let Some(p) = patch else { return Ok(cfg) };
        let set = |field: &mut String, value: Option<String>| {
            if let Some(v) = value {
                *field = v;
            }
        };
        set(&mut cfg.log_file, p.log_file);
        set(&mut cfg.add_annotation, p.add_annotation);
        set(&mut cfg.set_annotation, p.set_annotation);
        set(&mut cfg.add_env, p.add_env);
        set(&mut cfg.set_env, p.set_env);
        if let Some(events) = p.events {
            cfg.events = events;
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_replace_only_what_they_name() {
        let flags = Config {
            log_file: "/tmp/a.log".into(),
            add_env: "FROM_FLAG".into(),
            events: vec!["RunPodSandbox".into()],
            ..Default::default()
        };
        let cfg = flags
            .merged_with_yaml(
                "logFile: /tmp/b.log\nevents: [CreateContainer, StopContainer]\n\
                 addAnnotation: a.example.com/x\nsetAnnotation: s\nsetEnv: SET\nunknown: 1\n",
            )
            .unwrap();
        assert_eq!(
            cfg,
            Config {
                log_file: "/tmp/b.log".into(),
                events: vec!["CreateContainer".into(), "StopContainer".into()],
                add_annotation: "a.example.com/x".into(),
                set_annotation: "s".into(),
                add_env: "FROM_FLAG".into(),
                set_env: "SET".into(),
            }
        );
        assert_eq!(flags.merged_with_yaml("").unwrap(), flags);
        assert_eq!(flags.merged_with_yaml("null").unwrap(), flags);
    }

    #[test]
    fn malformed_configuration_is_an_error() {
        for text in ["events: RunPodSandbox", "logFile: [x]", "- a\n- b", "{"] {
            let err = Config::default().merged_with_yaml(text).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("failed to parse provided configuration: "),
                "{text}: {err}"
            );
        }
    }
}
