//! Discovery of the plugins the runtime launches itself: executables named
//! `<idx>-<base>` in the plugin directory, with optional configuration in
//! the configuration directory.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nri_api::plugin::{parse_plugin_name, qualified_name};

use crate::adaptation_error::{DiscoverError, Error};

/// A plugin found in the plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Discovered {
    pub idx: String,
    pub base: String,
    pub path: PathBuf,
    pub config: String,
}

impl Discovered {
    pub(crate) fn name(&self) -> String {
        qualified_name(&self.idx, &self.base)
    }
}

/// Lists the plugins of `dir`, in file name order.
///
/// A missing directory means no plugins. Directories, entries that cannot
/// be inspected and files without an execute bit are skipped; so is, with
/// a warning, a file whose name is not `<idx>-<base>` (decision [19]: the
/// reference aborts start-up instead).
pub(crate) fn discover(dir: &Path, config_dir: &Path) -> Result<Vec<Discovered>, Error> {
    let fail = |source: DiscoverError| Error::Discover {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fail(e.into())),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| fail(e.into()))?;
        // Not following symlinks, as the reference does.
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        files.push(entry.file_name());
    }
    files.sort();

    let mut found = Vec::new();
    for file in files {
        let Some(name) = file.to_str() else {
            tracing::warn!(file = ?file, dir = %dir.display(), "skipping plugin with a non UTF-8 name");
            continue;
        };
        let (idx, base) = match parse_plugin_name(name) {
            Ok(parts) => parts,
            Err(e) => {
                tracing::warn!(file = name, dir = %dir.display(), error = %e,
                    "skipping badly named file in the plugin directory");
                continue;
            }
        };
        let config = read_config(config_dir, idx, base).map_err(fail)?;
        found.push(Discovered {
            idx: idx.to_string(),
            base: base.to_string(),
            path: dir.join(name),
            config,
        });
    }
    Ok(found)
}

/// The plugin's configuration: `<idx>-<base>.conf`, else `<base>.conf`,
/// else empty.
fn read_config(dir: &Path, idx: &str, base: &str) -> Result<String, DiscoverError> {
    let name = qualified_name(idx, base);
    for file in [format!("{name}.conf"), format!("{base}.conf")] {
        match std::fs::read_to_string(dir.join(&file)) {
            Ok(text) => return Ok(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(DiscoverError::Config { name, source }),
        }
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn exe(path: &Path) {
        fs::write(path, b"#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn finds_plugins_and_configs_skipping_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("plugins");
        let conf = tmp.path().join("conf");
        fs::create_dir_all(&dir).unwrap();
        fs::create_dir_all(&conf).unwrap();
        exe(&dir.join("10-b"));
        exe(&dir.join("05-a-x"));
        exe(&dir.join("badname"));
        exe(&dir.join("1-short"));
        fs::write(dir.join("20-noexec"), b"").unwrap();
        fs::create_dir(dir.join("30-dir")).unwrap();
        fs::write(conf.join("10-b.conf"), "full").unwrap();
        fs::write(conf.join("b.conf"), "base").unwrap();
        fs::write(conf.join("a-x.conf"), "base-only").unwrap();

        let found = discover(&dir, &conf).unwrap();
        let names: Vec<_> = found.iter().map(Discovered::name).collect();
        assert_eq!(names, ["05-a-x", "10-b"]);
        assert_eq!(found[0].config, "base-only");
        assert_eq!(found[1].config, "full");
        assert_eq!(found[1].path, dir.join("10-b"));
    }

    #[test]
    fn missing_directory_is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(discover(&tmp.path().join("nope"), tmp.path())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn unreadable_config_fails_discovery() {
        let tmp = tempfile::tempdir().unwrap();
        exe(&tmp.path().join("10-x"));
        // A directory where the config file should be cannot be read.
        let conf = tmp.path().join("conf");
        fs::create_dir_all(conf.join("10-x.conf")).unwrap();
        let err = discover(tmp.path(), &conf).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "failed to discover plugins in {}: failed to read configuration for plugin \"10-x\": ",
                tmp.path().display()
            )),
            "{text}"
        );
    }
}
