//! Reading a scenario: YAML syntax (with line and column), then the checks
//! that need the whole file (names, references, plugin kinds).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::model::Scenario;

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read scenario {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or does not match the scenario format.
    #[error("{origin}:{line}:{column}: {message}")]
    Syntax {
        /// File name.
        origin: String,
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The YAML is well-formed but the scenario is inconsistent.
    #[error("{origin}: {message}")]
    Invalid {
        /// File name.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// Reads and checks the scenario file at `path`.
pub fn load_file(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    load_str(&text, &path.display().to_string(), &base)
}

/// Parses and checks a scenario held in memory; `origin` names it in
/// errors, `base_dir` resolves relative paths.
pub fn load_str(text: &str, origin: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
    let mut scenario: Scenario = if text.trim().is_empty() {
        Scenario::default()
    } else {
        serde_norway::from_str(text).map_err(|e| syntax_error(origin, text, &e))?
    };
    for p in &mut scenario.plugins {
        if p.name.is_empty() {
            if let Some(sample) = &p.sample {
                p.name = sample.0.clone();
            } else if let Some(module) = &p.wasm {
                let (index, name) = wasm_identity(module);
                p.name = name;
                if p.index.is_none() {
                    p.index = index;
                }
            }
        }
    }
    scenario.base_dir = base_dir.to_path_buf();
    scenario.origin = origin.to_string();
    check(&scenario).map_err(|message| ScenarioError::Invalid {
        origin: origin.to_string(),
        message,
    })?;
    Ok(scenario)
}

/// The identity of a `wasm:` plugin without a `name:`, from its file name
/// as the runtime takes it from a file of its plugin directory: `.wasm`
/// removed, then `NN-base` gives index and name, anything else is the name.
/// A file name holding `${` gives no name (the scenario must set one).
fn wasm_identity(module: &str) -> (Option<String>, String) {
    let file = Path::new(module)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if file.contains("${") {
        return (None, String::new());
    }
    let stem = file.strip_suffix(".wasm").unwrap_or(&file);
    match nri_api::plugin::parse_plugin_name(stem) {
        Ok((idx, base)) => (Some(idx.to_string()), base.to_string()),
        Err(_) => (None, stem.to_string()),
    }
}

fn syntax_error(origin: &str, text: &str, e: &serde_norway::Error) -> ScenarioError {
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    let mut message = e.to_string();
    // The library appends the position; it is in front already.
    if let Some(i) = message.find(" at line ") {
        message.truncate(i);
    }
    // The parser's words for a tab ("found character that cannot start any
    // token") do not say what the character is.
    let tab_on_line = line
        .checked_sub(1)
        .and_then(|l| text.lines().nth(l))
        .is_some_and(|l| l.contains('\t'));
    if tab_on_line {
        message.push_str(" (a tab character: YAML indents with spaces only)");
    }
    ScenarioError::Syntax {
        origin: origin.to_string(),
        line,
        column,
        message,
    }
}

fn check(s: &Scenario) -> Result<(), String> {
    let mut plugin_names = BTreeSet::new();
    for (i, p) in s.plugins.iter().enumerate() {
        let at = format!("plugins[{i}] ({})", p.name);
        if p.name.is_empty() {
            return Err(format!("plugins[{i}]: `name` is missing"));
        }
        nri_api::plugin::check_plugin_name(&p.name).map_err(|e| format!("{at}: {e}"))?;
        if let Some(idx) = &p.index {
            nri_api::plugin::check_plugin_index(idx)
                .map_err(|e| format!("{at}: index {idx:?}: {e}"))?;
        }
        let kinds = [
            p.builtin.is_some(),
            p.command.is_some(),
            p.sample.is_some(),
            p.wasm.is_some(),
            p.external,
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            return Err(format!(
                "{at}: a plugin needs exactly one of `builtin:` (declared in the scenario), \
                 `command:` (a program to launch), `sample:` (a sample plugin of plugins/, \
                 run in-process), `wasm:` (a WebAssembly plugin module) or `external: true` \
                 (connects to `socket`)"
            ));
        }
        if p.external && s.socket.is_none() {
            return Err(format!(
                "{at}: external plugins connect to the runtime's socket: set `socket:` at the top level"
            ));
        }
        if let Some(cmd) = &p.command {
            if cmd.first().is_none_or(|c| c.is_empty()) {
                return Err(format!("{at}: `command` is empty"));
            }
        }
        if p.command.is_none() && !p.env.is_empty() {
            return Err(format!("{at}: `env` applies to `command` plugins only"));
        }
        if p.wasm.as_deref().is_some_and(str::is_empty) {
            return Err(format!("{at}: `wasm` is empty"));
        }
        if p.command.is_none() && p.sample.is_none() && p.wasm.is_none() && p.config.is_some() {
            return Err(format!(
                "{at}: `config` applies to `command`, `sample` and `wasm` plugins only"
            ));
        }
        if p.sample.is_none() && !p.args.is_empty() {
            return Err(format!(
                "{at}: `args` applies to `sample` plugins only (put a program's arguments in `command`)"
            ));
        }
        if let Some(b) = &p.builtin {
            crate::plugins::scripted::event_mask(b).map_err(|e| format!("{at}: {e}"))?;
        }
        let full = format!("{}-{}", p.index.as_deref().unwrap_or(""), p.name);
        if !plugin_names.insert(full) {
            return Err(format!("{at}: declared twice"));
        }
    }

    let mut pods = BTreeSet::new();
    for p in &s.pods {
        if !pods.insert(p.name.as_str()) {
            return Err(format!("pod {:?} declared twice", p.name));
        }
    }
    let mut containers = BTreeSet::new();
    for c in &s.containers {
        if !containers.insert(c.name.as_str()) {
            return Err(format!("container {:?} declared twice", c.name));
        }
        match &c.pod {
            Some(pod) if !pods.contains(pod.as_str()) => {
                return Err(format!(
                    "container {:?}: unknown pod {pod:?} (pods: {})",
                    c.name,
                    list(&pods)
                ))
            }
            None if s.pods.len() != 1 => {
                return Err(format!(
                    "container {:?}: say which pod it belongs to with `pod:` ({} pods declared)",
                    c.name,
                    s.pods.len()
                ))
            }
            _ => {}
        }
        if c.existing
            && !c.pod.as_ref().map_or_else(
                || s.pods.first().is_some_and(|p| p.existing),
                |name| s.pods.iter().any(|p| &p.name == name && p.existing),
            )
        {
            return Err(format!(
                "container {:?} is `existing` but its pod is not",
                c.name
            ));
        }
    }

    for (i, step) in s.steps.iter().enumerate() {
        let at = format!("steps[{i}] ({})", step.action);
        if let Some(target) = step.action.target() {
            let (known, kind) = if step.action.is_container() {
                (&containers, "container")
            } else {
                (&pods, "pod")
            };
            if !known.contains(target) {
                return Err(format!(
                    "{at}: unknown {kind} {target:?} (declared: {})",
                    list(known)
                ));
            }
        }
        if let Some(e) = &step.expect {
            if e.has_spec_checks() && !step.action.is_container() {
                return Err(format!("{at}: spec checks need a container step"));
            }
        }
    }
    for (name, e) in &s.expect {
        if !containers.contains(name.as_str()) {
            return Err(format!(
                "expect: unknown container {name:?} (declared: {})",
                list(&containers)
            ));
        }
        let only = e.step_only_checks();
        if !only.is_empty() {
            return Err(format!(
                "expect.{name}: {} can only be checked in a step's `expect`",
                only.join(", ")
            ));
        }
    }
    Ok(())
}

fn list(names: &BTreeSet<&str>) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Scenario, ScenarioError> {
        load_str(text, "t.yaml", Path::new("."))
    }

    #[test]
    fn wasm_plugins_are_named_after_their_file() {
        let s = load(
            "plugins:\n  - wasm: ./mods/10-logger.wasm\n  - wasm: ../nri-wasm-scripted.wasm\n  \
             - wasm: x.wasm\n    name: given\n    index: '70'\n    config: {tag: t}\n",
        )
        .unwrap();
        let ids: Vec<(Option<&str>, &str)> = s
            .plugins
            .iter()
            .map(|p| (p.index.as_deref(), p.name.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                (Some("10"), "logger"),
                (None, "nri-wasm-scripted"),
                (Some("70"), "given")
            ]
        );
        let err = load("plugins: [{wasm: '${DIR}/${NAME}.wasm'}]").unwrap_err();
        assert!(err.to_string().contains("`name` is missing"), "{err}");
        let err = load("plugins: [{name: x, wasm: x.wasm, command: [x]}]").unwrap_err();
        assert!(err.to_string().contains("exactly one of"), "{err}");
        let err = load("plugins: [{name: x, wasm: ''}]").unwrap_err();
        assert!(err.to_string().contains("`wasm` is empty"), "{err}");
        let err = load("plugins: [{name: x, wasm: x.wasm, args: [-v]}]").unwrap_err();
        assert!(err.to_string().contains("`args` applies"), "{err}");
    }

    #[test]
    fn a_tab_is_named_as_such() {
        let err = load("pods:\n\t- name: p\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t.yaml:2:"), "{text}");
        assert!(
            text.contains("a tab character: YAML indents with spaces only"),
            "{text}"
        );
        let err = load("pods:\n  - name: p\n    colour: red\n").unwrap_err();
        assert!(!err.to_string().contains("tab"), "{err}");
    }

    #[test]
    fn syntax_errors_have_line_and_column() {
        let err = load("pods:\n  - name: p\n    colour: red\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t.yaml:3:5: "), "{text}");
        assert!(text.contains("unknown field `colour`"), "{text}");
    }

    #[test]
    fn steps_need_one_known_action() {
        let base = "pods: [{name: p}]\ncontainers: [{name: c}]\nsteps:\n";
        let err = load(&format!("{base}  - create: c\n    start: c\n")).unwrap_err();
        assert!(err.to_string().contains("a step has one action"), "{err}");
        let err = load(&format!("{base}  - launch: c\n")).unwrap_err();
        assert!(
            err.to_string().contains("unknown step key `launch`"),
            "{err}"
        );
        assert!(err.to_string().starts_with("t.yaml:4:"), "{err}");
        let err = load(&format!("{base}  - create: nope\n")).unwrap_err();
        assert!(
            err.to_string().contains("unknown container \"nope\""),
            "{err}"
        );
    }

    #[test]
    fn plugins_need_one_kind() {
        let err = load("plugins: [{name: x, index: '10'}]").unwrap_err();
        assert!(err.to_string().contains("exactly one of"), "{err}");
        let err = load("plugins: [{name: x, external: true}]").unwrap_err();
        assert!(err.to_string().contains("set `socket:`"), "{err}");
        let err = load("plugins: [{name: x, index: '1x', builtin: {}}]").unwrap_err();
        assert!(err.to_string().contains("index"), "{err}");
    }

    #[test]
    fn the_demo_is_valid() {
        let s = load(super::super::DEMO).unwrap();
        assert!(!s.steps.is_empty());
        assert!(!s.plugins.is_empty());
    }
}
