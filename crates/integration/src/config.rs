//! [`Config`]: whether NRI runs and how, as a runtime's configuration file
//! states it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nri_api::plugin::{
    DEFAULT_PLUGIN_CONFIG_PATH, DEFAULT_PLUGIN_PATH, DEFAULT_REGISTRATION_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT, DEFAULT_SOCKET_PATH,
};
use nri_validator::DefaultValidatorConfig;

use crate::policy::PolicyValidatorConfig;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Longest socket path a Unix socket address can hold (`sun_path` is 108
/// bytes including the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The NRI section of a runtime's configuration.
///
/// Field names are snake case; containerd's TOML names
/// (`plugin_registration_timeout`, `plugin_request_timeout`), containerd's
/// JSON names (`pluginPath`, `disableConnections`, `defaultValidator`, ...)
/// and moby's daemon.json names (`plugin-path`, `socket-path`, ...) are
/// accepted as aliases, and so is containerd's `disable` (the inverse of
/// `enable`; giving both with contradicting values is an error). Missing
/// fields, empty paths and zero timeouts take the defaults. Durations are
/// Go duration strings (`"2s"`) or integer nanoseconds. Unknown fields are
/// refused, so a misspelt option is an error rather than silently ignored.
///
/// The default is enabled, with the standard paths and timeouts, as in
/// containerd.
///
/// ```
/// use std::time::Duration;
/// use nri_integration::Config;
///
/// // containerd's section, [plugins."io.containerd.nri.v1.nri"]
/// let cfg: Config = toml::from_str(r#"
///     disable = false
///     socket_path = "/var/run/nri/nri.sock"
///     plugin_path = "/opt/nri/plugins"
///     plugin_registration_timeout = "5s"
///     plugin_request_timeout = "2s"
///     disable_connections = false
/// "#).unwrap();
/// assert!(cfg.enable);
/// assert_eq!(cfg.request_timeout, Duration::from_secs(2));
/// assert_eq!(cfg.plugin_config_path, std::path::Path::new("/etc/nri/conf.d"));
///
/// let off: Config = serde_json::from_str(r#"{"enable": false}"#).unwrap();
/// assert!(!off.enable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawConfig")]
pub struct Config {
    /// Whether NRI runs at all. When off, every entry point of
    /// [`Nri`](crate::Nri) is a no-op.
    pub enable: bool,
    /// Directory of plugins launched at start-up (default `/opt/nri/plugins`).
    pub plugin_path: PathBuf,
    /// Directory of their configuration files (default `/etc/nri/conf.d`).
    pub plugin_config_path: PathBuf,
    /// Socket external plugins connect to (default `/var/run/nri/nri.sock`).
    pub socket_path: PathBuf,
    /// Do not accept external plugins; only launched and builtin plugins run.
    pub disable_connections: bool,
    /// Permission bits of the socket (`socket_mode`, default `"0600"`),
    /// set whatever the runtime's umask; octal digits in a string, or a
    /// TOML octal integer (`0o660`). An nri-rs option: the reference leaves
    /// the mode to the umask.
    #[serde(with = "crate::socket::mode")]
    pub socket_mode: u32,
    /// Group (numeric gid) of the socket, and of its directory if NRI
    /// creates it (`socket_gid`, as containerd's `[grpc] gid`); `None`: the
    /// runtime's group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_gid: Option<u32>,
    /// Only peers with one of these uids (or with one of
    /// [`socket_allowed_gids`](Self::socket_allowed_gids)) may register
    /// on the socket (`socket_allowed_uids`); others are disconnected with
    /// a logged reason. Empty (the default): every peer the mode lets in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub socket_allowed_uids: Vec<u32>,
    /// Peers whose (effective) gid is one of these may register
    /// (`socket_allowed_gids`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub socket_allowed_gids: Vec<u32>,
    /// How long a connecting plugin may take to register (default 5 s).
    #[serde(with = "crate::duration::go")]
    pub registration_timeout: Duration,
    /// Deadline of each request to a plugin (default 2 s).
    #[serde(with = "crate::duration::go")]
    pub request_timeout: Duration,
    /// How long a call to a plugin polls for the reply before the runtime's
    /// thread sleeps until the reply wakes it; `"0s"` turns polling off
    /// (`plugin_busy_poll`, an nri-rs option). `None`: the adaptation's
    /// default, [`nri_adaptation::DEFAULT_BUSY_POLL`] on two or more CPUs and
    /// off on one (see
    /// [`AdaptationBuilder::plugin_busy_poll`](nri_adaptation::AdaptationBuilder::plugin_busy_poll)).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::duration::go::serialize_opt"
    )]
    pub busy_poll: Option<Duration>,
    /// A teardown event (StopContainer, RemoveContainer, StopPodSandbox,
    /// RemovePodSandbox) stops at the first plugin that fails it, as in the
    /// reference (`teardown_stops_at_first_error`, an nri-rs option). By
    /// default every subscribed plugin gets it and the first failure is
    /// reported after all were called.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub teardown_stops_at_first_error: bool,
    /// The builtin default validator; it runs only if present with
    /// `enable` set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_validator: Option<DefaultValidatorConfig>,
    /// The builtin policy validator (`nri-policy`); it runs only if present
    /// with `enable` set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_validator: Option<PolicyValidatorConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enable: true,
            plugin_path: DEFAULT_PLUGIN_PATH.into(),
            plugin_config_path: DEFAULT_PLUGIN_CONFIG_PATH.into(),
            socket_path: DEFAULT_SOCKET_PATH.into(),
            disable_connections: false,
            socket_mode: nri_adaptation::socket::DEFAULT_SOCKET_MODE,
            socket_gid: None,
            socket_allowed_uids: Vec::new(),
            socket_allowed_gids: Vec::new(),
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            busy_poll: None,
            teardown_stops_at_first_error: false,
            default_validator: None,
            policy_validator: None,
        }
    }
}

