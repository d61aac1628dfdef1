//! Programs launched as pre-installed plugins.
//!
//! The simulator gives the adaptation a private plugin directory. Each
//! `command:` plugin (and each plugin of the scenario's `plugin_dir`) gets a
//! small `/bin/sh` wrapper there, named `NN-name`, that sends the plugin's
//! standard error to a file (so a plugin that fails to start can be
//! explained), sets its extra environment and `exec`s the program. The
//! adaptation launches the wrapper as it would launch the plugin: socket on
//! fd 3, `NRI_PLUGIN_NAME`, `NRI_PLUGIN_IDX`, configuration from
//! `NN-name.conf`.
//!
//! A `wasm:` plugin (and a WebAssembly module of the scenario's
//! `plugin_dir`) gets a symbolic link `NN-name` to its module instead: the
//! adaptation recognizes the module by its first bytes and runs it
//! in-process.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::scenario::Scenario;

/// Why a plugin cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The program (or module) does not exist, is not executable, or
    /// needs a feature this build does not have.
    #[error("plugin {plugin:?} cannot be launched: {reason}")]
    Unknown {
        /// Full name.
        plugin: String,
        /// What is wrong with the program.
        reason: String,
    },
    /// Writing the plugin directory failed.
    #[error("cannot prepare the plugin directory: {0}")]
    Io(#[from] std::io::Error),
}

/// A plugin the adaptation will launch.
#[derive(Debug, Clone)]
pub struct Launched {
    /// Where its standard error goes (none for a WebAssembly module: the
    /// adaptation adds what the module writes there to its errors).
    pub stderr: Option<PathBuf>,
}

impl Launched {
    /// Whether the plugin is a WebAssembly module.
    pub fn is_wasm(&self) -> bool {
        self.stderr.is_none()
    }
}

/// The private plugin and configuration directories.
pub struct PluginDirs {
    _tmp: tempfile::TempDir,
    /// Plugin directory for the adaptation.
    pub plugin_dir: PathBuf,
    /// Configuration directory for the adaptation.
    pub config_dir: PathBuf,
    /// Every launched plugin, by full name.
    pub launched: BTreeMap<String, Launched>,
}

