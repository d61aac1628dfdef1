//! A minimal blocking HTTP/1.1 client for the OTLP exporter.
//!
//! OpenTelemetry's batch span processor exports from a thread of its own,
//! outside any async runtime, so a blocking client fits and needs no
//! runtime. One POST per connection (`Connection: close`), plain HTTP only,
//! responses up to 4 MiB (`Content-Length`, chunked, or until close).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// The largest response body read.
const MAX_RESPONSE: usize = 4 << 20;

/// A blocking HTTP/1.1 client (plain HTTP) implementing OpenTelemetry's
/// [`HttpClient`], with one overall timeout per request.
///
/// ```
/// let client = nri_otel::PlainHttpClient::new(std::time::Duration::from_secs(5));
/// # drop(client);
/// ```
#[derive(Debug, Clone)]
pub struct PlainHttpClient {
    timeout: Duration,
}

impl PlainHttpClient {
    /// A client whose requests fail after `timeout` (connect, send and
    /// receive together).
    pub fn new(timeout: Duration) -> PlainHttpClient {
        PlainHttpClient { timeout }
    }

    fn send(&self, request: &Request<Bytes>) -> Result<Response<Bytes>, String> {
        let deadline = Instant::now() + self.timeout;
        let uri = request.uri();
        if uri.scheme_str().is_some_and(|s| s != "http") {
            return Err(format!("{uri}: only plain http is supported"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{uri}: no host"))?
            .as_str();
        let (host, port) = host_port(authority)?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let left = |what: &str| {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| format!("{uri}: timed out {what}"))
        };
        let addrs = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("{uri}: resolving {host}: {e}"))?;
        let mut stream = None;
        let mut last = format!("{uri}: {host} has no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, left("connecting")?) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = format!("{uri}: connecting to {addr}: {e}"),
            }
        }
        let mut stream = stream.ok_or(last)?;
        let io = |e: std::io::Error| format!("{uri}: {e}");

        let mut head = format!(
            "{} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
            request.method(),
            request.body().len()
        );
        for (name, value) in request.headers() {
            if matches!(name.as_str(), "host" | "content-length" | "connection") {
                continue;
            }
            let value = value
                .to_str()
                .map_err(|_| format!("header {name}: not text"))?;
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .set_write_timeout(Some(left("sending")?))
            .map_err(io)?;
        stream.write_all(head.as_bytes()).map_err(io)?;
        stream.write_all(request.body()).map_err(io)?;
        stream.flush().map_err(io)?;

        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            stream
                .set_read_timeout(Some(left("waiting for the response")?))
                .map_err(io)?;
            let n = stream.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if raw.len() > MAX_RESPONSE + 64 * 1024 {
                return Err(format!("{uri}: response larger than 4 MiB"));
            }
            if let Some(resp) = parse_response(&raw)? {
                return Ok(resp);
            }
        }
        parse_response(&raw)?
            .or_else(|| complete_at_close(&raw))
            .ok_or_else(|| format!("{uri}: connection closed before a complete response"))
    }
}

#[async_trait::async_trait]
impl HttpClient for PlainHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        self.send(&request).map_err(HttpError::from)
    }
}

/// Host and port (default 80) of an authority (`host`, `host:port`,
/// `[v6]:port`).
pub(crate) fn host_port(authority: &str) -> Result<(&str, u16), String> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (authority, None),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("no host".into());
    }
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("invalid port {p:?}"))?,
        None => 80,
    };
    Ok((host, port))
}

/// The head of a response: status, headers, offset of the body.
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
    body_at: usize,
}

fn parse_head(raw: &[u8]) -> Result<Option<Head>, String> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        if raw.len() > 64 * 1024 {
            return Err("response head larger than 64 KiB".into());
        }
        return Ok(None);
    };
    let text = std::str::from_utf8(&raw[..end]).map_err(|_| "response head is not text")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next(), parts.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(format!("not an HTTP/1.x response: {status_line:?}"));
    }
    let status = code
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status code in {status_line:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Some(Head {
        status,
        headers,
        body_at: end + 4,
    }))
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn response(&self, body: Vec<u8>) -> Result<Response<Bytes>, String> {
        let mut builder = Response::builder().status(self.status);
        for (k, v) in &self.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder
            .body(Bytes::from(body))
            .map_err(|e| format!("response: {e}"))
    }
}

/// The response, once `raw` holds all of it (by `Content-Length` or a
/// chunked body's last chunk); `None` while more is needed.
fn parse_response(raw: &[u8]) -> Result<Option<Response<Bytes>>, String> {
    let Some(head) = parse_head(raw)? else {
        return Ok(None);
    };
    let body = &raw[head.body_at..];
    if head
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        return match dechunk(body)? {
            Some(b) => head.response(b).map(Some),
            None => Ok(None),
        };
    }
    if let Some(len) = head.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("invalid content-length {len:?}"))?;
        if len > MAX_RESPONSE {
            return Err("response larger than 4 MiB".into());
        }
        if body.len() < len {
            return Ok(None);
        }
        return head.response(body[..len].to_vec()).map(Some);
    }
    if head.status == 204 || head.status == 304 || head.status / 100 == 1 {
        return head.response(Vec::new()).map(Some);
    }
    Ok(None)
}

/// A response without length, delimited by the closed connection.
fn complete_at_close(raw: &[u8]) -> Option<Response<Bytes>> {
    let head = parse_head(raw).ok()??;
    head.response(raw[head.body_at..].to_vec()).ok()
}

/// A chunked body decoded; `None` while incomplete.
fn dechunk(mut body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&body[..eol]).map_err(|_| "invalid chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("invalid chunk size {size_text:?}"))?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if out.len() + size > MAX_RESPONSE {
            return Err("response larger than 4 MiB".into());
        }
        if body.len() < size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_waits_for_the_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 3\r\n\r\nab";
        assert!(parse_response(raw).unwrap().is_none());
        let mut full = raw.to_vec();
        full.push(b'c');
        let resp = parse_response(&full).unwrap().unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.body().as_ref(), b"abc");
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "application/x-protobuf"
        );
    }

    #[test]
    fn decodes_chunked_bodies() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let resp = parse_response(raw).unwrap().unwrap();
        assert_eq!(resp.body().as_ref(), b"abcde");
        assert!(parse_response(&raw[..raw.len() - 7]).unwrap().is_none());
    }

    #[test]
    fn body_until_close_and_bad_input() {
        let raw = b"HTTP/1.0 503 Service Unavailable\r\n\r\nbusy";
        assert!(parse_response(raw).unwrap().is_none());
        let resp = complete_at_close(raw).unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.body().as_ref(), b"busy");
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 abc\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn host_and_port() {
        assert_eq!(host_port("a:1").unwrap(), ("a", 1));
        assert_eq!(host_port("a").unwrap(), ("a", 80));
        assert_eq!(host_port("[::1]:4318").unwrap(), ("::1", 4318));
        assert_eq!(host_port("[::1]").unwrap(), ("::1", 80));
        assert!(host_port("a:b").is_err());
        assert!(host_port(":1").is_err());
    }

    #[test]
    fn refused_connection_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = PlainHttpClient::new(Duration::from_secs(2));
        let req = Request::post(format!("http://{addr}/v1/traces"))
            .body(Bytes::from_static(b"x"))
            .unwrap();
        let err = client.send(&req).unwrap_err();
        assert!(err.contains("connecting"), "{err}");
    }
}
