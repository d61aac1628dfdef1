//! Hook configuration files (`hooks.d/*.json`), schema 1.0.0 and the older 0.1.0,
//! as podman and CRI-O read them.

use std::collections::BTreeMap;
use std::path::Path;

use nri_stub::api::gofmt::quote;
use nri_stub::api::Hook;
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The current schema version.
pub const VERSION: &str = "1.0.0";
/// The older schema version (also assumed when `version` is missing).
pub const OLD_VERSION: &str = "0.1.0";

/// Largest hook file read, in bytes.
pub const MAX_FILE_SIZE: u64 = 1 << 20;

/// Why a hook file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum InvalidHook {
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file is larger than [`MAX_FILE_SIZE`].
    #[error("file too large ({0} bytes)")]
    TooLarge(u64),
    /// Not JSON, or a field of the wrong type.
    #[error("{0}")]
    Json(String),
    /// A version this reader does not know.
    #[error("unrecognized hook version: {}", quote(.0))]
    UnknownVersion(String),
    /// A required property is missing.
    #[error("missing required property: {0}")]
    Missing(&'static str),
    /// Two synonyms of a 0.1.0 property are both set.
    #[error("cannot set both '{0}' and '{1}'")]
    BothSet(&'static str, &'static str),
    /// The hook executable does not exist.
    #[error("hook path {}: {source}", quote(path))]
    NoExecutable {
        /// `hook.path`.
        path: String,
        /// Why it is not there.
        source: std::io::Error,
    },
    /// A regular expression does not compile.
    #[error("invalid {what} {}: {reason}", quote(pattern))]
    Regex {
        /// `annotation key`, `annotation value` or `command`.
        what: &'static str,
        /// The expression.
        pattern: String,
        /// The compiler's message.
        reason: String,
    },
    /// A stage that is not an OCI hook stage.
    #[error("unknown stage {}", quote(.0))]
    UnknownStage(String),
}

/// The OCI hook stages a hook can be injected into. `prestart` is injected as
/// `createRuntime`, as podman and CRI-O do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `prestart` or `createRuntime`.
    CreateRuntime,
    /// `createContainer`.
    CreateContainer,
    /// `startContainer`.
    StartContainer,
    /// `poststart`.
    Poststart,
    /// `poststop`.
    Poststop,
}

impl Stage {
    /// The stage of a stage name.
    pub fn from_name(name: &str) -> Option<Stage> {
        Some(match name {
            "prestart" | "createRuntime" => Stage::CreateRuntime,
            "createContainer" => Stage::CreateContainer,
            "startContainer" => Stage::StartContainer,
            "poststart" => Stage::Poststart,
            "poststop" => Stage::Poststop,
            _ => return None,
        })
    }
}

/// When a hook is injected: every condition set must hold (schema 1.0.0), or any of
/// them (`any`, schema 0.1.0). When `commands` is set, it alone decides once the
/// other conditions passed.
#[derive(Debug, Clone, Default)]
pub struct When {
    /// `always`.
    pub always: Option<bool>,
    /// `annotations`: key pattern, value pattern.
    pub annotations: Vec<(Regex, Regex)>,
    /// `commands`: patterns for `process.args[0]`.
    pub commands: Vec<Regex>,
    /// `hasBindMounts`.
    pub has_bind_mounts: Option<bool>,
    /// Any condition suffices (schema 0.1.0).
    pub any: bool,
}

/// A validated hook configuration.
#[derive(Debug, Clone)]
pub struct HookConfig {
    /// The hook to inject.
    pub hook: Hook,
    /// When to inject it.
    pub when: When,
    /// Where to inject it.
    pub stages: Vec<Stage>,
}

/// Reads and validates the hook file at `path`.
pub fn read(path: &Path) -> Result<HookConfig, InvalidHook> {
    let size = std::fs::metadata(path)?.len();
    if size > MAX_FILE_SIZE {
        return Err(InvalidHook::TooLarge(size));
    }
    parse(&std::fs::read(path)?)
}

/// Parses and validates the content of a hook file.
///
/// ```
/// use nri_plugin_hook_injector::hook_file::{parse, Stage};
///
/// let hook = parse(br#"{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["sh", "-c", "true"]},
///                       "when": {"always": true}, "stages": ["prestart"]}"#).unwrap();
/// assert_eq!(hook.hook.args, ["sh", "-c", "true"]);
/// assert_eq!(hook.stages, [Stage::CreateRuntime]);
/// ```
pub fn parse(content: &[u8]) -> Result<HookConfig, InvalidHook> {
    let value: Value = serde_json::from_slice(content).map_err(json_error)?;
    let Value::Object(object) = value else {
        return Err(InvalidHook::Json("a hook file holds a JSON object".into()));
    };
    let version = match canonical(&object, &["version"]).get("version") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(v)) => v.clone(),
        Some(other) => {
            return Err(InvalidHook::Json(format!(
                "version check: invalid version {other}"
            )))
        }
    };
    match version.as_str() {
        VERSION => parse_current(object),
        OLD_VERSION | "" => parse_old(object),
        _ => Err(InvalidHook::UnknownVersion(version)),
    }
}

