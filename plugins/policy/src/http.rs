//! A minimal `/metrics` endpoint: one request per connection, `GET /metrics`
//! answers the policy counters in the OpenMetrics text format.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use nri_policy::PolicyValidator;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Parses `PORT`, `:PORT` (loopback) or `IP:PORT`.
///
/// ```
/// use nri_plugin_policy::http::parse_addr;
/// assert_eq!(parse_addr(":9464").unwrap().to_string(), "127.0.0.1:9464");
/// assert!(parse_addr("localhost").is_none());
/// ```
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    let port = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = port.parse::<u16>() {
        return Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse().ok()
}

/// Binds `addr`; the returned listener is served by [`serve`].
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the counters of `validator` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, validator: Arc<PolicyValidator>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let v = validator.clone();
                tokio::spawn(async move {
                    if let Err(e) = respond(stream, &v).await {
                        tracing::debug!("metrics request failed: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("metrics endpoint stopped accepting: {e}");
                return;
            }
        }
    }
}

async fn respond(mut stream: TcpStream, validator: &PolicyValidator) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(buf.get(..n).unwrap_or_default());
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return Ok(());
    }
    let line =
        String::from_utf8_lossy(head.split(|b| *b == b'\n').next().unwrap_or_default()).to_string();
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = if method != "GET" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_owned(),
        )
    } else if path != "/metrics" {
        ("404 Not Found", "text/plain", "try /metrics\n".to_owned())
    } else {
        ("200 OK", CONTENT_TYPE, validator.metrics().encode())
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}
