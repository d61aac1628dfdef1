//! The daemon's TOML configuration: containerd's NRI keys at the top level,
//! our own options in `[hostd]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Where the configuration is read from by default.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/nri/nri-hostd.toml";
pub use crate::protocol::DEFAULT_CONTROL_SOCKET;
/// The state file by default.
pub const DEFAULT_STATE_FILE: &str = "/var/run/nri/nri-hostd.state.json";

/// The whole configuration file.
///
/// The top-level keys are containerd's NRI keys
/// (`[plugins."io.containerd.nri.v1.nri"]`): `disable`, `plugin_path`,
/// `plugin_config_path`, `socket_path`, `plugin_registration_timeout`,
/// `plugin_request_timeout`, `disable_connections`, and the
/// `[default_validator]` table. Our own options live in `[hostd]`.
///
/// ```
/// use nri_hostd::HostdConfig;
///
/// let cfg = HostdConfig::parse(r#"
///     plugin_path = "/opt/nri/plugins"
///     plugin_request_timeout = "2s"
///     [default_validator]
///     enable = true
///     [hostd]
///     control_socket = "/run/nri/hostd.sock"
///     exit_poll_interval = "500ms"
/// "#).unwrap();
/// assert_eq!(cfg.nri.request_timeout, std::time::Duration::from_secs(2));
/// assert!(cfg.nri.default_validator.unwrap().enable);
/// assert_eq!(cfg.hostd.control_socket, std::path::Path::new("/run/nri/hostd.sock"));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostdConfig {
    /// NRI itself, as containerd configures it.
    pub nri: nri_integration::Config,
    /// The daemon's own options.
    pub hostd: Options,
}

/// `[hostd]`: options of the daemon that containerd does not have.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// The socket `nri-runc` connects to.
    pub control_socket: PathBuf,
    /// Permission bits of the control socket (`control_socket_mode`,
    /// default `"0600"`), set whatever the umask.
    #[serde(deserialize_with = "nri_integration::socket::mode::deserialize")]
    pub control_socket_mode: u32,
    /// Group (gid) of the control socket, and of its directory if the
    /// daemon creates it (`control_socket_gid`).
    pub control_socket_gid: Option<u32>,
    /// Only peers with one of these uids, or with one of
    /// `control_allowed_gids`, are served (`control_allowed_uids`); others
    /// are disconnected with a logged reason. Empty: every peer the mode
    /// lets in.
    pub control_allowed_uids: Vec<u32>,
    /// Peers whose (effective) gid is one of these are served
    /// (`control_allowed_gids`).
    pub control_allowed_gids: Vec<u32>,
    /// The file the known pods and containers are kept in (replaced
    /// atomically on every change).
    pub state_file: PathBuf,
    /// How often running containers are checked for exits (StopContainer);
    /// `0s` turns the periodic check off (kills are still followed).
    #[serde(deserialize_with = "nri_integration::duration::go::deserialize")]
    pub exit_poll_interval: Duration,
    /// Name and version plugins see in Configure.
    pub runtime_name: String,
    /// Where to serve Prometheus/OpenMetrics metrics of the plugin calls
    /// (`GET /metrics`): `PORT` or `:PORT` (loopback) or `IP:PORT`. Empty
    /// (the default) serves none.
    pub metrics_address: String,
    /// Where to export the trace spans of NRI requests and plugin calls
    /// (OpenTelemetry, OTLP/HTTP protobuf): `host:port` or
    /// `http://host:port` (`/v1/traces` is added) or a URL with its path.
    /// Empty (the default) exports none. Needs the `otel` feature (on by
    /// default).
    pub otlp_endpoint: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            control_socket: DEFAULT_CONTROL_SOCKET.into(),
            control_socket_mode: nri_integration::socket::DEFAULT_SOCKET_MODE,
            control_socket_gid: None,
            control_allowed_uids: Vec::new(),
            control_allowed_gids: Vec::new(),
            state_file: DEFAULT_STATE_FILE.into(),
            exit_poll_interval: Duration::from_secs(2),
            runtime_name: "nri-hostd".into(),
            metrics_address: String::new(),
            otlp_endpoint: String::new(),
        }
    }
}