fn json_error(e: serde_json::Error) -> InvalidHook {
    InvalidHook::Json(e.to_string())
}

/// Renames the keys of `object` that match `fields` case-insensitively (an exact
/// match wins) to the field names, dropping the other keys: Go's `encoding/json`
/// rules for struct fields.
fn canonical(object: &Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in object {
        if fields.contains(&key.as_str()) {
            out.insert(key.clone(), value.clone());
        }
    }
    for (key, value) in object {
        if let Some(field) = fields.iter().find(|f| f.eq_ignore_ascii_case(key)) {
            out.entry(field.to_string())
                .or_insert_with(|| value.clone());
        }
    }
    out
}

fn decode<T: for<'de> Deserialize<'de>>(value: Value) -> Result<T, InvalidHook> {
    serde_json::from_value(value).map_err(json_error)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawOciHook {
    path: String,
    args: Option<Vec<String>>,
    env: Option<Vec<String>>,
    timeout: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawWhen {
    always: Option<bool>,
    annotations: Option<BTreeMap<String, String>>,
    commands: Option<Vec<String>>,
    has_bind_mounts: Option<bool>,
}

fn parse_current(object: Map<String, Value>) -> Result<HookConfig, InvalidHook> {
    let top = canonical(&object, &["hook", "when", "stages"]);
    let hook = match top.get("hook") {
        Some(Value::Object(h)) => {
            let h = canonical(h, &["path", "args", "env", "timeout"]);
            decode::<RawOciHook>(Value::Object(h))?
        }
        Some(Value::Null) | None => RawOciHook::default(),
        Some(other) => return Err(InvalidHook::Json(format!("invalid hook {other}"))),
    };
    let when = match top.get("when") {
        Some(Value::Object(w)) => {
            let w = canonical(w, &["always", "annotations", "commands", "hasBindMounts"]);
            decode::<RawWhen>(Value::Object(w))?
        }
        Some(Value::Null) | None => RawWhen::default(),
        Some(other) => return Err(InvalidHook::Json(format!("invalid when {other}"))),
    };
    let stages = match top.get("stages") {
        Some(v) => decode::<Option<Vec<String>>>(v.clone())?,
        None => None,
    };
    if hook.path.is_empty() {
        return Err(InvalidHook::Missing("hook.path"));
    }
    let annotations = when
        .annotations
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            Ok((
                compile("annotation key", &k)?,
                compile("annotation value", &v)?,
            ))
        })
        .collect::<Result<Vec<_>, InvalidHook>>()?;
    let commands = when
        .commands
        .unwrap_or_default()
        .iter()
        .map(|c| compile("command", c))
        .collect::<Result<Vec<_>, _>>()?;
    let hook = Hook {
        path: hook.path,
        args: hook.args.unwrap_or_default(),
        env: hook.env.unwrap_or_default(),
        timeout: hook.timeout.map(Into::into),
    };
    finish(
        hook,
        When {
            always: when.always,
            annotations,
            commands,
            has_bind_mounts: when.has_bind_mounts,
            any: false,
        },
        stages,
    )
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawOld {
    hook: Option<String>,
    arguments: Option<Vec<String>>,
    stages: Option<Vec<String>>,
    stage: Option<Vec<String>>,
    cmds: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    annotations: Option<Vec<String>>,
    annotation: Option<Vec<String>>,
    hasbindmounts: Option<bool>,
}

/// Exactly one of two synonyms, or neither.
fn synonym<T>(
    a: Option<T>,
    b: Option<T>,
    names: (&'static str, &'static str),
) -> Result<Option<T>, InvalidHook> {
    match (a, b) {
        (Some(_), Some(_)) => Err(InvalidHook::BothSet(names.1, names.0)),
        (a, b) => Ok(a.or(b)),
    }
}

fn parse_old(object: Map<String, Value>) -> Result<HookConfig, InvalidHook> {
    let fields = [
        "hook",
        "arguments",
        "stages",
        "stage",
        "cmds",
        "cmd",
        "annotations",
        "annotation",
        "hasbindmounts",
    ];
    let raw: RawOld = decode(Value::Object(canonical(&object, &fields)))?;
    let path = raw.hook.ok_or(InvalidHook::Missing("hook"))?;
    let stages = synonym(raw.stages, raw.stage, ("stages", "stage"))?
        .ok_or(InvalidHook::Missing("stages"))?;
    let commands = synonym(raw.cmds, raw.cmd, ("cmds", "cmd"))?.unwrap_or_default();
    let annotations = synonym(
        raw.annotations,
        raw.annotation,
        ("annotations", "annotation"),
    )?;
    let args = match raw.arguments {
        Some(arguments) => std::iter::once(path.clone()).chain(arguments).collect(),
        None => Vec::new(),
    };
    if path.is_empty() {
        return Err(InvalidHook::Missing("hook.path"));
    }
    let annotations = match annotations {
        Some(values) => {
            let value = values.join("|");
            vec![(
                compile("annotation key", ".*")?,
                compile("annotation value", &value)?,
            )]
        }
        None => Vec::new(),
    };
    let commands = commands
        .iter()
        .map(|c| compile("command", c))
        .collect::<Result<Vec<_>, _>>()?;
    finish(
        Hook {
            path,
            args,
            ..Hook::default()
        },
        When {
            always: None,
            annotations,
            commands,
            has_bind_mounts: raw.hasbindmounts,
            any: true,
        },
        Some(stages),
    )
}

/// The checks common to both schemas: the executable exists, stages are known.
fn finish(hook: Hook, when: When, stages: Option<Vec<String>>) -> Result<HookConfig, InvalidHook> {
    if let Err(source) = std::fs::metadata(&hook.path) {
        return Err(InvalidHook::NoExecutable {
            path: hook.path,
            source,
        });
    }
    let names = stages.ok_or(InvalidHook::Missing("stages"))?;
    let stages = names
        .iter()
        .map(|s| Stage::from_name(s).ok_or_else(|| InvalidHook::UnknownStage(s.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HookConfig { hook, when, stages })
}

fn compile(what: &'static str, pattern: &str) -> Result<Regex, InvalidHook> {
    Regex::new(pattern).map_err(|e| InvalidHook::Regex {
        what,
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        parse(json.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn current_schema_fields() {
        let h = parse(
            br#"{"version": "1.0.0",
                 "hook": {"path": "/bin/sh", "args": ["sh"], "env": ["A=1"], "timeout": 5},
                 "when": {"annotations": {"^a$": "b"}, "commands": ["sh$"], "hasBindMounts": true},
                 "stages": ["createContainer", "startContainer", "poststart", "poststop", "createRuntime"]}"#,
        )
        .unwrap();
        assert_eq!(h.hook.env, ["A=1"]);
        assert_eq!(h.hook.timeout.map(|t| t.value), Some(5));
        assert_eq!(h.when.annotations.len(), 1);
        assert_eq!(h.when.commands.len(), 1);
        assert_eq!(h.when.has_bind_mounts, Some(true));
        assert!(!h.when.any);
        assert_eq!(
            h.stages,
            [
                Stage::CreateContainer,
                Stage::StartContainer,
                Stage::Poststart,
                Stage::Poststop,
                Stage::CreateRuntime
            ]
        );
    }

    #[test]
    fn field_names_fold_case() {
        let h = parse(
            br#"{"Version": "1.0.0", "HOOK": {"Path": "/bin/sh"}, "when": {"hasbindmounts": true},
                 "Stages": ["poststop"]}"#,
        )
        .unwrap();
        assert_eq!(h.hook.path, "/bin/sh");
        assert_eq!(h.when.has_bind_mounts, Some(true));
    }

    #[test]
    fn old_schema_is_converted() {
        let h = parse(
            br#"{"hook": "/bin/sh", "arguments": ["-c", "true"], "stage": ["prestart"],
                 "cmd": ["init$"], "annotation": ["x", "y"], "hasbindmounts": false}"#,
        )
        .unwrap();
        assert_eq!(h.hook.path, "/bin/sh");
        assert_eq!(h.hook.args, ["/bin/sh", "-c", "true"]);
        assert_eq!(h.stages, [Stage::CreateRuntime]);
        assert!(h.when.any);
        assert_eq!(h.when.annotations[0].0.as_str(), ".*");
        assert_eq!(h.when.annotations[0].1.as_str(), "x|y");
        let h = parse(br#"{"version": "0.1.0", "hook": "/bin/sh", "stages": []}"#).unwrap();
        assert!(h.hook.args.is_empty() && h.stages.is_empty());
    }

    #[test]
    fn invalid_files() {
        assert_eq!(
            err(r#"{"version": "2.0.0"}"#),
            "unrecognized hook version: \"2.0.0\""
        );
        assert_eq!(
            err(r#"{"version": "1.0.0", "hook": {}, "stages": []}"#),
            "missing required property: hook.path"
        );
        assert_eq!(
            err(r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}}"#),
            "missing required property: stages"
        );
        assert_eq!(
            err(r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}, "stages": ["bogus"]}"#),
            "unknown stage \"bogus\""
        );
        assert!(err(
            r#"{"version": "1.0.0", "hook": {"path": "/nonexistent/hook"}, "stages": []}"#
        )
        .starts_with("hook path \"/nonexistent/hook\": "));
        assert!(err(
            r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}, "when": {"commands": ["("]}, "stages": []}"#
        )
        .starts_with("invalid command \"(\": "));
        assert_eq!(
            err(r#"{"hook": "/bin/sh", "stages": [], "stage": []}"#),
            "cannot set both 'stage' and 'stages'"
        );
        assert_eq!(err(r#"{"stages": []}"#), "missing required property: hook");
        assert!(err("[1]").contains("JSON object"));
        assert!(err(r#"{"version": "1.0.0", "hook": {"path": 3}}"#).contains("invalid type"));
    }
}
