//! The set of configured hooks: loading the hook directories, reloading them when
//! they change, and picking the hooks of a container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use nri_stub::api::gofmt::quote;
use nri_stub::api::{Hook, Hooks};

use crate::hook_file::{self, HookConfig, InvalidHook, Stage};
use crate::when::{MatchError, Target};

/// The directory of hooks shipped by packages (lowest precedence).
pub const DEFAULT_DIR: &str = "/usr/share/containers/oci/hooks.d";
/// The directory of hooks set up by the administrator; its files mask files of the
/// same name in [`DEFAULT_DIR`].
pub const OVERRIDE_DIR: &str = "/etc/containers/oci/hooks.d";

/// A hook file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("parsing hook {}: {source}", quote(&path.display().to_string()))]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    #[source]
    pub source: InvalidHook,
}

/// Choosing the hooks of a container failed.
#[derive(Debug, thiserror::Error)]
#[error("matching hook {}: {source}", quote(name))]
pub struct HookMatchError {
    /// The hook file name.
    pub name: String,
    /// Why.
    #[source]
    pub source: MatchError,
}

/// Hooks read from a list of directories, later directories taking precedence for
/// files of the same name. Cheap to clone; clones share the hooks.
///
/// ```
/// use std::collections::BTreeMap;
/// use nri_plugin_hook_injector::manager::HookManager;
/// use nri_plugin_hook_injector::when::Target;
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("10-sh.json"), r#"{"version": "1.0.0",
///     "hook": {"path": "/bin/sh"}, "when": {"always": true}, "stages": ["poststop"]}"#).unwrap();
/// let manager = HookManager::new(vec![dir.path().to_path_buf()]);
/// let annotations = BTreeMap::new();
/// let target = Target { annotations: &annotations, args: &[], has_bind_mounts: false };
/// let hooks = manager.hooks_for(&target).unwrap().unwrap();
/// assert_eq!(hooks.poststop[0].path, "/bin/sh");
/// ```
#[derive(Debug, Clone)]
pub struct HookManager {
    dirs: Arc<Vec<PathBuf>>,
    hooks: Arc<RwLock<BTreeMap<String, HookConfig>>>,
    /// The state of the directories when the hooks were last read.
    loaded_from: Arc<RwLock<Fingerprint>>,
}

impl HookManager {
    /// Reads the hooks of `dirs` (missing directories hold no hooks). Files that
    /// cannot be used are logged and left out.
    pub fn new(dirs: Vec<PathBuf>) -> HookManager {
        let manager = HookManager {
            dirs: Arc::new(dirs),
            hooks: Arc::default(),
            loaded_from: Arc::default(),
        };
        manager.reload();
        manager
    }

    /// The directories, lowest precedence first.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Reads all directories again and replaces the hooks; returns the files that
    /// could not be used (also logged).
    pub fn reload(&self) -> Vec<LoadError> {
        // Taken first: a change made while the files are read is seen next time.
        let state = fingerprint(&self.dirs);
        let (hooks, errors) = load_dirs(&self.dirs);
        for e in &errors {
            tracing::error!("{e}");
        }
        tracing::debug!(hooks = ?hooks.keys().collect::<Vec<_>>(), "loaded hooks");
        match self.hooks.write() {
            Ok(mut guard) => *guard = hooks,
            Err(poisoned) => *poisoned.into_inner() = hooks,
        }
        match self.loaded_from.write() {
            Ok(mut guard) => *guard = state,
            Err(poisoned) => *poisoned.into_inner() = state,
        }
        errors
    }

    /// True when the directories differ from when the hooks were last read.
    fn changed(&self) -> bool {
        let now = fingerprint(&self.dirs);
        match self.loaded_from.read() {
            Ok(guard) => *guard != now,
            Err(poisoned) => *poisoned.into_inner() != now,
        }
    }

    /// The names of the loaded hook files, in injection order.
    pub fn names(&self) -> Vec<String> {
        self.ordered().into_iter().map(|(name, _)| name).collect()
    }

    fn ordered(&self) -> Vec<(String, HookConfig)> {
        let hooks = match self.hooks.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let mut list: Vec<_> = hooks.into_iter().collect();
        list.sort_by(|(a, _), (b, _)| (a.to_lowercase(), a).cmp(&(b.to_lowercase(), b)));
        list
    }

    /// The hooks to inject into `target`, stage by stage, or `None` when no hook
    /// matches. Hooks are taken in the order of their lower-cased file names.
    pub fn hooks_for(&self, target: &Target<'_>) -> Result<Option<Hooks>, HookMatchError> {
        let mut hooks: Option<Hooks> = None;
        for (name, config) in self.ordered() {
            let matched = config
                .when
                .matches(target)
                .map_err(|source| HookMatchError {
                    name: name.clone(),
                    source,
                })?;
            if !matched {
                tracing::debug!("hook {name} did not match");
                continue;
            }
            tracing::debug!("hook {name} matched; adding to stages {:?}", config.stages);
            let out = hooks.get_or_insert_with(Hooks::default);
            for stage in &config.stages {
                stage_list(out, *stage).push(config.hook.clone());
            }
        }
        Ok(hooks)
    }

    /// Checks the directories every `period` and reloads the hooks when a file in
    /// them was added, removed or changed. Runs until the task is dropped.
    pub async fn watch(self, period: Duration) {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if self.changed() {
                tracing::info!("hook directories changed, reloading hooks");
                self.reload();
            }
        }
    }
}

