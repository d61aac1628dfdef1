//! The control protocol between the `nri-runc` wrapper and `nri-hostd`.
//!
//! One request and one response per connection, over a unix stream socket.
//! Each message is a frame: a 4-byte big-endian length, then that many
//! bytes of JSON ([`Request`] or [`Response`]). Frames are limited to
//! [`MAX_FRAME`] bytes; a longer announced length is refused before
//! anything is read or allocated.
//!
//! The wrapper side is blocking ([`call`]): it runs once per runtime
//! command and must start fast. The daemon side is async
//! ([`read_frame_async`], [`write_frame_async`]).
//!
//! ```
//! use nri_hostd::protocol::{decode, encode, Request};
//!
//! let frame = encode(&Request::Ping).unwrap();
//! assert_eq!(&frame[..4], &((frame.len() - 4) as u32).to_be_bytes());
//! let back: Request = decode(&frame[4..]).unwrap();
//! assert!(matches!(back, Request::Ping));
//! ```

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest frame accepted in either direction (16 MiB).
pub const MAX_FRAME: usize = 16 << 20;

/// The control socket `nri-runc` talks to by default.
pub const DEFAULT_CONTROL_SOCKET: &str = "/var/run/nri/nri-hostd.sock";

/// The real runtime a container was created with, as the engine called it:
/// what `nri-hostd` needs to run `update`, `kill` or `list` on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RuntimeRef {
    /// The real runtime's executable (absolute path).
    pub path: String,
    /// The global flags the engine gave (`--root R`, `--systemd-cgroup`, ...),
    /// as they appeared before the command.
    #[serde(default)]
    pub global_args: Vec<String>,
}

/// What the wrapper tells or asks the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon there?
    Ping,
    /// Which plugins run: answered with [`Response::Plugins`]
    /// (`nri-hostd status`).
    Plugins,
    /// The builtin policy validator's audit records: answered with
    /// [`Response::Audit`] (`nri-hostd audit [CONTAINER-ID]`).
    Audit {
        /// One container's record; `None` for every container kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// `create`: the bundle's spec as read from `config.json`. The daemon
    /// runs RunPodSandbox (first container of a pod) and CreateContainer,
    /// and answers [`Response::Spec`] with the adjusted spec.
    Create {
        /// Container id.
        id: String,
        /// Bundle directory.
        bundle: String,
        /// The runtime that will create it.
        runtime: RuntimeRef,
        /// The spec, as found in `config.json`.
        spec: Value,
    },
    /// The real `create` ran: PostCreateContainer if `ok`, else the
    /// creation is undone for plugins (StopContainer, RemoveContainer).
    Created {
        /// Container id.
        id: String,
        /// Whether the real runtime succeeded.
        ok: bool,
    },
    /// `start` is about to run (StartContainer).
    Start {
        /// Container id.
        id: String,
    },
    /// The real `start` ran (PostStartContainer if `ok`).
    Started {
        /// Container id.
        id: String,
        /// Whether the real runtime succeeded.
        ok: bool,
    },
    /// The real `kill` delivered a signal; the daemon watches for the
    /// container to stop (StopContainer, StopPodSandbox for a sandbox).
    Killed {
        /// Container id.
        id: String,
    },
    /// The real `delete` removed the container (RemoveContainer, and the
    /// pod events when the pod's last container went).
    Deleted {
        /// Container id.
        id: String,
    },
    /// `update --resources`: the requested resources (OCI JSON). Answered
    /// with [`Response::Resources`], what to really apply.
    Update {
        /// Container id.
        id: String,
        /// OCI `linux.resources` JSON.
        resources: Value,
    },
    /// The real `update` ran (PostUpdateContainer if `ok`).
    Updated {
        /// Container id.
        id: String,
        /// Whether the real runtime succeeded.
        ok: bool,
    },
    /// `pause` (`paused = true`) or `resume` ran.
    Paused {
        /// Container id.
        id: String,
        /// Paused or resumed.
        paused: bool,
    },
}

