//! One plugin hop: a small NRI call over ttRPC on the multiplexer, next to a
//! raw echo of the same bytes over a bare socket pair, for nri-rs and for the
//! Go reference (`nri-wire-bench`) in the same run. Shared by the `wire` and
//! `adaptation` benches.
//!
//! * `Plugin.StartContainer` (a 51-byte request, an empty reply) from a
//!   ttRPC client to a ttRPC server, each on its own mux over one end of a
//!   Unix socket pair, without deadline;
//! * a raw echo over a bare socket pair of the same byte counts the call
//!   puts on the trunk.
//!
//! The Rust side runs on one current-thread tokio runtime; the Go side is
//! `nri-wire-bench` (interop/harness) with its default `GOMAXPROCS`.

// Each bench including this module reads only some of the report's fields.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_api::service::{plugin, PLUGIN_SERVICE};
use nri_api::{Container, ContainerState, StartContainerRequest, StartContainerResponse};
use nri_mux::{Mux, MuxOptions, HEADER_LEN as MUX_HEADER_LEN, PLUGIN_SERVICE_CONN};
use nri_ttrpc::frame::HEADER_LEN as TTRPC_HEADER_LEN;
use nri_ttrpc::{proto, Client, RequestContext, Server, Status};
use prost::Message;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Everything one hop measurement found, Rust and Go.
pub struct Hop {
    /// Measured round trips per case (after a tenth more as warm-up).
    pub iterations: usize,
    /// Encoded size of the request message.
    pub request_payload_bytes: usize,
    /// Bytes one call puts on the trunk, out and back.
    pub trunk_bytes: (usize, usize),
    pub rust_ttrpc_over_mux: Latency,
    pub rust_raw: Latency,
    pub go: GoReport,
}

impl Hop {
    /// One hop over the raw socket pair round trip, at the median: (Rust, Go).
    pub fn over_raw(&self) -> (f64, f64) {
        (
            self.rust_ttrpc_over_mux.median_us / self.rust_raw.median_us,
            self.go.ttrpc_over_mux.median_us / self.go.raw.median_us,
        )
    }
}

/// Measures `iters` round trips of each kind, Rust first, then Go.
pub fn measure(iters: usize) -> Hop {
    let warmup = iters / 10;
    let request = bench_request();
    let trunk = trunk_bytes(&request);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rust_ttrpc_over_mux = summarize(rt.block_on(bench_ttrpc_over_mux(&request, iters, warmup)));
    let rust_raw = summarize(rt.block_on(bench_raw(trunk.0, trunk.1, iters, warmup)));
    drop(rt);
    let go = run_go_bench(iters, warmup);
    Hop {
        iterations: iters,
        request_payload_bytes: request.encoded_len(),
        trunk_bytes: trunk,
        rust_ttrpc_over_mux,
        rust_raw,
        go,
    }
}

const GO_BENCH: &str = "nri-wire-bench";

/// Median and 99th percentile of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Latency {
    pub median_us: f64,
    pub p99_us: f64,
}

/// The output of `nri-wire-bench`.
#[derive(Debug, Deserialize)]
pub struct GoReport {
    pub ttrpc_over_mux: Latency,
    pub raw: Latency,
    pub iterations: usize,
    pub request_payload_bytes: usize,
    pub request_trunk_bytes: usize,
    pub response_trunk_bytes: usize,
    pub gomaxprocs: usize,
    pub go_version: String,
}

/// The request of every measured call; `nri-wire-bench` sends the same one.
fn bench_request() -> StartContainerRequest {
    StartContainerRequest {
        pod: Some(nri_interop::bench::bench_pod()),
        container: Some(Container {
            id: "ctr0".into(),
            pod_sandbox_id: "pod0".into(),
            name: "ctr0".into(),
            state: ContainerState::ContainerCreated as i32,
            ..Default::default()
        }),
    }
}

/// Bytes one call puts on the trunk: (request, response).
fn trunk_bytes(request: &StartContainerRequest) -> (usize, usize) {
    let req = proto::Request {
        service: PLUGIN_SERVICE.into(),
        method: plugin::START_CONTAINER.into(),
        payload: request.encode_to_vec(),
        timeout_nano: 0,
        metadata: Vec::new(),
    };
    let resp = proto::Response {
        status: Some(proto::Status::default()),
        payload: StartContainerResponse::default().encode_to_vec(),
    };
    (
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + req.encoded_len(),
        MUX_HEADER_LEN + TTRPC_HEADER_LEN + resp.encoded_len(),
    )
}

/// `StartContainer` calls from our client to our server, each over its own
/// nri-mux on one end of a socket pair, as NRI carries them.
async fn bench_ttrpc_over_mux(
    request: &StartContainerRequest,
    iters: usize,
    warmup: usize,
) -> Vec<Duration> {
    let (a, b) = UnixStream::pair().expect("socketpair");
    let client_mux = Mux::new(a, MuxOptions::default());
    let server_mux = Mux::new(b, MuxOptions::default());

    let mut server = Server::new();
    server.register_msg(
        PLUGIN_SERVICE,
        plugin::START_CONTAINER,
        |_ctx: RequestContext, _req: StartContainerRequest| async {
            Ok::<_, Status>(StartContainerResponse::default())
        },
    );
    let server_conn = server_mux.open(PLUGIN_SERVICE_CONN).expect("open conn");
    tokio::spawn(Arc::new(server).serve(server_conn));
    let client = Client::new(client_mux.open(PLUGIN_SERVICE_CONN).expect("open conn"));

    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let start = Instant::now();
        let _: StartContainerResponse = client
            .call_msg(PLUGIN_SERVICE, plugin::START_CONTAINER, request, None)
            .await
            .expect("StartContainer call");
        if i >= warmup {
            samples.push(start.elapsed());
        }
    }
    client.close();
    client_mux.close();
    server_mux.close();
    samples
}

/// An echo over a bare socket pair: `req_len` bytes out, `resp_len` back.
async fn bench_raw(req_len: usize, resp_len: usize, iters: usize, warmup: usize) -> Vec<Duration> {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = tokio::spawn(async move {
        let mut req = vec![0u8; req_len];
        let resp = vec![0u8; resp_len];
        while b.read_exact(&mut req).await.is_ok() {
            if b.write_all(&resp).await.is_err() {
                break;
            }
        }
    });
    let req = vec![0u8; req_len];
    let mut resp = vec![0u8; resp_len];
    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let start = Instant::now();
        a.write_all(&req).await.expect("write");
        a.read_exact(&mut resp).await.expect("read");
        if i >= warmup {
            samples.push(start.elapsed());
        }
    }
    drop(a);
    let _ = echo.await;
    samples
}

/// Median and 99th percentile (nearest rank).
pub fn summarize(mut samples: Vec<Duration>) -> Latency {
    samples.sort_unstable();
    let rank = |p: f64| {
        nri_interop::bench::nearest_rank(&samples, p)
            .expect("no samples")
            .as_secs_f64()
            * 1e6
    };
    Latency {
        median_us: rank(0.5),
        p99_us: rank(0.99),
    }
}

/// Builds (if needed) and runs the Go bench with the same iteration counts.
fn run_go_bench(iters: usize, warmup: usize) -> GoReport {
    let bin = go_bench_binary();
    let out = Command::new(&bin)
        .arg("-n")
        .arg(iters.to_string())
        .arg("-warmup")
        .arg(warmup.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{GO_BENCH} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{GO_BENCH} output is not a report: {e}\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The Go bench binary, built by the harness with the other Go programs.
fn go_bench_binary() -> PathBuf {
    nri_interop::harness_bin(GO_BENCH)
}