impl PluginDirs {
    /// The last `lines` lines of a launched plugin's standard error.
    pub fn stderr_tail(&self, full_name: &str, lines: usize) -> String {
        let Some(stderr) = self.launched.get(full_name).and_then(|l| l.stderr.as_ref()) else {
            return String::new();
        };
        let text = std::fs::read(stderr).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Expands `${NAME}` and `${NAME:-default}` from the environment; the
/// default may itself hold references.
pub fn expand(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        // The matching `}`: references in the default nest.
        let mut depth = 1usize;
        let mut end = None;
        let bytes = after.as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            match bytes[j] {
                b'$' if bytes.get(j + 1) == Some(&b'{') => {
                    depth += 1;
                    j += 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let end = end.ok_or_else(|| format!("unterminated `${{` in {text:?}"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(name).ok().filter(|v| !v.is_empty()), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(&expand(d)?),
            (None, None) => {
                return Err(format!(
                "environment variable {name} is not set (use ${{{name}:-default}} for a default)"
            ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Quotes `s` for `/bin/sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds the program: a path (relative to `base`) or a name on `PATH`.
pub(crate) fn resolve(program: &str, base: &Path) -> Result<PathBuf, String> {
    if program.contains('/') {
        let p = base.join(program);
        let p = std::fs::canonicalize(&p).map_err(|e| missing_file(&p, "program", e))?;
        if !is_executable(&p) {
            return Err(format!("{} is not an executable file", p.display()));
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("command `{program}` not found on PATH"))
}

/// Why a plugin's program or module file cannot be used: a missing file is
/// said in words (a relative path is taken from the scenario's directory),
/// other errors as the system gives them.
fn missing_file(path: &Path, what: &str, e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "the {what} {} does not exist (a relative path is taken from the scenario file's directory)",
            path.display()
        )
    } else {
        format!("{}: {e}", path.display())
    }
}

fn write_wrapper(
    dir: &Path,
    logs: &Path,
    full_name: &str,
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<Launched, LaunchError> {
    let stderr = logs.join(format!("{full_name}.stderr"));
    let mut script = String::from("#!/bin/sh\n");
    script.push_str(&format!(
        "exec 2>>{}\n",
        sh_quote(&stderr.display().to_string())
    ));
    if let Some(path) = std::env::var_os("PATH") {
        script.push_str(&format!(
            "PATH={}; export PATH\n",
            sh_quote(&path.to_string_lossy())
        ));
    }
    for (k, v) in env {
        script.push_str(&format!("{k}={}; export {k}\n", sh_quote(v)));
    }
    script.push_str("exec ");
    script.push_str(&sh_quote(&program.display().to_string()));
    for a in args {
        script.push(' ');
        script.push_str(&sh_quote(a));
    }
    script.push('\n');
    let path = dir.join(full_name);
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(Launched {
        stderr: Some(stderr),
    })
}

/// Links `dir/full_name` to the WebAssembly module at `module` (a
/// symbolic link has every mode bit, so the adaptation takes it as a
/// plugin whatever the module's own mode).
fn link_wasm(dir: &Path, full_name: &str, module: &Path) -> Result<Launched, LaunchError> {
    std::os::unix::fs::symlink(module, dir.join(full_name))?;
    Ok(Launched { stderr: None })
}

/// Finds a `wasm:` plugin's module (relative to `base`) and checks that it
/// is one.
fn resolve_wasm(module: &str, base: &Path) -> Result<PathBuf, String> {
    let p = base.join(module);
    let p = std::fs::canonicalize(&p).map_err(|e| missing_file(&p, "module", e))?;
    if !p.is_file() {
        return Err(format!("{} is not a file", p.display()));
    }
    if !nri_adaptation::is_wasm_file(&p) {
        return Err(format!(
            "{} is not a WebAssembly module (it does not start with \\0asm and version 1)",
            p.display()
        ));
    }
    if !crate::features::enabled("wasm") {
        return Err(crate::features::not_built_in(
            "wasm",
            &format!("the WebAssembly plugin {}", p.display()),
        ));
    }
    Ok(p)
}

/// Writes `NN-name.conf` for a plugin whose scenario entry has `config`.
fn write_config(
    config_dir: &Path,
    full_name: &str,
    config: Option<&serde_json::Value>,
) -> Result<(), LaunchError> {
    if let Some(cfg) = config {
        let text = match cfg {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        std::fs::write(config_dir.join(format!("{full_name}.conf")), text)?;
    }
    Ok(())
}

/// Writes the wrappers and configuration files of `scenario`'s launched
/// plugins into a new temporary directory.
pub fn prepare(scenario: &Scenario) -> Result<PluginDirs, LaunchError> {
    let tmp = tempfile::Builder::new().prefix("nri-sim-").tempdir()?;
    let plugin_dir = tmp.path().join("plugins");
    let config_dir = tmp.path().join("conf.d");
    let logs = tmp.path().join("logs");
    for d in [&plugin_dir, &config_dir, &logs] {
        std::fs::create_dir_all(d)?;
    }
    let mut launched = BTreeMap::new();
    for p in &scenario.plugins {
        let Some(module) = &p.wasm else { continue };
        let idx = p.index.as_deref().unwrap_or(super::DEFAULT_INDEX);
        let full_name = format!("{idx}-{}", p.name);
        let unknown = |reason: String| LaunchError::Unknown {
            plugin: full_name.clone(),
            reason,
        };
        let module =
            resolve_wasm(&expand(module).map_err(unknown)?, &scenario.base_dir).map_err(unknown)?;
        let l = link_wasm(&plugin_dir, &full_name, &module)?;
        write_config(&config_dir, &full_name, p.config.as_ref())?;
        launched.insert(full_name, l);
    }
    for p in &scenario.plugins {
        let Some(cmd) = &p.command else { continue };
        let idx = p.index.as_deref().unwrap_or(super::DEFAULT_INDEX);
        let full_name = format!("{idx}-{}", p.name);
        let unknown = |reason: String| LaunchError::Unknown {
            plugin: full_name.clone(),
            reason,
        };
        let cmd: Vec<String> = cmd
            .iter()
            .map(|c| expand(c))
            .collect::<Result<_, _>>()
            .map_err(unknown)?;
        let env: BTreeMap<String, String> = p
            .env
            .iter()
            .map(|(k, v)| expand(v).map(|v| (k.clone(), v)))
            .collect::<Result<_, _>>()
            .map_err(unknown)?;
        let Some((program, args)) = cmd.split_first() else {
            continue;
        };
        for k in env.keys() {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(LaunchError::Unknown {
                    plugin: full_name,
                    reason: format!("invalid environment variable name {k:?}"),
                });
            }
        }
        let program =
            resolve(program, &scenario.base_dir).map_err(|reason| LaunchError::Unknown {
                plugin: full_name.clone(),
                reason,
            })?;
        let l = write_wrapper(&plugin_dir, &logs, &full_name, &program, args, &env)?;
        write_config(&config_dir, &full_name, p.config.as_ref())?;
        launched.insert(full_name, l);
    }
    if let Some(dir) = &scenario.plugin_dir {
        let dir = scenario.base_dir.join(dir);
        let conf = scenario
            .plugin_config_dir
            .as_ref()
            .map(|c| scenario.base_dir.join(c));
        let entries = std::fs::read_dir(&dir).map_err(|e| LaunchError::Unknown {
            plugin: dir.display().to_string(),
            reason: format!("cannot read plugin_dir: {e}"),
        })?;
        let mut names: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .filter(|(n, p)| nri_api::plugin::parse_plugin_name(n).is_ok() && is_executable(p))
            .collect();
        names.sort();
        for (full_name, path) in names {
            if launched.contains_key(&full_name) {
                continue;
            }
            let program = std::fs::canonicalize(&path)?;
            let l = if nri_adaptation::is_wasm_file(&program) {
                if !crate::features::enabled("wasm") {
                    return Err(LaunchError::Unknown {
                        plugin: full_name,
                        reason: crate::features::not_built_in(
                            "wasm",
                            &format!("the WebAssembly plugin {}", program.display()),
                        ),
                    });
                }
                link_wasm(&plugin_dir, &full_name, &program)?
            } else {
                write_wrapper(
                    &plugin_dir,
                    &logs,
                    &full_name,
                    &program,
                    &[],
                    &BTreeMap::new(),
                )?
            };
            if let Some(conf) = &conf {
                let base = nri_api::plugin::parse_plugin_name(&full_name)
                    .map(|(_, b)| b.to_string())
                    .unwrap_or_default();
                for candidate in [format!("{full_name}.conf"), format!("{base}.conf")] {
                    let src = conf.join(&candidate);
                    if src.is_file() {
                        std::fs::copy(&src, config_dir.join(format!("{full_name}.conf")))?;
                        break;
                    }
                }
            }
            launched.insert(full_name, l);
        }
    }
    Ok(PluginDirs {
        _tmp: tmp,
        plugin_dir,
        config_dir,
        launched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_references_expand() {
        std::env::set_var("NRI_SIM_TEST_EXPAND", "/opt/x");
        assert_eq!(expand("${NRI_SIM_TEST_EXPAND}/bin").unwrap(), "/opt/x/bin");
        assert_eq!(
            expand("${NRI_SIM_TEST_UNSET_VAR:-fallback}").unwrap(),
            "fallback"
        );
        assert!(expand("${NRI_SIM_TEST_UNSET_VAR}")
            .unwrap_err()
            .contains("is not set"));
        assert!(expand("${OOPS").unwrap_err().contains("unterminated"));
        assert_eq!(expand("plain").unwrap(), "plain");
        assert_eq!(
            expand("${NRI_SIM_TEST_UNSET_VAR:-${NRI_SIM_TEST_EXPAND}/y}/z").unwrap(),
            "/opt/x/y/z"
        );
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn wrappers_and_configs_are_written() {
        let s = crate::scenario::load_str(
            "plugins:\n  - name: t\n    index: '10'\n    command: [sh, -c, 'echo hi >&2']\n    env: {A: \"x'y\"}\n    config: {k: 1}\n",
            "t.yaml",
            Path::new("."),
        )
        .unwrap();
        let dirs = prepare(&s).unwrap();
        let wrapper = std::fs::read_to_string(dirs.plugin_dir.join("10-t")).unwrap();
        assert!(wrapper.contains("A='x'\\''y'; export A"), "{wrapper}");
        assert!(wrapper.contains("'-c' 'echo hi >&2'"), "{wrapper}");
        let conf = std::fs::read_to_string(dirs.config_dir.join("10-t.conf")).unwrap();
        assert_eq!(conf, r#"{"k":1}"#);
        // The wrapper runs the program with stderr captured.
        let st = std::process::Command::new(dirs.plugin_dir.join("10-t"))
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(dirs.stderr_tail("10-t", 5), "hi");
    }

    #[test]
    fn unknown_programs_are_reported() {
        let s = crate::scenario::load_str(
            "plugins: [{name: t, command: [no-such-nri-plugin-xyz]}]",
            "t.yaml",
            Path::new("."),
        )
        .unwrap();
        let err = prepare(&s).err().unwrap().to_string();
        assert!(err.contains("plugin \"50-t\" cannot be launched"), "{err}");
        assert!(err.contains("not found on PATH"), "{err}");
        let s = crate::scenario::load_str(
            "plugins: [{name: t, command: [./target/no-such-plugin]}]",
            "t.yaml",
            Path::new("/nonexistent-dir"),
        )
        .unwrap();
        let err = prepare(&s).err().unwrap().to_string();
        assert_eq!(
            err,
            "plugin \"50-t\" cannot be launched: the program \
             /nonexistent-dir/./target/no-such-plugin does not exist (a relative path is \
             taken from the scenario file's directory)"
        );
    }
}
