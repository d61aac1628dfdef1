//! Round-trip latency of a small unary call, compared with a raw echo of the
//! same byte counts over the same kind of socket.
//!
//! Run with `cargo bench -p nri-ttrpc --bench roundtrip`. Both sides run on
//! one current-thread runtime. Set `ROUNDTRIP_ITERS` to change the number of
//! measured round trips (default 20000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_ttrpc::frame::HEADER_LEN;
use nri_ttrpc::{proto, BoxFuture, Client, Server, Status};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const SERVICE: &str = "bench.Echo";
const METHOD: &str = "Echo";
const PAYLOAD_LEN: usize = 32;

fn main() {
    let iters: usize = std::env::var("ROUNDTRIP_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let (req_len, resp_len) = frame_sizes();
    println!(
        "payload {PAYLOAD_LEN} B, request frame {req_len} B, response frame {resp_len} B, {iters} round trips"
    );
    let ttrpc = rt.block_on(bench_ttrpc(iters));
    report("ttrpc call (UnixStream pair)", ttrpc);
    let muxed = rt.block_on(bench_ttrpc_over_mux(iters));
    report("ttrpc call over nri-mux   ", muxed);
    let raw = rt.block_on(bench_raw(iters, req_len, resp_len));
    report("raw echo   (UnixStream pair)", raw);
}

/// Sizes of the request and response frames of one echo call.
fn frame_sizes() -> (usize, usize) {
    let request = proto::Request {
        service: SERVICE.into(),
        method: METHOD.into(),
        payload: vec![7; PAYLOAD_LEN],
        timeout_nano: 0,
        metadata: Vec::new(),
    };
    let response = proto::Response {
        status: Some(proto::Status::default()),
        payload: vec![7; PAYLOAD_LEN],
    };
    (
        HEADER_LEN + request.encoded_len(),
        HEADER_LEN + response.encoded_len(),
    )
}

/// A server answering `SERVICE`/`METHOD` with the request's payload.
fn echo_server() -> Server {
    let mut server = Server::new();
    server.register(SERVICE, METHOD, |_ctx, payload: Vec<u8>| {
        Box::pin(async move { Ok::<_, Status>(payload) }) as BoxFuture<'static, _>
    });
    server
}

/// Times `iters` echo calls of `PAYLOAD_LEN` bytes on `client`, after a
/// tenth as many to warm up.
async fn echo_samples(client: &Client, iters: usize) -> Vec<Duration> {
    let payload = vec![7u8; PAYLOAD_LEN];
    for _ in 0..iters / 10 {
        let _ = client.call(SERVICE, METHOD, payload.clone(), None).await;
    }
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let p = payload.clone();
        let start = Instant::now();
        let reply = client.call(SERVICE, METHOD, p, None).await.expect("call");
        samples.push(start.elapsed());
        assert_eq!(reply.len(), PAYLOAD_LEN);
    }
    samples
}

async fn bench_ttrpc(iters: usize) -> Vec<Duration> {
    let (a, b) = UnixStream::pair().expect("socketpair");
    let server = echo_server();
    tokio::spawn(Arc::new(server).serve(b));
    let client = Client::new(a);
    let samples = echo_samples(&client, iters).await;
    client.close();
    samples
}

/// The same call carried as NRI carries it: ttRPC on logical connection 1 of a
/// multiplexed trunk (both ends multiplexed).
async fn bench_ttrpc_over_mux(iters: usize) -> Vec<Duration> {
    use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN};
    let (a, b) = UnixStream::pair().expect("socketpair");
    let client_mux = Mux::new(a, MuxOptions::default());
    let server_mux = Mux::new(b, MuxOptions::default());
    let server = echo_server();
    let server_conn = server_mux.open(PLUGIN_SERVICE_CONN).expect("open");
    tokio::spawn(Arc::new(server).serve(server_conn));
    let client = Client::new(client_mux.open(PLUGIN_SERVICE_CONN).expect("open"));
    let samples = echo_samples(&client, iters).await;
    client.close();
    client_mux.close();
    server_mux.close();
    samples
}

async fn bench_raw(iters: usize, req_len: usize, resp_len: usize) -> Vec<Duration> {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    tokio::spawn(async move {
        let mut req = vec![0u8; req_len];
        let resp = vec![9u8; resp_len];
        while b.read_exact(&mut req).await.is_ok() {
            if b.write_all(&resp).await.is_err() {
                break;
            }
        }
    });
    let req = vec![7u8; req_len];
    let mut resp = vec![0u8; resp_len];
    let mut samples = Vec::with_capacity(iters);
    for i in 0..iters + iters / 10 {
        let start = Instant::now();
        a.write_all(&req).await.expect("write");
        a.read_exact(&mut resp).await.expect("read");
        if i >= iters / 10 {
            samples.push(start.elapsed());
        }
    }
    samples
}

fn report(name: &str, mut samples: Vec<Duration>) {
    if samples.is_empty() {
        return;
    }
    samples.sort();
    let pct = |p: f64| {
        let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[idx.min(samples.len() - 1)]
    };
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name}: median {:>7.2} us  p99 {:>7.2} us  mean {:>7.2} us",
        pct(0.5).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6,
    );
}
