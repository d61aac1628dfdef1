//! Working out the plugin's name and index.
//!
//! Sources, strongest first:
//! 1. `NRI_PLUGIN_NAME` and `NRI_PLUGIN_IDX`, set by a runtime that launched the
//!    plugin: the runtime knows the plugin by that name whatever the plugin
//!    registers, so the plugin must not believe another one;
//! 2. the builder's [`name`](crate::StubBuilder::name) and
//!    [`index`](crate::StubBuilder::index);
//! 3. the program name (basename of `argv[0]`): `NN-name`, or just the name when the
//!    index is known.
//!
//! Differences from the Go stub, on purpose: an index given to the builder gives way
//! to `NRI_PLUGIN_IDX` (Go's `WithPluginIdx` fails when the variable is set, and
//! Go's `WithPluginName` wins over `NRI_PLUGIN_NAME`), and a name given to the
//! builder is kept when the index has to be taken from the program name (Go
//! replaces it with the parsed one).

use crate::Error;

/// The plugin's identity: a two-digit index and a base name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) index: String,
    pub(crate) name: String,
}

impl Identity {
    /// `<index>-<name>`, the way NRI names plugins.
    pub(crate) fn full_name(&self) -> String {
        format!("{}-{}", self.index, self.name)
    }
}

/// What is known about the identity before resolution.
#[derive(Debug, Default, Clone)]
pub(crate) struct IdentitySources {
    pub(crate) name: Option<String>,
    pub(crate) index: Option<String>,
    pub(crate) env_name: Option<String>,
    pub(crate) env_index: Option<String>,
    /// `argv[0]`, if any.
    pub(crate) program: Option<String>,
}

impl IdentitySources {
    /// Reads the environment and `argv[0]` of this process.
    pub(crate) fn from_process(name: Option<String>, index: Option<String>) -> Self {
        IdentitySources {
            name,
            index,
            env_name: non_empty(std::env::var(nri_api::plugin::PLUGIN_NAME_ENV).ok()),
            env_index: non_empty(std::env::var(nri_api::plugin::PLUGIN_IDX_ENV).ok()),
            program: std::env::args_os()
                .next()
                .map(|p| p.to_string_lossy().into_owned()),
        }
    }

    /// Applies the precedence rules and validates the result.
    pub(crate) fn resolve(self) -> Result<Identity, Error> {
        let name = overridden("name", self.env_name, non_empty(self.name));
        let index = overridden("index", self.env_index, non_empty(self.index));
        let program = self.program.as_deref().map(basename).unwrap_or_default();

        let identity = match (index, name) {
            (Some(index), Some(name)) => Identity { index, name },
            (Some(index), None) => Identity {
                index,
                name: program.to_string(),
            },
            (None, name) => {
                let (index, parsed) =
                    nri_api::plugin::parse_plugin_name(program).map_err(Error::Identity)?;
                Identity {
                    index: index.to_string(),
                    name: name.unwrap_or_else(|| parsed.to_string()),
                }
            }
        };
        nri_api::plugin::check_plugin_index(&identity.index).map_err(Error::Identity)?;
        nri_api::plugin::check_plugin_name(&identity.name).map_err(Error::Identity)?;
        Ok(identity)
    }
}

/// The runtime's value if it gave one, else the builder's; a warning when the
/// two differ.
fn overridden(what: &str, runtime: Option<String>, builder: Option<String>) -> Option<String> {
    match (runtime, builder) {
        (Some(runtime), Some(builder)) if runtime != builder => {
            tracing::warn!(
                "the runtime that launched the plugin gave it the {what} {runtime:?}; \
                 using it instead of {builder:?} set in the plugin"
            );
            Some(runtime)
        }
        (runtime, builder) => runtime.or(builder),
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> IdentitySources {
        IdentitySources {
            program: Some("/usr/bin/plugin-binary".into()),
            ..IdentitySources::default()
        }
    }

    fn resolve(s: IdentitySources) -> Result<(String, String), String> {
        s.resolve()
            .map(|id| (id.index, id.name))
            .map_err(|e| match e {
                Error::Identity(e) => e.to_string(),
                other => format!("not an identity error: {other}"),
            })
    }

    #[test]
    fn the_launching_runtime_wins_over_the_builder() {
        let s = IdentitySources {
            name: Some("mine".into()),
            index: Some("10".into()),
            env_name: Some("env".into()),
            env_index: Some("90".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("90".into(), "env".into())));
        // Each one on its own.
        let s = IdentitySources {
            name: Some("x".into()),
            index: Some("10".into()),
            env_index: Some("20".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("20".into(), "x".into())));
        let s = IdentitySources {
            name: Some("mine".into()),
            index: Some("10".into()),
            env_name: Some("theirs".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("10".into(), "theirs".into())));
    }

    #[test]
    fn the_builder_is_used_without_the_environment() {
        let s = IdentitySources {
            name: Some("mine".into()),
            index: Some("10".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("10".into(), "mine".into())));
    }

    #[test]
    fn environment_is_used_when_builder_is_silent() {
        let s = IdentitySources {
            env_name: Some("env".into()),
            env_index: Some("90".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("90".into(), "env".into())));
    }

    #[test]
    fn index_only_takes_name_from_program() {
        let s = IdentitySources {
            index: Some("05".into()),
            ..sources()
        };
        assert_eq!(resolve(s), Ok(("05".into(), "plugin-binary".into())));
    }

    #[test]
    fn program_name_gives_both() {
        let s = IdentitySources {
            program: Some("/opt/nri/plugins/20-logger".into()),
            ..IdentitySources::default()
        };
        assert_eq!(resolve(s), Ok(("20".into(), "logger".into())));
    }

    #[test]
    fn name_option_is_kept_when_index_comes_from_program() {
        let s = IdentitySources {
            name: Some("explicit".into()),
            program: Some("20-logger".into()),
            ..IdentitySources::default()
        };
        assert_eq!(resolve(s), Ok(("20".into(), "explicit".into())));
    }

    #[test]
    fn unparseable_program_name_is_an_error() {
        assert_eq!(
            resolve(sources()).unwrap_err(),
            "invalid plugin index \"plugin\", must be 2 digits"
        );
        let s = IdentitySources {
            program: Some("/bin/annotator".into()),
            ..IdentitySources::default()
        };
        assert_eq!(
            resolve(s).unwrap_err(),
            "invalid plugin name \"annotator\", idx-pluginname expected"
        );
    }

    #[test]
    fn bad_index_is_refused() {
        let s = IdentitySources {
            name: Some("x".into()),
            index: Some("1".into()),
            ..sources()
        };
        assert_eq!(
            resolve(s).unwrap_err(),
            "invalid plugin index \"1\", must be 2 digits"
        );
    }

    #[test]
    fn bad_name_is_refused() {
        let s = IdentitySources {
            name: Some("foo,bar".into()),
            index: Some("10".into()),
            ..sources()
        };
        let err = resolve(s).unwrap_err();
        assert!(err.contains("foo,bar"), "{err}");
    }
}