impl Config {
    /// A configuration with NRI turned off.
    pub fn disabled() -> Self {
        Config {
            enable: false,
            ..Config::default()
        }
    }

    /// Who may reach the socket, as [`socket_mode`](Self::socket_mode),
    /// [`socket_gid`](Self::socket_gid) and the allowed uids and gids say.
    ///
    /// ```
    /// let cfg: nri_integration::Config = toml::from_str(r#"
    ///     socket_mode = "0660"
    ///     socket_gid = 2000
    ///     socket_allowed_uids = [0]
    ///     socket_allowed_gids = [2000]
    /// "#).unwrap();
    /// let access = cfg.socket_access();
    /// assert_eq!((access.mode, access.group), (0o660, Some(2000)));
    /// assert_eq!((access.allowed_uids, access.allowed_gids), (vec![0], vec![2000]));
    /// ```
    pub fn socket_access(&self) -> crate::socket::SocketAccess {
        crate::socket::SocketAccess {
            mode: self.socket_mode,
            group: self.socket_gid,
            allowed_uids: self.socket_allowed_uids.clone(),
            allowed_gids: self.socket_allowed_gids.clone(),
        }
    }

    /// Checks what can be checked before NRI starts, without changing
    /// anything on disk: the socket path fits a socket address and its mode
    /// is permission bits only (unless external connections are disabled),
    /// and the plugin directories are
    /// directories that can be read if they exist (missing ones are fine:
    /// there is nothing to launch).
    ///
    /// [`Nri::start`](crate::Nri::start) and
    /// [`Nri::reload`](crate::Nri::reload) run this first; a configuration
    /// that fails here never replaces a running one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.disable_connections {
            let len = self.socket_path.as_os_str().len();
            if len > MAX_SOCKET_PATH {
                return Err(ConfigError::SocketPathTooLong {
                    path: self.socket_path.clone(),
                    len,
                });
            }
            if self.socket_path.is_dir() {
                return Err(ConfigError::SocketPathIsDirectory(self.socket_path.clone()));
            }
            self.socket_access()
                .check()
                .map_err(ConfigError::SocketAccess)?;
        }
        check_dir(&self.plugin_path)?;
        check_dir(&self.plugin_config_path)?;
        if let Some(p) = self.policy_validator.as_ref().filter(|p| p.enable) {
            p.load().map_err(ConfigError::Policy)?;
        }
        Ok(())
    }
}

