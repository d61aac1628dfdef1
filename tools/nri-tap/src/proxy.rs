//! Forwarding: two byte pumps per plugin connection, each writing what it
//! read to the other side first and only then decoding its copy.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde_json::Map;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use crate::decode::Deframer;
use crate::record::{Direction, Recorder, Session};

/// Why the tap could not run.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// Listening on the plugin-side socket failed.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `NRI_PLUGIN_SOCKET` is missing or not a socket descriptor.
    #[error("NRI_PLUGIN_SOCKET: {0}")]
    SocketEnv(String),
    /// Creating the plugin's socket pair or starting the plugin failed.
    #[error("cannot start plugin {program}: {source}")]
    Spawn {
        /// The plugin command.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

const BUF: usize = 64 * 1024;

/// Copies `from` to `to` until end of input or an error, feeding every
/// chunk to the recording after it was written. Returns the bytes copied.
async fn pump<R, W>(mut from: R, mut to: W, dir: Direction, session: Session) -> u64
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; BUF];
    let mut deframer = Deframer::default();
    let mut items = Vec::new();
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = buf.get(..n).unwrap_or_default();
        if to.write_all(chunk).await.is_err() {
            break;
        }
        total += n as u64;
        deframer.feed(chunk, &mut items);
        if !items.is_empty() {
            session.items(dir, std::mem::take(&mut items));
        }
    }
    let _ = to.shutdown().await;
    total
}

/// Forwards between a plugin connection and the runtime connection until
/// both directions end, recording as it goes.
pub async fn relay(plugin: UnixStream, runtime: UnixStream, session: Session) {
    let (pr, pw) = plugin.into_split();
    let (rr, rw) = runtime.into_split();
    let up = pump(pr, rw, Direction::ToRuntime, session.clone());
    let down = pump(rr, pw, Direction::ToPlugin, session.clone());
    let (to_runtime, to_plugin) = tokio::join!(up, down);
    let mut f = Map::new();
    f.insert("bytes_to_runtime".into(), to_runtime.into());
    f.insert("bytes_to_plugin".into(), to_plugin.into());
    session.event("close", f);
}

/// Socket proxy mode: plugins connect to `listener`; for each, the tap
/// connects to the runtime's socket at `runtime` and relays. Runs until the
/// listener fails.
pub async fn serve(listener: UnixListener, runtime: PathBuf, recorder: Recorder) {
    loop {
        let plugin = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::error!(error = %e, "stopped accepting plugin connections");
                return;
            }
        };
        let session = recorder.session(None);
        let runtime = runtime.clone();
        tokio::spawn(async move {
            match UnixStream::connect(&runtime).await {
                Ok(rt) => relay(plugin, rt, session).await,
                Err(e) => {
                    tracing::warn!(error = %e, runtime = %runtime.display(),
                        "cannot reach the runtime; dropping the plugin connection");
                    let mut f = Map::new();
                    f.insert("error".into(), e.to_string().into());
                    session.event("runtime_unreachable", f);
                }
            }
        });
    }
}

/// Binds the plugin-side socket (replacing a stale socket file).
pub fn listen(path: &Path) -> Result<UnixListener, TapError> {
    let err = |source| TapError::Listen {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    UnixListener::bind(path).map_err(err)
}

/// Takes the connection the runtime handed over in `NRI_PLUGIN_SOCKET`
/// (a descriptor number).
pub fn runtime_from_env(value: &str) -> Result<UnixStream, TapError> {
    let fd: i32 = value
        .parse()
        .map_err(|e| TapError::SocketEnv(format!("{value:?}: {e}")))?;
    if fd < 0 {
        return Err(TapError::SocketEnv(format!("{fd} is not a descriptor")));
    }
    // SAFETY: only borrowed for the checks below; an fd that is not open
    // makes them fail with EBADF.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let kind = rustix::net::sockopt::socket_type(borrowed)
        .map_err(|e| TapError::SocketEnv(format!("descriptor {fd}: {e}")))?;
    if kind != rustix::net::SocketType::STREAM {
        return Err(TapError::SocketEnv(format!(
            "descriptor {fd} is not a stream socket"
        )));
    }
    // SAFETY: the runtime handed this open stream socket (checked above) to
    // this process for the plugin connection; nothing else here owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = rustix::io::fcntl_setfd(owned.as_fd(), rustix::io::FdFlags::CLOEXEC);
    let std = std::os::unix::net::UnixStream::from(owned);
    std.set_nonblocking(true)
        .map_err(|e| TapError::SocketEnv(e.to_string()))?;
    UnixStream::from_std(std).map_err(|e| TapError::SocketEnv(e.to_string()))
}

/// Wrapper mode: starts `program` with a new socket as its
/// `NRI_PLUGIN_SOCKET` and relays between it and `runtime`. Returns the
/// plugin's exit status once it exited and both directions ended.
pub async fn wrap(
    runtime: UnixStream,
    program: &str,
    args: &[String],
    recorder: Recorder,
) -> Result<std::process::ExitStatus, TapError> {
    let spawn_err = |source| TapError::Spawn {
        program: program.to_string(),
        source,
    };
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(spawn_err)?;
    // The plugin's end must survive exec; ours must not.
    rustix::io::fcntl_setfd(theirs.as_fd(), rustix::io::FdFlags::empty())
        .map_err(|e| spawn_err(e.into()))?;
    let plugin = std::env::var("NRI_PLUGIN_IDX")
        .ok()
        .zip(std::env::var("NRI_PLUGIN_NAME").ok())
        .map(|(i, n)| format!("{i}-{n}"));
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("NRI_PLUGIN_SOCKET", theirs.as_raw_fd().to_string())
        .spawn()
        .map_err(spawn_err)?;
    drop(theirs);
    ours.set_nonblocking(true).map_err(spawn_err)?;
    let ours = UnixStream::from_std(ours).map_err(spawn_err)?;
    let session = recorder.session(plugin);
    let (status, ()) = tokio::join!(child.wait(), relay(ours, runtime, session));
    status.map_err(spawn_err)
}
