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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn garbage_and_oversized_requests_get_an_error_or_a_closed_connection() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::HostdConfig::default();
        config.nri.disable_connections = true;
        config.nri.plugin_path = dir.path().join("plugins");
        config.nri.plugin_config_path = dir.path().join("conf.d");
        config.hostd.state_file = dir.path().join("state.json");
        let hostd = Arc::new(Hostd::start(config).await.unwrap());
        let path = dir.path().join("control.sock");
        let listener = bind(&path).unwrap();
        let server = tokio::spawn(serve_listener(hostd.clone(), listener));

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
}
