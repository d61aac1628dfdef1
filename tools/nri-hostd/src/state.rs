//! The pods and containers the daemon knows, and the state file that keeps
//! them across restarts (written to a temporary file in the same directory,
//! synced, then renamed over the old one: a crash leaves the old or the new
//! file, never a mix).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use nri_api::{Container, PodSandbox};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::RuntimeRef;

/// A container (or a pod's sandbox container) created through the wrapper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRecord {
    /// As plugins see it.
    pub container: Container,
    /// The real runtime it was created with.
    pub runtime: RuntimeRef,
    /// Its bundle.
    pub bundle: String,
    /// The spec it was created with (after adjustment), updated by
    /// plugin-initiated updates.
    pub spec: Value,
    /// It is its pod's sandbox, not a container plugins see.
    pub sandbox: bool,
}

/// A pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    /// As plugins see it.
    pub pod: PodSandbox,
    /// The container that is its sandbox, while it exists.
    pub sandbox: Option<String>,
}

/// Everything the daemon knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Pods by id.
    pub pods: BTreeMap<String, PodRecord>,
    /// Containers (and sandbox containers) by id.
    pub containers: BTreeMap<String, ContainerRecord>,
}

/// Errors of the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing failed.
    #[error("state file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds something else than a state.
    #[error("state file {path} is corrupt: {source}")]
    Corrupt {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl State {
    /// Reads the state file; a missing file is an empty state.
    pub fn load(path: &Path) -> Result<State, StateError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(source) => {
                return Err(StateError::Io {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        serde_json::from_slice(&bytes).map_err(|source| StateError::Corrupt {
            path: path.display().to_string(),
            source,
        })
    }

    /// Replaces the state file atomically with this state.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: path.display().to_string(),
            source,
        };
        let bytes = serde_json::to_vec(self).map_err(|source| StateError::Corrupt {
            path: path.display().to_string(),
            source,
        })?;
        write_atomic(path, &bytes, false).map_err(io)
    }

    /// Ids of the containers (not sandboxes) of pod `pod`.
    pub fn members(&self, pod: &str) -> Vec<String> {
        self.containers
            .values()
            .filter(|c| !c.sandbox && c.container.pod_sandbox_id == pod)
            .map(|c| c.container.id.clone())
            .collect()
    }
}

/// Writes `bytes` to `path` atomically: a temporary file next to it (with
/// the permissions of the file it replaces), renamed over `path`; with
/// `durable`, the file is synced before the rename and the directory after
/// it, so that a power loss also leaves the old or the new contents. On
/// failure `path` is untouched and the temporary file removed.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("config.json");
/// nri_hostd::state::write_atomic(&path, b"{}", true).unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"{}");
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durable {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A state with pod `p` and its container `c` created with `runtime`.
#[cfg(test)]
pub(crate) fn one_pod_one_container(runtime: &str) -> State {
    let mut s = State::default();
    s.pods.insert(
        "p".into(),
        PodRecord {
            pod: PodSandbox {
                id: "p".into(),
                ..Default::default()
            },
            sandbox: None,
        },
    );
    s.containers.insert(
        "c".into(),
        ContainerRecord {
            container: Container {
                id: "c".into(),
                pod_sandbox_id: "p".into(),
                ..Default::default()
            },
            runtime: RuntimeRef {
                path: runtime.into(),
                global_args: vec![],
            },
            bundle: "/b".into(),
            spec: serde_json::json!({"a": 1}),
            sandbox: false,
        },
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        assert_eq!(State::load(&path).unwrap(), State::default());
        let s = one_pod_one_container("/nonexistent/runc");
        s.save(&path).unwrap();
        assert_eq!(State::load(&path).unwrap(), s);
        assert_eq!(s.members("p"), ["c"]);
        // Only the state file is left: no temporary files.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, b"{\"pods\": 3").unwrap();
        assert!(matches!(
            State::load(&path),
            Err(StateError::Corrupt { .. })
        ));
    }
}
