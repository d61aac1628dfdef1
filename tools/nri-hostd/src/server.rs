//! The control socket: one request and one response per connection.
//!
//! Requests are handled in the order their connections were accepted: a
//! wrapper may send a notification (`created`, `started`, `deleted`, ...)
//! and exit without waiting for the answer, and the request of the next
//! runtime command, whose connection comes later, still finds the
//! notification handled before it. A connection that is accepted but sends
//! nothing holds back the requests behind it until its read times out
//! ([`READ_TIMEOUT`]).
//!
//! The socket's mode (default 0600) and group are set explicitly whatever
//! the umask, a directory others can write to is refused, and each peer's
//! credentials are read on accept: a peer not in the allow-list (`[hostd]
//! control_allowed_uids` / `control_allowed_gids`) is logged and
//! disconnected before its request is read.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nri_integration::socket::SocketAccess;
use tokio::net::{UnixListener, UnixStream};

use crate::daemon::Hostd;
use crate::protocol::{
    decode, read_frame_async, write_frame_async, ProtocolError, Request, Response,
};

/// How long a client may take to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Turns handed out in the order connections are accepted.
#[derive(Debug, Default)]
struct Turns {
    order: tokio::sync::watch::Sender<Order>,
}

#[derive(Debug, Default)]
struct Order {
    /// Tickets handed out so far.
    issued: u64,
    /// The ticket whose turn it is.
    current: u64,
    /// Tickets given up before their turn came.
    skipped: BTreeSet<u64>,
}

/// One connection's place in the order; its turn passes on when it is
/// finished or dropped.
#[derive(Debug)]
struct Ticket {
    turns: Arc<Turns>,
    n: u64,
}

impl Turns {
    fn issue(self: &Arc<Self>) -> Ticket {
        let mut n = 0;
        self.order.send_modify(|o| {
            n = o.issued;
            o.issued += 1;
        });
        Ticket {
            turns: self.clone(),
            n,
        }
    }
}

impl Ticket {
    /// Waits until every earlier ticket is finished or dropped.
    async fn wait(&self) {
        let mut rx = self.turns.order.subscribe();
        // The sender lives in `self.turns`: the wait ends only by the turn.
        let _ = rx.wait_for(|o| o.current >= self.n).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let n = self.n;
        self.turns.order.send_modify(|o| {
            if o.current == n {
                o.current += 1;
                while o.skipped.remove(&o.current) {
                    o.current += 1;
                }
            } else {
                o.skipped.insert(n);
            }
        });
    }
}

/// The bound control socket and who is admitted on it; made by [`bind`].
#[derive(Debug)]
pub struct ControlListener {
    listener: UnixListener,
    access: SocketAccess,
}

/// Binds the control socket at `path` with `access`'s mode (0600 by
/// default: only the daemon's user may connect) and group, whatever the
/// umask (see [`nri_integration::socket::bind`]): a stale socket file is
/// replaced, a missing directory is created (0700, or 0750 with a group),
/// and a directory others can write to is refused. Needs a tokio runtime.
///
/// ```
/// use nri_integration::socket::SocketAccess;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("run/nri-hostd.sock");
/// let access = SocketAccess::default().allow_uids([0]);
/// let listener = nri_hostd::server::bind(&path, &access)?;
/// # drop(listener);
/// # Ok(()) }
/// ```
pub fn bind(path: &Path, access: &SocketAccess) -> std::io::Result<ControlListener> {
    let listener = nri_integration::socket::bind(path, access)?;
    Ok(ControlListener {
        listener: UnixListener::from_std(listener)?,
        access: access.clone(),
    })
}

/// Serves requests on `listener` until the task is dropped.
pub async fn serve_listener(hostd: Arc<Hostd>, listener: ControlListener) -> std::io::Result<()> {
    let ControlListener { listener, access } = listener;
    let turns = Arc::new(Turns::default());
    loop {
        let (stream, _) = listener.accept().await?;
        // Before a byte is read, and before it takes a turn.
        match access.admit_stream(&stream) {
            Ok(Some(peer)) => tracing::debug!(%peer, "control connection"),
            Ok(None) => tracing::debug!("control connection from a peer of unknown credentials"),
            Err(refused) => {
                tracing::warn!(peer = %refused.peer_text(), reason = %refused.reason,
                    "refused control connection");
                continue;
            }
        }
        let hostd = hostd.clone();
        let ticket = turns.issue();
        tokio::spawn(async move {
            if let Err(e) = connection(hostd, stream, ticket).await {
                tracing::warn!(error = %e, "control connection failed");
            }
        });
    }
}

/// Binds `path` with the default access (mode 0600, no allow-list) and
/// serves requests until the task is dropped.
pub async fn serve(hostd: Arc<Hostd>, path: &Path) -> std::io::Result<()> {
    serve_listener(hostd, bind(path, &SocketAccess::default())?).await
}

