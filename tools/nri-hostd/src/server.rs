//! The control socket: one request and one response per connection.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};

use crate::daemon::Hostd;
use crate::protocol::{decode, read_frame_async, write_frame_async, Request, Response};

/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds the control socket at `path` (a stale socket file is replaced;
/// the directory is created; only root may connect: mode 0600).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves requests on `listener` until the task is dropped.
pub async fn serve_listener(hostd: Arc<Hostd>, listener: UnixListener) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let hostd = hostd.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(hostd, stream).await {
                tracing::warn!(error = %e, "control connection failed");
            }
        });
    }
}

/// Binds `path` and serves requests until the task is dropped.
pub async fn serve(hostd: Arc<Hostd>, path: &Path) -> std::io::Result<()> {
    serve_listener(hostd, bind(path)?).await
}

async fn connection(
    hostd: Arc<Hostd>,
    mut stream: UnixStream,
) -> Result<(), crate::protocol::ProtocolError> {
    let payload = match tokio::time::timeout(READ_TIMEOUT, read_frame_async(&mut stream)).await {
        Ok(p) => p?,
        Err(_) => {
            return Err(
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time").into(),
            )
        }
    };
    let response = match decode::<Request>(&payload) {
        Ok(req) => {
            tracing::debug!(?req, "request");
            hostd.handle(req).await
        }
        Err(e) => Response::Error {
            message: format!("malformed request: {e}"),
        },
    };
    write_frame_async(&mut stream, &response).await
}