fn check_dir(path: &Path) -> Result<(), ConfigError> {
    match std::fs::read_dir(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ConfigError::Directory {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What a configuration file may say; turned into a [`Config`] with the
/// defaults filled in.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    enable: Option<bool>,
    #[serde(default)]
    disable: Option<bool>,
    #[serde(default, alias = "pluginPath", alias = "plugin-path")]
    plugin_path: Option<PathBuf>,
    #[serde(default, alias = "pluginConfigPath", alias = "plugin-config-path")]
    plugin_config_path: Option<PathBuf>,
    #[serde(default, alias = "socketPath", alias = "socket-path")]
    socket_path: Option<PathBuf>,
    #[serde(default, alias = "disableConnections", alias = "disable-connections")]
    disable_connections: Option<bool>,
    #[serde(
        default,
        alias = "socketMode",
        alias = "socket-mode",
        deserialize_with = "crate::socket::mode::deserialize_opt"
    )]
    socket_mode: Option<u32>,
    #[serde(default, alias = "socketGid", alias = "socket-gid")]
    socket_gid: Option<u32>,
    #[serde(default, alias = "socketAllowedUids", alias = "socket-allowed-uids")]
    socket_allowed_uids: Option<Vec<u32>>,
    #[serde(default, alias = "socketAllowedGids", alias = "socket-allowed-gids")]
    socket_allowed_gids: Option<Vec<u32>>,
    #[serde(
        default,
        alias = "plugin_registration_timeout",
        alias = "pluginRegistrationTimeout",
        deserialize_with = "crate::duration::go::deserialize_opt"
    )]
    registration_timeout: Option<Duration>,
    #[serde(
        default,
        alias = "plugin_request_timeout",
        alias = "pluginRequestTimeout",
        deserialize_with = "crate::duration::go::deserialize_opt"
    )]
    request_timeout: Option<Duration>,
    #[serde(
        default,
        alias = "plugin_busy_poll",
        alias = "pluginBusyPoll",
        alias = "plugin-busy-poll",
        deserialize_with = "crate::duration::go::deserialize_opt"
    )]
    busy_poll: Option<Duration>,
    #[serde(
        default,
        alias = "teardownStopsAtFirstError",
        alias = "teardown-stops-at-first-error"
    )]
    teardown_stops_at_first_error: Option<bool>,
    #[serde(default, alias = "defaultValidator")]
    default_validator: Option<DefaultValidatorConfig>,
    #[serde(default, alias = "policyValidator")]
    policy_validator: Option<PolicyValidatorConfig>,
}

impl TryFrom<RawConfig> for Config {
    type Error = ConfigError;