async fn connection(
    hostd: Arc<Hostd>,
    mut stream: UnixStream,
    ticket: Ticket,
) -> Result<(), crate::protocol::ProtocolError> {
    let payload = match tokio::time::timeout(READ_TIMEOUT, read_frame_async(&mut stream)).await {
        Ok(p) => p?,
        Err(_) => {
            return Err(
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time").into(),
            )
        }
    };
    let request = decode::<Request>(&payload);
    let notification = request.as_ref().is_ok_and(Request::is_notification);
    ticket.wait().await;
    let response = match request {
        Ok(req) => {
            tracing::debug!(?req, "request");
            let turn = hostd.turn().await;
            drop(ticket);
            hostd.handle_in_turn(req, turn).await
        }
        Err(e) => Response::Error {
            message: format!("malformed request: {e}"),
        },
    };
    match write_frame_async(&mut stream, &response).await {
        // The wrapper does not wait for the answer to a notification.
        Err(ProtocolError::Io(e))
            if notification
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
        {
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A daemon without plugins under `dir`, serving its control socket.
    async fn serving(
        dir: &Path,
    ) -> (
        Arc<Hostd>,
        std::path::PathBuf,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let mut config = crate::HostdConfig::default();
        config.nri.disable_connections = true;
        config.nri.plugin_path = dir.join("plugins");
        config.nri.plugin_config_path = dir.join("conf.d");
        config.hostd.state_file = dir.join("state.json");
        let hostd = Arc::new(Hostd::start(config).await.unwrap());
        let path = dir.join("control.sock");
        let listener = bind(&path, &SocketAccess::default()).unwrap();
        let server = tokio::spawn(serve_listener(hostd.clone(), listener));
        (hostd, path, server)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn garbage_and_oversized_requests_get_an_error_or_a_closed_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (hostd, path, server) = serving(dir.path()).await;

        let p = path.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&p).unwrap();
            let mut frame = 7u32.to_be_bytes().to_vec();
            frame.extend_from_slice(b"garbage");
            s.write_all(&frame).unwrap();
            crate::protocol::read_frame(&mut s).unwrap()
        })
        .await
        .unwrap();
        let answer: Response = crate::protocol::decode(&answer).unwrap();
        assert!(
            matches!(answer, Response::Error { ref message } if message.contains("malformed")),
            "{answer:?}"
        );

        let p = path.clone();
        let rest = tokio::task::spawn_blocking(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&p).unwrap();
            s.write_all(&u32::MAX.to_be_bytes()).unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            rest
        })
        .await
        .unwrap();
        assert!(rest.is_empty(), "an oversized frame closes the connection");

        // The daemon still answers.
        let p = path.clone();
        let ping = tokio::task::spawn_blocking(move || {
            crate::protocol::call(&p, &Request::Ping, std::time::Duration::from_secs(5))
        })
        .await
        .unwrap()
        .unwrap();
        assert!(matches!(ping, Response::Ok));
        server.abort();
        hostd.stop().await;
    }

    /// A notification whose connection came first is handled first, even
    /// when its frame arrives after the next connection's request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_are_handled_in_the_order_connections_were_accepted() {
        use crate::protocol::{encode, RuntimeRef};
        let dir = tempfile::tempdir().unwrap();
        let (hostd, path, server) = serving(dir.path()).await;
        let create = Request::Create {
            id: "c1".into(),
            bundle: "/nonexistent".into(),
            runtime: RuntimeRef::default(),
            spec: serde_json::json!({}),
        };

        let p = path.clone();
        let (first, second) = tokio::task::spawn_blocking(move || {
            let timeout = std::time::Duration::from_secs(10);
            let first = crate::protocol::call(&p, &create, timeout).unwrap();
            // `deleted` connects first but writes last; the second create
            // of the same id only succeeds if the deletion is handled
            // before it.
            let mut deleted = std::os::unix::net::UnixStream::connect(&p).unwrap();
            let mut again = std::os::unix::net::UnixStream::connect(&p).unwrap();
            again.set_read_timeout(Some(timeout)).unwrap();
            again.write_all(&encode(&create).unwrap()).unwrap();
            deleted
                .write_all(&encode(&Request::Deleted { id: "c1".into() }).unwrap())
                .unwrap();
            drop(deleted);
            let second = crate::protocol::read_frame(&mut again).unwrap();
            (first, crate::protocol::decode::<Response>(&second).unwrap())
        })
        .await
        .unwrap();
        assert!(matches!(first, Response::Spec { .. }), "{first:?}");
        assert!(matches!(second, Response::Spec { .. }), "{second:?}");
        server.abort();
        hostd.stop().await;
    }
}