impl Request {
    /// Whether the request only reports what the real runtime did
    /// (`created`, `started`, `killed`, `deleted`, `updated`, `paused`):
    /// its answer is always [`Response::Ok`], so the wrapper sends it with
    /// [`notify`] and does not wait.
    ///
    /// ```
    /// use nri_hostd::protocol::Request;
    ///
    /// assert!(Request::Deleted { id: "c1".into() }.is_notification());
    /// assert!(!Request::Start { id: "c1".into() }.is_notification());
    /// ```
    pub fn is_notification(&self) -> bool {
        matches!(
            self,
            Request::Created { .. }
                | Request::Started { .. }
                | Request::Killed { .. }
                | Request::Deleted { .. }
                | Request::Updated { .. }
                | Request::Paused { .. }
        )
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    /// Done; nothing to change.
    Ok,
    /// [`Request::Plugins`]: the plugins that run, and the pre-installed
    /// ones (programs of the plugin directory) that do not: they failed to
    /// start, register or configure, or exited, and containers are created
    /// without them.
    Plugins {
        /// Full names (`NN-name`) of the running plugins, in invocation order.
        running: Vec<String>,
        /// Full names of pre-installed plugins that are not running.
        not_running: Vec<String>,
    },
    /// [`Request::Audit`]: the audit records, one JSON object per string
    /// (`nri_policy::audit_record`), oldest first.
    Audit {
        /// The records.
        records: Vec<String>,
    },
    /// [`Request::Create`]: the spec to write, `None` when unchanged.
    Spec {
        /// The adjusted spec.
        spec: Option<Value>,
    },
    /// [`Request::Update`]: the resources to apply.
    Resources {
        /// OCI `linux.resources` JSON.
        resources: Value,
    },
    /// Refused: a plugin failed or rejected the container. The message is
    /// the plugin's, word for word.
    Rejected {
        /// Why.
        message: String,
    },
    /// The request could not be handled (bad request, daemon problem).
    Error {
        /// Why.
        message: String,
    },
}

/// Errors of the control protocol.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The daemon's socket cannot be reached (missing, refused): the
    /// daemon is down.
    ///
    /// The text says why in words of its own, never the system's
    /// `No such file or directory` or `Permission denied`: engines read
    /// those in an OCI runtime's error output as the runtime binary itself
    /// missing or not executable (podman exits 127, "OCI runtime attempted
    /// to invoke a command that was not found").
    ///
    /// ```
    /// use nri_hostd::protocol::{call, Request};
    /// use std::time::Duration;
    ///
    /// let err = call("/nonexistent/nri-hostd.sock".as_ref(), &Request::Ping, Duration::from_secs(1))
    ///     .unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "cannot connect to nri-hostd at /nonexistent/nri-hostd.sock: \
    ///      the socket is missing (is nri-hostd running?)"
    /// );
    /// ```
    #[error(
        "cannot connect to nri-hostd at {path}: {}",
        unreachable_reason(source)
    )]
    Unreachable {
        /// The socket.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing failed, or the peer did not answer in time.
    #[error("nri-hostd connection failed: {0}")]
    Io(#[from] std::io::Error),
    /// A frame announced more than [`MAX_FRAME`] bytes.
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME} bytes")]
    TooLarge(usize),
    /// A frame was not a valid message.
    #[error("malformed message from nri-hostd peer: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Why the daemon's socket could not be connected to, in words that do not
/// match what engines take for a missing or non-executable runtime.
fn unreachable_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => "the socket is missing (is nri-hostd running?)".into(),
        ErrorKind::ConnectionRefused => {
            "connection refused: nothing listens on the socket (is nri-hostd running?)".into()
        }
        ErrorKind::PermissionDenied => {
            "access to the socket refused (check its owner and mode; nri-runc runs as the engine's user)"
                .into()
        }
        _ => {
            let text = e.to_string();
            let lower = text.to_ascii_lowercase();
            if ["no such file", "not found", "permission denied", "operation not permitted"]
                .iter()
                .any(|w| lower.contains(w))
            {
                format!("system error {}", e.raw_os_error().unwrap_or(-1))
            } else {
                text
            }
        }
    }
}

impl ProtocolError {
    /// True when the daemon could not be reached at all (as opposed to a
    /// daemon that answered badly or not in time).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ProtocolError::Unreachable { .. })
    }
}

/// A message as a complete frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtocolError> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(ProtocolError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// A message from a frame's payload.
pub fn decode<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, ProtocolError> {
    Ok(serde_json::from_slice(payload)?)
}

fn frame_len(header: [u8; 4]) -> Result<usize, ProtocolError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(ProtocolError::TooLarge(len));
    }
    Ok(len)
}

/// Reads one frame's payload (blocking).
pub fn read_frame(r: &mut impl Read) -> Result<Vec<u8>, ProtocolError> {
    let mut header = [0u8; 4];
    r.read_exact(&mut header)?;
    let mut payload = vec![0u8; frame_len(header)?];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// Reads one frame's payload (async).
pub async fn read_frame_async(
    r: &mut (impl tokio::io::AsyncRead + Unpin),
) -> Result<Vec<u8>, ProtocolError> {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 4];
    r.read_exact(&mut header).await?;
    let mut payload = vec![0u8; frame_len(header)?];
    r.read_exact(&mut payload).await?;
    Ok(payload)
}

/// Writes one message as a frame (async).
pub async fn write_frame_async<T: Serialize>(
    w: &mut (impl tokio::io::AsyncWrite + Unpin),
    msg: &T,
) -> Result<(), ProtocolError> {
    use tokio::io::AsyncWriteExt;
    w.write_all(&encode(msg)?).await?;
    w.flush().await?;
    Ok(())
}