fn stage_list(hooks: &mut Hooks, stage: Stage) -> &mut Vec<Hook> {
    match stage {
        Stage::CreateRuntime => &mut hooks.create_runtime,
        Stage::CreateContainer => &mut hooks.create_container,
        Stage::StartContainer => &mut hooks.start_container,
        Stage::Poststart => &mut hooks.poststart,
        Stage::Poststop => &mut hooks.poststop,
    }
}

/// Reads every `*.json` file of every directory; a file of a later directory
/// replaces the one of the same name of an earlier directory.
pub fn load_dirs(dirs: &[PathBuf]) -> (BTreeMap<String, HookConfig>, Vec<LoadError>) {
    let mut hooks = BTreeMap::new();
    let mut errors = Vec::new();
    for dir in dirs {
        tracing::debug!("reading hooks from {}", dir.display());
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                errors.push(LoadError {
                    path: dir.clone(),
                    source: e.into(),
                });
                continue;
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name.ends_with(".json"))
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            match hook_file::read(&path) {
                Ok(hook) => {
                    tracing::debug!("added hook {}", path.display());
                    hooks.insert(name, hook);
                }
                // The file went away while the directory was read.
                Err(InvalidHook::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => errors.push(LoadError { path, source }),
            }
        }
    }
    (hooks, errors)
}

/// What the watcher compares: every directory entry with its size and mtime.
type Fingerprint = Vec<(PathBuf, Option<(u64, SystemTime)>)>;

fn fingerprint(dirs: &[PathBuf]) -> Fingerprint {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            out.push((dir.clone(), None));
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            out.push((path.clone(), stamp(&path)));
        }
    }
    out.sort();
    out
}

fn stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALWAYS: &str = r#"{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["A"]},
        "when": {"always": true}, "stages": ["prestart", "poststop"]}"#;
    const ALWAYS_B: &str = r#"{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["B"]},
        "when": {"always": true}, "stages": ["poststop"]}"#;

    fn empty_target(annotations: &BTreeMap<String, String>) -> Target<'_> {
        Target {
            annotations,
            args: &[],
            has_bind_mounts: false,
        }
    }

    #[test]
    fn later_directories_mask_earlier_ones_and_order_is_by_lowercase_name() {
        let low = tempfile::tempdir().unwrap();
        let high = tempfile::tempdir().unwrap();
        std::fs::write(low.path().join("b.json"), ALWAYS).unwrap();
        std::fs::write(high.path().join("b.json"), ALWAYS_B).unwrap();
        std::fs::write(high.path().join("A.json"), ALWAYS).unwrap();
        std::fs::write(high.path().join("not-a-hook.txt"), "{").unwrap();
        std::fs::write(high.path().join("broken.json"), "{").unwrap();
        let (hooks, errors) = load_dirs(&[low.path().into(), high.path().into()]);
        assert_eq!(hooks.keys().collect::<Vec<_>>(), ["A.json", "b.json"]);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("broken.json"),
            "{}",
            errors[0]
        );

        let m = HookManager::new(vec![
            low.path().into(),
            high.path().into(),
            "/nonexistent".into(),
        ]);
        assert_eq!(m.names(), ["A.json", "b.json"]);
        let annotations = BTreeMap::new();
        let hooks = m.hooks_for(&empty_target(&annotations)).unwrap().unwrap();
        let args: Vec<_> = hooks.poststop.iter().map(|h| h.args[0].as_str()).collect();
        assert_eq!(args, ["A", "B"]);
        assert_eq!(hooks.create_runtime.len(), 1);
        assert!(hooks.prestart.is_empty());
    }

    #[test]
    fn no_match_gives_none_and_match_errors_name_the_hook() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cmd.json"),
            r#"{"version": "1.0.0", "hook": {"path": "/bin/sh"}, "when": {"commands": ["x"]},
                "stages": ["poststop"]}"#,
        )
        .unwrap();
        let m = HookManager::new(vec![dir.path().into()]);
        let annotations = BTreeMap::new();
        let args = vec!["sh".to_string()];
        let target = Target {
            annotations: &annotations,
            args: &args,
            has_bind_mounts: false,
        };
        assert!(m.hooks_for(&target).unwrap().is_none());
        let err = m.hooks_for(&empty_target(&annotations)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "matching hook \"cmd.json\": process.args must have at least one entry"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn watching_picks_up_new_changed_and_removed_files() {
        let dir = tempfile::tempdir().unwrap();
        let m = HookManager::new(vec![dir.path().into()]);
        assert!(m.names().is_empty());
        let task = tokio::spawn(m.clone().watch(Duration::from_millis(20)));

        let wait_for = |want: Vec<&'static str>| {
            let m = m.clone();
            async move {
                for _ in 0..500 {
                    if m.names() == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                panic!("hooks are {:?}, expected {want:?}", m.names());
            }
        };
        std::fs::write(dir.path().join("a.json"), ALWAYS).unwrap();
        wait_for(vec!["a.json"]).await;
        std::fs::write(dir.path().join("b.json"), ALWAYS_B).unwrap();
        wait_for(vec!["a.json", "b.json"]).await;
        std::fs::remove_file(dir.path().join("a.json")).unwrap();
        wait_for(vec!["b.json"]).await;
        task.abort();
    }
}
