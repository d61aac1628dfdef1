//! Shared helpers for the integration tests: a test service and raw-frame
//! utilities to play the peer by hand.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use nri_ttrpc::frame::{FrameHeader, HEADER_LEN, MESSAGE_TYPE_REQUEST};
use nri_ttrpc::{proto, BoxFuture, Client, Code, Error, Server, Status, MAX_MESSAGE_LEN};
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

pub const SVC: &str = "test.Svc";

/// Upper bound for anything that should happen "promptly".
pub const PROMPT: Duration = Duration::from_secs(5);

/// A handler's future, boxed as [`Server::register`] takes it.
pub fn boxed_handler<F>(f: F) -> BoxFuture<'static, Result<Vec<u8>, Status>>
where
    F: std::future::Future<Output = Result<Vec<u8>, Status>> + Send + 'static,
{
    Box::pin(f)
}

/// The test service:
/// * `Echo`: returns the payload;
/// * `Sleep`: payload is `[ms u64 LE][rest]`; sleeps, returns `rest`;
/// * `Fail`: fails with `NotFound` and message `nothing here: {payload}`;
/// * `Panic`: panics;
/// * `Big`: returns `MAX_MESSAGE_LEN` bytes (envelope over the limit);
/// * `Context`: returns `"{service}/{method} deadline={ms or none} k=v,..."`.
pub fn test_server() -> Server {
    let mut server = Server::new();
    server.register(SVC, "Echo", |_ctx, payload| {
        boxed_handler(async move { Ok(payload) })
    });
    server.register(SVC, "Sleep", |_ctx, payload| {
        boxed_handler(async move {
            let (ms, rest) = split_sleep(&payload);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(rest.to_vec())
        })
    });
    server.register(SVC, "Fail", |_ctx, payload| {
        boxed_handler(async move {
            Err(Status::new(
                Code::NotFound,
                format!("nothing here: {}", String::from_utf8_lossy(&payload)),
            ))
        })
    });
    server.register(SVC, "Panic", |_ctx, _payload| {
        boxed_handler(async move { panic!("handler panic for test") })
    });
    server.register(SVC, "Big", |_ctx, _payload| {
        boxed_handler(async move { Ok(vec![1u8; MAX_MESSAGE_LEN]) })
    });
    server.register(SVC, "Context", |ctx, _payload| {
        boxed_handler(async move {
            let deadline = match ctx.remaining() {
                Some(left) => format!("{}", left.as_millis()),
                None => "none".to_string(),
            };
            let md: Vec<String> = ctx
                .metadata
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            Ok(format!(
                "{}/{} deadline={} {}",
                ctx.service,
                ctx.method,
                deadline,
                md.join(",")
            )
            .into_bytes())
        })
    });
    server
}

pub fn sleep_payload(ms: u64, rest: &[u8]) -> Vec<u8> {
    let mut p = ms.to_le_bytes().to_vec();
    p.extend_from_slice(rest);
    p
}

fn split_sleep(payload: &[u8]) -> (u64, &[u8]) {
    match payload.split_first_chunk::<8>() {
        Some((ms, rest)) => (u64::from_le_bytes(*ms), rest),
        None => (0, payload),
    }
}

/// Starts the test server on one end of a socket pair and a client on the other.
pub fn start() -> (Client, JoinHandle<Result<(), Error>>) {
    let (a, b) = UnixStream::pair().unwrap();
    let server = tokio::spawn(Arc::new(test_server()).serve(b));
    (Client::new(a), server)
}

/// Starts the test server on one end of a socket pair; returns the raw other end.
pub fn start_raw_client() -> (UnixStream, JoinHandle<Result<(), Error>>) {
    let (a, b) = UnixStream::pair().unwrap();
    let server = tokio::spawn(Arc::new(test_server()).serve(b));
    (a, server)
}

/// Starts a client on one end of a socket pair; returns the raw other end.
pub fn start_raw_server() -> (Client, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    (Client::new(a), b)
}

pub fn encode_request(id: u32, req: &proto::Request) -> Vec<u8> {
    let body = req.encode_to_vec();
    let mut out = FrameHeader {
        length: body.len() as u32,
        stream_id: id,
        kind: MESSAGE_TYPE_REQUEST,
        flags: 0,
    }
    .encode()
    .to_vec();
    out.extend_from_slice(&body);
    out
}

pub fn request(method: &str, payload: &[u8], timeout_nano: i64) -> proto::Request {
    proto::Request {
        service: SVC.into(),
        method: method.into(),
        payload: payload.to_vec(),
        timeout_nano,
        metadata: Vec::new(),
    }
}

pub async fn write_raw<W: AsyncWrite + Unpin>(w: &mut W, header: FrameHeader, body: &[u8]) {
    w.write_all(&header.encode()).await.unwrap();
    w.write_all(body).await.unwrap();
    w.flush().await.unwrap();
}

/// Reads one frame (header and payload) from a raw peer, with a time limit.
pub async fn read_raw<R: AsyncRead + Unpin>(r: &mut R) -> (FrameHeader, Vec<u8>) {
    tokio::time::timeout(PROMPT, async {
        let mut h = [0u8; HEADER_LEN];
        r.read_exact(&mut h).await.unwrap();
        let header = FrameHeader::decode(&h);
        let mut body = vec![0u8; header.length as usize];
        r.read_exact(&mut body).await.unwrap();
        (header, body)
    })
    .await
    .expect("timed out reading a frame")
}

pub async fn read_response<R: AsyncRead + Unpin>(r: &mut R) -> (FrameHeader, proto::Response) {
    let (h, body) = read_raw(r).await;
    assert_eq!(h.kind, nri_ttrpc::frame::MESSAGE_TYPE_RESPONSE);
    (h, proto::Response::decode(body.as_slice()).unwrap())
}

pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> (FrameHeader, proto::Request) {
    let (h, body) = read_raw(r).await;
    assert_eq!(h.kind, MESSAGE_TYPE_REQUEST);
    (h, proto::Request::decode(body.as_slice()).unwrap())
}

/// Writes a successful response with `payload` for `id`.
pub async fn answer<W: AsyncWrite + Unpin>(w: &mut W, id: u32, payload: &[u8]) {
    let body = proto::Response {
        status: Some(proto::Status::default()),
        payload: payload.to_vec(),
    }
    .encode_to_vec();
    let header = FrameHeader {
        length: body.len() as u32,
        stream_id: id,
        kind: nri_ttrpc::frame::MESSAGE_TYPE_RESPONSE,
        flags: 0,
    };
    write_raw(w, header, &body).await;
}

pub fn status_of(resp: &proto::Response) -> (Code, String) {
    let st = resp.status.clone().unwrap_or_default();
    (Code::from(st.code), st.message)
}

pub async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(PROMPT, f)
        .await
        .expect("did not finish in time")
}

/// `calls` Echo calls of `client`, each from a task of its own, all in
/// flight together; each must get its own body back, promptly.
pub async fn echo_from_many_tasks(client: &Client, calls: u32) {
    let mut tasks = Vec::new();
    for i in 0..calls {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let body = i.to_be_bytes().to_vec();
            let reply = client.call(SVC, "Echo", body.clone(), None).await.unwrap();
            assert_eq!(reply, body);
        }));
    }
    for t in tasks {
        within(t).await.unwrap();
    }
}