/// Sends `request` to the daemon at `socket` and waits for its response,
/// at most `timeout` for each of connect, write and read.
///
/// ```no_run
/// use std::time::Duration;
/// use nri_hostd::protocol::{call, Request, Response};
///
/// match call("/run/nri-hostd/control.sock".as_ref(), &Request::Ping, Duration::from_secs(2)) {
///     Ok(Response::Ok) => println!("daemon is up"),
///     Ok(other) => println!("unexpected answer {other:?}"),
///     Err(e) if e.is_unreachable() => println!("daemon is down: {e}"),
///     Err(e) => println!("daemon failed: {e}"),
/// }
/// ```
pub fn call(
    socket: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Response, ProtocolError> {
    let mut stream = send(socket, request, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    let payload = read_frame(&mut stream)?;
    decode(&payload)
}

/// Connects to `socket` and writes `request`, at most `timeout` for each.
fn send(socket: &Path, request: &Request, timeout: Duration) -> Result<UnixStream, ProtocolError> {
    let mut stream = UnixStream::connect(socket).map_err(|source| ProtocolError::Unreachable {
        path: socket.display().to_string(),
        source,
    })?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(&encode(request)?)?;
    Ok(stream)
}

/// Sends `request` to the daemon at `socket` without waiting for the
/// answer, at most `timeout` for connect and write. The daemon handles
/// requests in the order their connections were accepted, so whatever the
/// caller (or a later process) sends next is handled after this one.
///
/// ```no_run
/// use std::time::Duration;
/// use nri_hostd::protocol::{notify, Request};
///
/// let deleted = Request::Deleted { id: "c1".into() };
/// if let Err(e) = notify("/run/nri-hostd/control.sock".as_ref(), &deleted, Duration::from_secs(2)) {
///     eprintln!("nri-hostd did not get it: {e}");
/// }
/// ```
pub fn notify(socket: &Path, request: &Request, timeout: Duration) -> Result<(), ProtocolError> {
    send(socket, request, timeout).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// podman reads these words in a runtime's error output as the runtime
    /// binary missing (exit 127) or not executable (exit 126).
    const ENGINE_TRIGGERS: [&str; 4] = [
        "no such file or directory",
        "executable file not found",
        "permission denied",
        "operation not permitted",
    ];

    #[test]
    fn unreachable_daemon_is_not_worded_as_a_missing_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("control.sock");
        let err = call(&missing, &Request::Ping, Duration::from_secs(1)).unwrap_err();
        assert!(err.is_unreachable());
        let text = err.to_string();
        assert!(
            text.ends_with("the socket is missing (is nri-hostd running?)"),
            "{text}"
        );
        // A socket file nobody listens on: refused.
        let listener = std::os::unix::net::UnixListener::bind(&missing).unwrap();
        drop(listener);
        let refused = call(&missing, &Request::Ping, Duration::from_secs(1)).unwrap_err();
        let refused_text = refused.to_string();
        assert!(
            refused_text.contains("connection refused"),
            "{refused_text}"
        );
        for kind in [
            std::io::ErrorKind::PermissionDenied,
            std::io::ErrorKind::NotFound,
            std::io::ErrorKind::ConnectionRefused,
        ] {
            let e = ProtocolError::Unreachable {
                path: "/s".into(),
                source: kind.into(),
            };
            let t = e.to_string().to_ascii_lowercase();
            for w in ENGINE_TRIGGERS {
                assert!(!t.contains(w), "{t:?} contains {w:?}");
            }
        }
        for t in [text, refused_text] {
            let t = t.to_ascii_lowercase();
            for w in ENGINE_TRIGGERS {
                assert!(!t.contains(w), "{t:?} contains {w:?}");
            }
        }
        let eperm = ProtocolError::Unreachable {
            path: "/s".into(),
            source: std::io::Error::from_raw_os_error(1),
        };
        assert_eq!(eperm.to_string(), "cannot connect to nri-hostd at /s: access to the socket refused (check its owner and mode; nri-runc runs as the engine's user)");
    }

    #[test]
    fn frames_round_trip() {
        let req = Request::Create {
            id: "c1".into(),
            bundle: "/b".into(),
            runtime: RuntimeRef {
                path: "/usr/sbin/runc".into(),
                global_args: vec!["--root".into(), "/r".into()],
            },
            spec: serde_json::json!({"ociVersion": "1.0.2"}),
        };
        let frame = encode(&req).unwrap();
        let payload = read_frame(&mut &frame[..]).unwrap();
        match decode::<Request>(&payload).unwrap() {
            Request::Create { id, runtime, .. } => {
                assert_eq!(id, "c1");
                assert_eq!(runtime.global_args, ["--root", "/r"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn oversized_and_garbage_frames_are_refused() {
        let header = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(
            read_frame(&mut &header[..]),
            Err(ProtocolError::TooLarge(_))
        ));
        let mut frame = 5u32.to_be_bytes().to_vec();
        frame.extend_from_slice(b"hello");
        let payload = read_frame(&mut &frame[..]).unwrap();
        assert!(matches!(
            decode::<Response>(&payload),
            Err(ProtocolError::Malformed(_))
        ));
        // A truncated frame is an I/O error, not a hang or a panic.
        let short = [0u8, 0, 0, 9, b'{'];
        assert!(matches!(
            read_frame(&mut &short[..]),
            Err(ProtocolError::Io(_))
        ));
    }

    #[test]
    fn a_missing_socket_is_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let err = call(
            &dir.path().join("none.sock"),
            &Request::Ping,
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert!(err.is_unreachable(), "{err}");
    }
}
