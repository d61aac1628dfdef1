//! A `/metrics` endpoint for a process that runs NRI standalone (`nri-sim
//! serve`, `nri-hostd`): a minimal HTTP/1.1
//! responder on tokio serving [`NriMetrics::encode`]. One request per
//! connection (`Connection: close`); `GET /metrics` (any query string)
//! answers the OpenMetrics text, other paths 404, other methods 405.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::{NriMetrics, CONTENT_TYPE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address is neither `PORT`, `:PORT` nor `IP:PORT`.
    #[error("bad metrics address {0:?}: use PORT, :PORT or IP:PORT")]
    Address(String),
    /// Binding failed.
    #[error("cannot listen on {addr} for metrics: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Parses the `--metrics-addr` value: a bare port (`9464`, `:9464`) binds
/// the loopback address; anything else must name the IP.
///
/// ```
/// use nri_metrics::http::parse_addr;
/// assert_eq!(parse_addr(":9464").unwrap().to_string(), "127.0.0.1:9464");
/// assert_eq!(parse_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
/// assert!(parse_addr("localhost").is_err());
/// ```
pub fn parse_addr(s: &str) -> Result<SocketAddr, MetricsError> {
    let port = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse().map_err(|_| MetricsError::Address(s.to_string()))
}

/// A running endpoint; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `addr` and serves `metrics` on `/metrics` until dropped.
    pub async fn start(addr: SocketAddr, metrics: NriMetrics) -> Result<Self, MetricsError> {
        Self::start_with(addr, move || metrics.encode()).await
    }

    /// Binds `addr` and serves what `encode` returns (OpenMetrics text,
    /// ending with `# EOF`) on `/metrics` until dropped: for a process that
    /// serves more metrics than [`NriMetrics`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use nri_metrics::{http::MetricsServer, NriMetrics};
    ///
    /// let m = NriMetrics::new();
    /// let server = MetricsServer::start_with("127.0.0.1:0".parse().unwrap(), move || m.encode())
    ///     .await
    ///     .unwrap();
    /// assert_ne!(server.addr().port(), 0);
    /// # }
    /// ```
    pub async fn start_with(
        addr: SocketAddr,
        encode: impl Fn() -> String + Send + Sync + 'static,
    ) -> Result<Self, MetricsError> {
        let encode: std::sync::Arc<dyn Fn() -> String + Send + Sync> = std::sync::Arc::new(encode);
        let metrics = encode;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MetricsError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MetricsError::Bind { addr, source })?;
        let task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let m = metrics.clone();
                        tokio::spawn(async move {
                            if let Err(e) = respond(stream, &*m).await {
                                tracing::debug!(error = %e, "metrics request failed");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics endpoint stopped accepting");
                        return;
                    }
                }
            }
        });
        Ok(MetricsServer { addr, task })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the request head (up to the blank line) and answers it.
async fn respond(
    mut stream: TcpStream,
    metrics: &(dyn Fn() -> String + Send + Sync),
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let ended = |h: &[u8]| h.windows(4).any(|w| w == b"\r\n\r\n");
    let complete = tokio::time::timeout(READ_TIMEOUT, async {
        while !ended(&head) && head.len() < MAX_HEAD {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(buf.get(..n).unwrap_or_default());
        }
        Ok::<bool, std::io::Error>(ended(&head))
    })
    .await
    .unwrap_or(Ok(false))?;
    let line = head
        .split(|b| *b == b'\n')
        .next()
        .map(|l| String::from_utf8_lossy(l).trim_end().to_string())
        .unwrap_or_default();
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = if !complete {
        ("400 Bad Request", "text/plain", "bad request\n".to_string())
    } else if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        )
    } else if path != "/metrics" {
        ("404 Not Found", "text/plain", "try /metrics\n".to_string())
    } else {
        ("200 OK", CONTENT_TYPE, metrics())
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        reply.push_str(&body);
    }
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_adaptation::Metrics;

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_metrics_and_refuses_the_rest() {
        let m = NriMetrics::new();
        m.update_plugin_count(3);
        let server = MetricsServer::start(parse_addr("0").unwrap(), m)
            .await
            .unwrap();
        assert!(server.addr().ip().is_loopback());
        let ok = get(server.addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE), "{ok}");
        let (_, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(body.contains("nri_active_plugins_total 3\n"), "{body}");
        assert!(ok.contains(&format!("Content-Length: {}\r\n", body.len())));
        let missing = get(server.addr(), "GET / HTTP/1.1\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(server.addr(), "POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let junk = get(server.addr(), &"x".repeat(MAX_HEAD + 10)).await;
        assert!(junk.starts_with("HTTP/1.1 400"), "{junk}");
    }
}