impl Options {
    /// Who may reach the control socket: `control_socket_mode`,
    /// `control_socket_gid`, `control_allowed_uids` and
    /// `control_allowed_gids`.
    ///
    /// ```
    /// let cfg = nri_hostd::HostdConfig::parse(r#"
    ///     [hostd]
    ///     control_socket_mode = "0660"
    ///     control_socket_gid = 2000
    ///     control_allowed_uids = [0]
    /// "#).unwrap();
    /// let access = cfg.hostd.control_access();
    /// assert_eq!((access.mode, access.group), (0o660, Some(2000)));
    /// assert_eq!(access.allowed_uids, [0]);
    /// ```
    pub fn control_access(&self) -> nri_integration::socket::SocketAccess {
        nri_integration::socket::SocketAccess {
            mode: self.control_socket_mode,
            group: self.control_socket_gid,
            allowed_uids: self.control_allowed_uids.clone(),
            allowed_gids: self.control_allowed_gids.clone(),
        }
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid configuration.
    #[error("invalid configuration: {0}")]
    Parse(#[from] toml::de::Error),
    /// `[hostd] otlp_endpoint` cannot be used.
    #[error("invalid [hostd] otlp_endpoint: {0}")]
    OtlpEndpoint(String),
}

impl HostdConfig {
    /// Parses the TOML text of a configuration file.
    pub fn parse(text: &str) -> Result<HostdConfig, ConfigFileError> {
        let mut table: toml::Table = toml::from_str(text)?;
        let hostd = match table.remove("hostd") {
            Some(v) => v.try_into()?,
            None => Options::default(),
        };
        let nri = toml::Value::Table(table).try_into()?;
        check_otlp_endpoint(&hostd.otlp_endpoint)?;
        Ok(HostdConfig { nri, hostd })
    }

    /// Reads the configuration file at `path`; a missing file at the
    /// default path gives the defaults.
    pub fn load(path: &Path) -> Result<HostdConfig, ConfigFileError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && path == Path::new(DEFAULT_CONFIG_PATH) =>
            {
                Ok(HostdConfig::default())
            }
            Err(source) => Err(ConfigFileError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }
}

/// An `otlp_endpoint` is usable: empty, or an endpoint `nri_otel` takes
/// (and the daemon was built with the `otel` feature).
fn check_otlp_endpoint(endpoint: &str) -> Result<(), ConfigFileError> {
    if endpoint.is_empty() {
        return Ok(());
    }
    #[cfg(feature = "otel")]
    return nri_integration::otel::traces_url(endpoint)
        .map(drop)
        .map_err(|e| ConfigFileError::OtlpEndpoint(e.to_string()));
    #[cfg(not(feature = "otel"))]
    Err(ConfigFileError::OtlpEndpoint(
        "nri-hostd was built without the otel feature".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "otel")]
    #[test]
    fn otlp_endpoint_is_checked() {
        let cfg = HostdConfig::parse("[hostd]\notlp_endpoint = \"127.0.0.1:4318\"").unwrap();
        assert_eq!(cfg.hostd.otlp_endpoint, "127.0.0.1:4318");
        let err = HostdConfig::parse("[hostd]\notlp_endpoint = \"https://c:4318\"").unwrap_err();
        assert!(
            matches!(&err, ConfigFileError::OtlpEndpoint(m) if m.contains("plain http only")),
            "{err}"
        );
    }

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(HostdConfig::parse("").unwrap(), HostdConfig::default());
    }

    #[test]
    fn containerd_keys_and_unknown_keys() {
        let cfg = HostdConfig::parse(
            "disable_connections = true\nsocket_path = \"/x.sock\"\nplugin_registration_timeout = \"1s\"",
        )
        .unwrap();
        assert!(cfg.nri.disable_connections);
        assert_eq!(cfg.nri.registration_timeout, Duration::from_secs(1));
        let err = HostdConfig::parse("plugin_pth = \"/x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugin_pth"), "{err}");
        let err = HostdConfig::parse("[hostd]\ncontrol_sock = \"/x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("control_sock"), "{err}");
        assert!(HostdConfig::parse("[hostd]\nexit_poll_interval = \"-1s\"").is_err());
    }

    #[test]
    fn control_socket_access_words() {
        let d = HostdConfig::default();
        assert_eq!(
            d.hostd.control_access(),
            nri_integration::socket::SocketAccess::default()
        );
        let cfg = HostdConfig::parse(
            "socket_mode = \"0660\"\nsocket_gid = 9\nsocket_allowed_uids = [0]\n\
             [hostd]\ncontrol_socket_mode = 0o640\ncontrol_socket_gid = 7\n\
             control_allowed_uids = [0, 5]\ncontrol_allowed_gids = [7]",
        )
        .unwrap();
        let c = cfg.hostd.control_access();
        assert_eq!((c.mode, c.group), (0o640, Some(7)));
        assert_eq!((c.allowed_uids, c.allowed_gids), (vec![0, 5], vec![7]));
        let n = cfg.nri.socket_access();
        assert_eq!((n.mode, n.group, n.allowed_uids), (0o660, Some(9), vec![0]));
        let err = HostdConfig::parse("[hostd]\ncontrol_socket_mode = \"0o4700\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("only permission bits"), "{err}");
    }

    #[test]
    fn missing_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            HostdConfig::load(&dir.path().join("none.toml")),
            Err(ConfigFileError::Read { .. })
        ));
    }
}
