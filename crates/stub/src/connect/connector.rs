//! The connection sources of the async stub, one run after another.

use std::path::PathBuf;
use std::sync::Mutex;

use nri_api::plugin::PLUGIN_SOCKET_ENV as SOCKET_ENV_VAR;
use nri_mux::UnixTrunk;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;

use super::{parse_fd, stream_from_env};
use crate::Error;

/// A byte stream to the runtime.
pub(crate) trait Trunk: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Trunk for T {}

/// The connection of one run.
pub(crate) type BoxTrunk = Box<dyn Trunk>;

/// The connection sources of one stub.
pub(crate) struct Connector {
    /// `Some(Some(_))`: a given connection not used yet; `Some(None)`: used.
    given: Mutex<Option<Option<BoxTrunk>>>,
    /// Value of `NRI_PLUGIN_SOCKET` when the stub was built, until it is used.
    env_socket: Mutex<Option<Option<String>>>,
    socket_path: PathBuf,
}

impl Connector {
    pub(crate) fn new(
        given: Option<BoxTrunk>,
        env_socket: Option<String>,
        socket_path: PathBuf,
    ) -> Self {
        Connector {
            given: Mutex::new(given.map(Some)),
            env_socket: Mutex::new(env_socket.filter(|v| !v.is_empty()).map(Some)),
            socket_path,
        }
    }

    /// Reads `NRI_PLUGIN_SOCKET` from the process environment.
    pub(crate) fn env_socket() -> Option<String> {
        std::env::var(SOCKET_ENV_VAR).ok()
    }

    /// Describes where the next connection will come from, for logs.
    pub(crate) fn describe(&self) -> String {
        if lock(&self.given).is_some() {
            "given connection".to_string()
        } else if let Some(Some(value)) = lock(&self.env_socket).as_ref() {
            format!("{SOCKET_ENV_VAR}={value}")
        } else {
            self.socket_path.display().to_string()
        }
    }

    /// Produces the connection for one run.
    pub(crate) async fn connect(&self) -> Result<BoxTrunk, Error> {
        if let Some(slot) = lock(&self.given).as_mut() {
            return slot.take().ok_or(Error::ConnectionUsed);
        }
        let env = lock(&self.env_socket).as_mut().map(Option::take);
        match env {
            Some(Some(value)) => {
                let stream = stream_from_env(&value)?;
                let stream = UnixTrunk::new(stream).map_err(|source| Error::InvalidSocketFd {
                    fd: parse_fd(&value).unwrap_or(-1),
                    source,
                })?;
                Ok(Box::new(stream))
            }
            Some(None) => Err(Error::ConnectionUsed),
            None => {
                let stream = UnixStream::connect(&self.socket_path)
                    .await
                    .and_then(UnixTrunk::from_tokio)
                    .map_err(|source| Error::Connect {
                        socket: self.socket_path.clone(),
                        source,
                    })?;
                Ok(Box::new(stream))
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, IntoRawFd};

    fn connector(env: &str) -> Connector {
        Connector::new(None, Some(env.into()), "/nonexistent/nri.sock".into())
    }

    async fn connect_err(c: &Connector) -> Error {
        match c.connect().await {
            Ok(_) => panic!("connect succeeded"),
            Err(err) => err,
        }
    }

    #[tokio::test]
    async fn non_numeric_env_is_refused() {
        let err = connect_err(&connector("abc")).await;
        assert_eq!(
            err.to_string(),
            "invalid socket in environment (NRI_PLUGIN_SOCKET=\"abc\"): invalid digit found in \
             string (it must be the number of a socket descriptor a runtime handed over; unset it \
             to connect by socket path)"
        );
    }

    #[tokio::test]
    async fn non_socket_fd_is_refused() {
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_fd();
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let err = connect_err(&connector(&raw.to_string())).await;
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("invalid socket ({raw}) in environment: ")),
            "{text}"
        );
        drop(file);
    }

    #[tokio::test]
    async fn closed_fd_is_refused() {
        let err = connect_err(&connector("987654")).await;
        assert!(
            matches!(err, Error::InvalidSocketFd { fd: 987654, .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn env_socket_is_taken_once() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let raw = ours.into_raw_fd();
        let c = connector(&raw.to_string());
        let stream = c.connect().await.unwrap();
        // The stream really is the socket: what the peer writes arrives.
        use tokio::io::AsyncReadExt;
        let mut theirs = theirs;
        std::io::Write::write_all(&mut theirs, b"hi").unwrap();
        let mut buf = [0u8; 2];
        let mut stream = stream;
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        assert!(matches!(c.connect().await, Err(Error::ConnectionUsed)));
    }

    #[tokio::test]
    async fn given_connection_is_taken_once() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let c = Connector::new(Some(Box::new(ours)), Some("3".into()), "/x".into());
        assert!(c.connect().await.is_ok());
        assert!(matches!(c.connect().await, Err(Error::ConnectionUsed)));
    }

    #[tokio::test]
    async fn dial_failure_is_reported() {
        let c = Connector::new(None, None, "/nonexistent/dir/nri.sock".into());
        let err = connect_err(&c).await;
        let text = err.to_string();
        assert!(
            text.starts_with("cannot connect to the NRI socket /nonexistent/dir/nri.sock: "),
            "{text}"
        );
        assert!(
            text.contains("is the runtime running, with NRI enabled"),
            "{text}"
        );
        // The stub does not know the plugin's flags: it names none.
        assert!(!text.contains("-socket"), "{text}");
    }
}
