//! The wrapper's configuration, from the first of:
//!
//! 1. `$NRI_RUNC_CONFIG` (must exist);
//! 2. `<program>.toml`, next to the program as the engine invoked it
//!    (`/opt/nri/bin/nri-runc` reads `/opt/nri/bin/nri-runc.toml`; a
//!    symlink `nri-runc-strict` reads `nri-runc-strict.toml`), if it exists:
//!    engines do not pass their environment to every runtime call (podman
//!    drops it for `start` and `delete`), a file next to the program is
//!    always found;
//! 3. `/etc/nri/nri-runc.toml`, if it exists;
//! 4. the defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Environment variable naming the configuration file.
pub const CONFIG_ENV: &str = "NRI_RUNC_CONFIG";
/// The configuration file by default.
pub const DEFAULT_CONFIG: &str = "/etc/nri/nri-runc.toml";

/// What to do when `nri-hostd` cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Unreachable {
    /// Run the container unchanged (logged on standard error), unless it
    /// needs a required plugin.
    #[default]
    PassThrough,
    /// Refuse to create containers.
    Fail,
}

/// The configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The real runtime: a path, or a name looked up in `PATH` (default
    /// `runc`).
    pub runtime: String,
    /// The daemon's control socket.
    pub control_socket: PathBuf,
    /// Policy when the daemon cannot be reached.
    pub on_unreachable: Unreachable,
    /// How long to wait for the daemon's answer (Go duration string).
    #[serde(deserialize_with = "go_duration")]
    pub timeout: Duration,
    /// Largest `config.json` accepted, in bytes.
    pub max_config_size: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            runtime: "runc".into(),
            control_socket: nri_hostd::protocol::DEFAULT_CONTROL_SOCKET.into(),
            on_unreachable: Unreachable::PassThrough,
            timeout: Duration::from_secs(30),
            max_config_size: 4 << 20,
        }
    }
}

/// A duration as containerd's and nri-hostd's files write them: a Go
/// duration string (`"30s"`, `"1m30s"`), or integer nanoseconds.
fn go_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Go(String),
        Nanos(u64),
    }
    match Text::deserialize(d)? {
        Text::Go(s) => nri_api::goparse::parse_duration(&s).map_err(serde::de::Error::custom),
        Text::Nanos(n) => Ok(Duration::from_nanos(n)),
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("cannot read {0}: {1}")]
    Read(String, #[source] std::io::Error),
    /// Invalid contents.
    #[error("invalid configuration {0}: {1}")]
    Parse(String, #[source] toml::de::Error),
}

impl Config {
    /// Reads the configuration of the program invoked as `argv0` (see the
    /// module documentation for the order).
    pub fn load(argv0: &str) -> Result<Config, ConfigError> {
        if let Some(p) = std::env::var_os(CONFIG_ENV) {
            return Self::read(Path::new(&p), false);
        }
        if argv0.contains('/') {
            let sidecar = PathBuf::from(format!("{argv0}.toml"));
            if sidecar.is_file() {
                return Self::read(&sidecar, false);
            }
        }
        Self::read(Path::new(DEFAULT_CONFIG), true)
    }

    fn read(path: &Path, missing_ok: bool) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| ConfigError::Parse(name, e)),
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::default())
            }
            Err(e) => Err(ConfigError::Read(name, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_unknown_keys() {
        let c: Config = toml::from_str(
            "runtime = \"/usr/bin/crun\"\non_unreachable = \"fail\"\ntimeout = \"5s\"",
        )
        .unwrap();
        assert_eq!(c.on_unreachable, Unreachable::Fail);
        assert_eq!(c.timeout, Duration::from_secs(5));
        let c: Config = toml::from_str("timeout = \"1m30s\"").unwrap();
        assert_eq!(c.timeout, Duration::from_secs(90));
        let c: Config = toml::from_str("timeout = 2000000000").unwrap();
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert!(toml::from_str::<Config>("timeout = \"5 parsecs\"").is_err());
        assert!(toml::from_str::<Config>("runtme = \"x\"").is_err());
        assert!(toml::from_str::<Config>("on_unreachable = \"maybe\"").is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(Config::read(&dir.path().join("x.toml"), false).is_err());
        assert_eq!(
            Config::read(&dir.path().join("x.toml"), true).unwrap(),
            Config::default()
        );
    }
}
