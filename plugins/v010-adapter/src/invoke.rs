//! Running v0.1 plugins: one process per plugin and event, request on standard
//! input, result on standard output.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::request::Subject;
use crate::v01::{ConfigError, ConfigList, PluginResult, State};

/// Largest output read from a plugin, in bytes.
pub const MAX_OUTPUT: u64 = 1 << 20;

/// Where the v0.1 configuration and plugins are, and how long a plugin may run.
#[derive(Debug, Clone)]
pub struct Invoker {
    /// The configuration list, read at every event.
    pub conf_path: PathBuf,
    /// Directory of plugin executables, searched after `PATH`.
    pub bin_dir: PathBuf,
    /// Search path for plugin executables (the adapter's `PATH`).
    pub search_path: Option<OsString>,
    /// Longest time one plugin may run.
    pub timeout: Duration,
}

/// An invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The configuration list could not be read.
    #[error("unable to read NRI v0.1 configuration: {0}")]
    Config(#[from] ConfigError),
    /// A plugin failed.
    #[error("plugin: {plugin}: {reason}")]
    Plugin {
        /// Its type.
        plugin: String,
        /// What happened.
        reason: PluginFailure,
    },
}

/// How a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginFailure {
    /// No executable of that name.
    #[error("executable file not found in $PATH or {0}")]
    NotFound(String),
    /// The request could not be encoded.
    #[error("encoding request: {0}")]
    Encode(serde_json::Error),
    /// The process could not be run.
    #[error("running {path}: {source}")]
    Spawn {
        /// The executable.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran longer than allowed.
    #[error("no result in {0:?}, killed")]
    Timeout(Duration),
    /// It wrote more than [`MAX_OUTPUT`] bytes.
    #[error("output larger than {MAX_OUTPUT} bytes")]
    OutputTooLarge,
    /// Its output is not a result.
    #[error("failed to unmarshal plugin output {output}: {source}")]
    BadOutput {
        /// The output (quoted) and exit code, as the Go client words it.
        output: String,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// It reported an error.
    #[error("{0}")]
    Reported(String),
}

impl Invoker {
    /// Invokes every configured plugin for `subject` at `state`, in order; each
    /// request carries the results of the plugins before. Stops at the first failure.
    /// No configuration list means no plugins.
    pub async fn invoke(
        &self,
        subject: &Subject,
        state: State,
    ) -> Result<Vec<PluginResult>, InvokeError> {
        let conf = ConfigList::load(&self.conf_path)?;
        if conf.plugins.is_empty() {
            return Ok(Vec::new());
        }
        let mut request = subject.request(&conf.version, state);
        for plugin in conf.plugins {
            request.conf = plugin.conf;
            let payload = serde_json::to_vec(&request).map_err(|e| InvokeError::Plugin {
                plugin: plugin.kind.clone(),
                reason: PluginFailure::Encode(e),
            })?;
            let result = self
                .run_one(&plugin.kind, &payload)
                .await
                .map_err(|reason| InvokeError::Plugin {
                    plugin: plugin.kind.clone(),
                    reason,
                })?;
            tracing::info!(
                plugin = %plugin.kind, id = %subject.id, state = ?state,
                metadata = ?result.metadata, "v0.1 plugin done"
            );
            request.results.push(result);
        }
        Ok(request.results)
    }

    /// Finds the executable of plugin type `kind`: a path as given, else in the
    /// search path, else in the binary directory.
    pub fn find(&self, kind: &str) -> Option<PathBuf> {
        if kind.is_empty() {
            return None;
        }
        if kind.contains('/') {
            return Some(PathBuf::from(kind));
        }
        let dirs = self
            .search_path
            .as_ref()
            .map(|p| std::env::split_paths(p).collect::<Vec<_>>())
            .unwrap_or_default();
        dirs.into_iter()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    d
                }
            })
            .chain(std::iter::once(self.bin_dir.clone()))
            .map(|d| d.join(kind))
            .find(|p| is_executable(p))
    }

    async fn run_one(&self, kind: &str, payload: &[u8]) -> Result<PluginResult, PluginFailure> {
        let path = self
            .find(kind)
            .ok_or_else(|| PluginFailure::NotFound(self.bin_dir.display().to_string()))?;
        let spawn_error = |source| PluginFailure::Spawn {
            path: path.display().to_string(),
            source,
        };
        let mut child = Command::new(&path)
            .arg("invoke")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let run = async {
            let write = async {
                if let Some(mut stdin) = stdin.take() {
                    // A plugin that exits without reading its input is not an error.
                    let _ = stdin.write_all(payload).await;
                }
            };
            let read = async {
                let mut out = Vec::new();
                if let Some(stdout) = stdout {
                    stdout.take(MAX_OUTPUT + 1).read_to_end(&mut out).await?;
                }
                Ok::<_, std::io::Error>(out)
            };
            let ((), out) = tokio::join!(write, read);
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((out?, status))
        };
        let (out, status) = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| PluginFailure::Timeout(self.timeout))?
            .map_err(spawn_error)?;
        if out.len() as u64 > MAX_OUTPUT {
            return Err(PluginFailure::OutputTooLarge);
        }
        let result = PluginResult::decode(&out).map_err(|source| {
            let mut output = if out.is_empty() {
                "output: <empty>".to_string()
            } else {
                format!(
                    "output: {}",
                    nri_stub::api::gofmt::quote(&String::from_utf8_lossy(&out))
                )
            };
            if let Some(code) = status.code().filter(|c| *c != 0) {
                output.push_str(&format!(" exit code: {code}"));
            }
            PluginFailure::BadOutput { output, source }
        })?;
        if !result.error.is_empty() {
            return Err(PluginFailure::Reported(result.error));
        }
        if !status.success() {
            tracing::warn!(
                plugin = kind,
                ?status,
                "v0.1 plugin exited with an error but gave a result"
            );
        }
        Ok(result)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn invoker(dir: &Path, conf: &str) -> Invoker {
        std::fs::write(dir.join("conf.json"), conf).unwrap();
        Invoker {
            conf_path: dir.join("conf.json"),
            bin_dir: dir.join("bin"),
            search_path: None,
            timeout: Duration::from_secs(20),
        }
    }

    fn subject() -> Subject {
        Subject::pod(&nri_stub::api::PodSandbox {
            id: "p".into(),
            ..Default::default()
        })
    }

    fn conf(types: &[&str]) -> String {
        let plugins: Vec<String> = types
            .iter()
            .map(|t| format!(r#"{{"type": "{t}"}}"#))
            .collect();
        format!(
            r#"{{"version": "0.1", "plugins": [{}]}}"#,
            plugins.join(",")
        )
    }

    #[tokio::test(flavor = "current_thread")]
    async fn chained_results_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        script(
            &bin,
            "ok",
            r#"cat >/dev/null; echo '{"plugin":"ok","version":"0.1","error":""}'"#,
        );
        // Echoes how many results the request carried.
        script(
            &bin,
            "count",
            r#"n=$(grep -o '"plugin":"ok"' | wc -l); echo "{\"plugin\":\"count\",\"metadata\":{\"seen\":\"$n\"}}""#,
        );
        script(&bin, "fails", r#"echo '{"error":"no way"}'"#);
        script(&bin, "garbage", "echo nonsense; exit 3");
        script(&bin, "silent", "exit 0");
        script(&bin, "sleepy", "sleep 30");

        let inv = invoker(dir.path(), &conf(&["ok", "count"]));
        let results = inv.invoke(&subject(), State::Create).await.unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[1].metadata["seen"].trim(), "1");

        let err = |types: &[&str]| {
            let inv = invoker(dir.path(), &conf(types));
            async move {
                inv.invoke(&subject(), State::Create)
                    .await
                    .unwrap_err()
                    .to_string()
            }
        };
        assert_eq!(err(&["ok", "fails"]).await, "plugin: fails: no way");
        let garbage = err(&["garbage"]).await;
        assert!(
            garbage.starts_with(r#"plugin: garbage: failed to unmarshal plugin output output: "nonsense\n" exit code: 3: "#),
            "{garbage}"
        );
        assert!(err(&["silent"]).await.contains("output: <empty>"));
        assert!(err(&["missing"])
            .await
            .starts_with("plugin: missing: executable file not found"));

        let mut quick = invoker(dir.path(), &conf(&["sleepy"]));
        quick.timeout = Duration::from_millis(200);
        let e = quick
            .invoke(&subject(), State::Delete)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("plugin: sleepy: no result in"), "{e}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn no_config_means_no_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Invoker {
            conf_path: dir.path().join("absent.json"),
            bin_dir: dir.path().into(),
            search_path: None,
            timeout: Duration::from_secs(1),
        };
        assert!(inv
            .invoke(&subject(), State::Create)
            .await
            .unwrap()
            .is_empty());
    }

    #[test]
    fn search_path_before_bin_dir() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        script(a.path(), "p", "");
        script(b.path(), "p", "");
        std::fs::write(a.path().join("not-exec"), "").unwrap();
        let inv = Invoker {
            conf_path: PathBuf::new(),
            bin_dir: b.path().into(),
            search_path: Some(a.path().as_os_str().to_owned()),
            timeout: Duration::from_secs(1),
        };
        assert_eq!(inv.find("p"), Some(a.path().join("p")));
        assert_eq!(inv.find("not-exec"), None);
        assert_eq!(inv.find("/abs/x"), Some(PathBuf::from("/abs/x")));
        assert_eq!(inv.find(""), None);
    }
}