    fn try_from(raw: RawConfig) -> Result<Self, ConfigError> {
        let enable = match (raw.enable, raw.disable) {
            (Some(e), Some(d)) if e == d => return Err(ConfigError::EnableConflict),
            (Some(e), _) => e,
            (None, Some(d)) => !d,
            (None, None) => true,
        };
        let d = Config::default();
        let path = |p: Option<PathBuf>, default: PathBuf| {
            p.filter(|p| !p.as_os_str().is_empty()).unwrap_or(default)
        };
        let timeout =
            |t: Option<Duration>, default: Duration| t.filter(|t| !t.is_zero()).unwrap_or(default);
        Ok(Config {
            enable,
            plugin_path: path(raw.plugin_path, d.plugin_path),
            plugin_config_path: path(raw.plugin_config_path, d.plugin_config_path),
            socket_path: path(raw.socket_path, d.socket_path),
            disable_connections: raw.disable_connections.unwrap_or(false),
            socket_mode: raw.socket_mode.unwrap_or(d.socket_mode),
            socket_gid: raw.socket_gid,
            socket_allowed_uids: raw.socket_allowed_uids.unwrap_or_default(),
            socket_allowed_gids: raw.socket_allowed_gids.unwrap_or_default(),
            registration_timeout: timeout(raw.registration_timeout, d.registration_timeout),
            request_timeout: timeout(raw.request_timeout, d.request_timeout),
            busy_poll: raw.busy_poll,
            teardown_stops_at_first_error: raw.teardown_stops_at_first_error.unwrap_or(false),
            default_validator: raw.default_validator,
            policy_validator: raw.policy_validator,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teardown_stop_at_first_error_is_an_option() {
        let cfg: Config = toml::from_str("teardown_stops_at_first_error = true").unwrap();
        assert!(cfg.teardown_stops_at_first_error);
        let cfg: Config = serde_json::from_str(r#"{"teardownStopsAtFirstError": true}"#).unwrap();
        assert!(cfg.teardown_stops_at_first_error);
        assert!(!Config::default().teardown_stops_at_first_error);
    }

    #[test]
    fn empty_input_is_the_default() {
        let cfg: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, Config::default());
        assert!(cfg.enable);
    }

    #[test]
    fn containerd_toml_names() {
        let cfg: Config = toml::from_str(
            r#"
            disable = true
            socket_path = "/run/x.sock"
            plugin_path = "/p"
            plugin_config_path = "/c"
            plugin_registration_timeout = "1m"
            plugin_request_timeout = "1.5s"
            disable_connections = true
            [default_validator]
            enable = true
            reject_oci_hook_adjustment = true
            "#,
        )
        .unwrap();
        assert!(!cfg.enable);
        assert_eq!(cfg.socket_path, Path::new("/run/x.sock"));
        assert_eq!(cfg.plugin_path, Path::new("/p"));
        assert_eq!(cfg.plugin_config_path, Path::new("/c"));
        assert_eq!(cfg.registration_timeout, Duration::from_secs(60));
        assert_eq!(cfg.request_timeout, Duration::from_millis(1500));
        assert!(cfg.disable_connections);
        let v = cfg.default_validator.unwrap();
        assert!(v.enable && v.reject_oci_hook_adjustment);
    }

    #[test]
    fn containerd_json_and_moby_names() {
        let cfg: Config = serde_json::from_str(
            r#"{"disable": false, "socketPath": "/s", "pluginPath": "/p",
                "pluginConfigPath": "/c", "pluginRegistrationTimeout": 3000000000,
                "pluginRequestTimeout": "250ms", "disableConnections": true,
                "defaultValidator": {"enable": true}}"#,
        )
        .unwrap();
        assert!(cfg.enable && cfg.disable_connections);
        assert_eq!(cfg.registration_timeout, Duration::from_secs(3));
        assert_eq!(cfg.request_timeout, Duration::from_millis(250));
        assert!(cfg.default_validator.unwrap().enable);

        let moby: Config = serde_json::from_str(
            r#"{"enable": true, "plugin-path": "/p", "plugin-config-path": "/c",
                "socket-path": "/s"}"#,
        )
        .unwrap();
        assert_eq!(moby.plugin_path, Path::new("/p"));
        assert_eq!(moby.plugin_config_path, Path::new("/c"));
        assert_eq!(moby.socket_path, Path::new("/s"));
    }

    #[test]
    fn empty_values_take_defaults() {
        let cfg: Config = toml::from_str(
            "socket_path = \"\"\nplugin_request_timeout = \"0s\"\nregistration_timeout = 0",
        )
        .unwrap();
        assert_eq!(cfg.socket_path, Path::new(DEFAULT_SOCKET_PATH));
        assert_eq!(cfg.request_timeout, DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(cfg.registration_timeout, DEFAULT_REGISTRATION_TIMEOUT);
    }

    #[test]
    fn bad_input_is_refused_clearly() {
        let err = serde_json::from_str::<Config>(r#"{"enable": true, "disable": true}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("both"), "{err}");
        let err = serde_json::from_str::<Config>(r#"{"socket_pth": "/x"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("socket_pth"), "{err}");
        let err = serde_json::from_str::<Config>(r#"{"request_timeout": "-1s"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("negative"), "{err}");
        assert!(serde_json::from_str::<Config>(r#"{"request_timeout": -5}"#).is_err());
        assert!(serde_json::from_str::<Config>(r#"{"request_timeout": true}"#).is_err());
    }

    #[test]
    fn busy_poll_is_the_default_unless_given() {
        assert_eq!(Config::default().busy_poll, None);
        let cfg: Config = toml::from_str("plugin_busy_poll = \"50us\"").unwrap();
        assert_eq!(cfg.busy_poll, Some(Duration::from_micros(50)));
        // Zero is kept: it turns polling off rather than meaning the default.
        let cfg: Config = serde_json::from_str(r#"{"plugin-busy-poll": "0s"}"#).unwrap();
        assert_eq!(cfg.busy_poll, Some(Duration::ZERO));
        let cfg: Config = serde_json::from_str(r#"{"pluginBusyPoll": 200000}"#).unwrap();
        assert_eq!(cfg.busy_poll, Some(Duration::from_micros(200)));
        let err = serde_json::from_str::<Config>(r#"{"busy_poll": "-1us"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("negative"), "{err}");
        let json = serde_json::to_string(&Config::default()).unwrap();
        assert!(!json.contains("busy_poll"), "{json}");
    }

    #[test]
    fn socket_access_words() {
        let d = Config::default();
        assert_eq!(d.socket_mode, 0o600);
        assert_eq!(d.socket_access(), crate::socket::SocketAccess::default());
        let cfg: Config = toml::from_str(
            "socket_mode = \"0660\"\nsocket_gid = 7\nsocket_allowed_uids = [0, 1000]\nsocket_allowed_gids = [7]",
        )
        .unwrap();
        assert_eq!(
            cfg.socket_access(),
            crate::socket::SocketAccess::default()
                .mode(0o660)
                .group(7)
                .allow_uids([0, 1000])
                .allow_gids([7])
        );
        let cfg: Config = toml::from_str("socket_mode = 0o640").unwrap();
        assert_eq!(cfg.socket_mode, 0o640);
        let cfg: Config = serde_json::from_str(
            r#"{"socketMode": "0o660", "socketGid": 7, "socketAllowedUids": [0],
                "socketAllowedGids": [7]}"#,
        )
        .unwrap();
        assert_eq!((cfg.socket_mode, cfg.socket_gid), (0o660, Some(7)));
        let moby: Config =
            serde_json::from_str(r#"{"socket-mode": "600", "socket-allowed-uids": [5]}"#).unwrap();
        assert_eq!(
            (moby.socket_mode, moby.socket_allowed_uids),
            (0o600, vec![5])
        );
        for (bad, words) in [
            ("socket_mode = \"0888\"", "octal digits"),
            ("socket_mode = \"4755\"", "only permission bits"),
            // A decimal 660 is 0o1224: not a mode.
            ("socket_mode = 660", "only permission bits"),
            ("socket_mode = -1", "negative"),
            ("socket_allowed_uids = [-1]", "socket_allowed_uids"),
        ] {
            let err = toml::from_str::<Config>(bad).unwrap_err().to_string();
            assert!(err.contains(words), "{bad}: {err}");
        }
        let err = Config {
            socket_mode: 0o2660,
            ..Config::default()
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::SocketAccess(_)), "{err}");
        assert!(err.to_string().contains("0o2660"), "{err}");
    }

    #[test]
    fn serializes_and_reads_back() {
        let cfg = Config {
            enable: false,
            request_timeout: Duration::from_millis(1500),
            busy_poll: Some(Duration::from_micros(100)),
            socket_mode: 0o640,
            socket_gid: Some(5),
            socket_allowed_uids: vec![0],
            default_validator: Some(DefaultValidatorConfig {
                enable: true,
                ..Default::default()
            }),
            ..Config::default()
        };
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(json.contains(r#""request_timeout":"1.5s""#), "{json}");
        assert!(json.contains(r#""socket_mode":"0640""#), "{json}");
        assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), cfg);
        let text = toml::to_string(&cfg).unwrap();
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), cfg);
    }

    #[test]
    fn validate_checks_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let ok = Config {
            plugin_path: dir.path().join("missing"),
            plugin_config_path: dir.path().into(),
            socket_path: dir.path().join("nri.sock"),
            ..Config::default()
        };
        ok.validate().unwrap();

        let err = Config {
            plugin_path: file.clone(),
            ..ok.clone()
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::Directory { ref path, .. } if *path == file));

        let long = Config {
            socket_path: dir.path().join("s".repeat(120)),
            ..ok.clone()
        };
        assert!(matches!(
            long.validate(),
            Err(ConfigError::SocketPathTooLong { .. })
        ));
        // Without external connections the socket path does not matter.
        Config {
            disable_connections: true,
            ..long
        }
        .validate()
        .unwrap();
        assert!(matches!(
            Config {
                socket_path: dir.path().into(),
                ..ok
            }
            .validate(),
            Err(ConfigError::SocketPathIsDirectory(_))
        ));
    }
}
