//! Round trip of a small NRI call over the multiplexer: nri-rs next to the Go
//! reference, measured in the same run on the same machine.
//!
//! Run with `cargo bench -p nri-interop --bench wire`. Both measure
//!
//! * `Plugin.StartContainer` (a 51-byte request, an empty reply) from a
//!   ttRPC client to a ttRPC server, each on its own mux over one end of a
//!   Unix socket pair, without deadline;
//! * a raw echo over a bare socket pair of the same byte counts the call
//!   puts on the trunk.
//!
//! The Rust side runs on one current-thread tokio runtime; the Go side is
//! `nri-wire-bench` (interop/harness) with its default `GOMAXPROCS`.
//! `NRI_WIRE_BENCH_ITERS` sets the number of measured round trips (default
//! 20000; a tenth more is run first as warm-up).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_api::service::{plugin, PLUGIN_SERVICE};
use nri_api::{
    Container, ContainerState, PodSandbox, StartContainerRequest, StartContainerResponse,
};
use nri_mux::{Mux, MuxOptions, HEADER_LEN as MUX_HEADER_LEN, PLUGIN_SERVICE_CONN};
use nri_ttrpc::frame::HEADER_LEN as TTRPC_HEADER_LEN;
use nri_ttrpc::{proto, Client, RequestContext, Server, Status};
use prost::Message;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const GO_BENCH: &str = "nri-wire-bench";

/// Median and 99th percentile of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Deserialize)]
struct Latency {
    median_us: f64,
    p99_us: f64,
}

/// The output of `nri-wire-bench`.
#[derive(Debug, Deserialize)]
struct GoReport {
    ttrpc_over_mux: Latency,
    raw: Latency,
    iterations: usize,
    request_payload_bytes: usize,
    request_trunk_bytes: usize,
    response_trunk_bytes: usize,
    gomaxprocs: usize,
    go_version: String,
}

/// The request of every measured call; `nri-wire-bench` sends the same one.
fn bench_request() -> StartContainerRequest {
    StartContainerRequest {
        pod: Some(PodSandbox {
            id: "pod0".into(),
            name: "pod0".into(),
            uid: "uid0".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
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

fn main() {
    let iters: usize = std::env::var("NRI_WIRE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(20_000);
    let warmup = iters / 10;
    let request = bench_request();
    let (req_len, resp_len) = trunk_bytes(&request);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rust_muxed = summarize(rt.block_on(bench_ttrpc_over_mux(&request, iters, warmup)));
    let rust_raw = summarize(rt.block_on(bench_raw(req_len, resp_len, iters, warmup)));
    drop(rt);

    let go = run_go_bench(iters, warmup);

    println!("machine: {} CPUs, {}", nproc(), cpu_model());
    println!(
        "call: Plugin.StartContainer, request payload {} B (Go {} B), {iters} round trips each",
        request.encoded_len(),
        go.request_payload_bytes
    );
    println!(
        "trunk bytes per call: Rust {req_len} out / {resp_len} back, Go {} out / {} back",
        go.request_trunk_bytes, go.response_trunk_bytes
    );
    println!(
        "Rust: tokio current_thread runtime; Go: {}, GOMAXPROCS={}, {} round trips",
        go.go_version, go.gomaxprocs, go.iterations
    );
    println!();
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "", "Rust median", "Rust p99", "Go median", "Go p99", "median R/G", "p99 R/G"
    );
    row("ttRPC over mux", rust_muxed, go.ttrpc_over_mux);
    row("raw socketpair echo", rust_raw, go.raw);
}

fn row(name: &str, rust: Latency, go: Latency) {
    println!(
        "{name:<22} {:>9.2} us {:>9.2} us {:>9.2} us {:>9.2} us {:>10.2} {:>10.2}",
        rust.median_us,
        rust.p99_us,
        go.median_us,
        go.p99_us,
        rust.median_us / go.median_us,
        rust.p99_us / go.p99_us,
    );
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
fn summarize(mut samples: Vec<Duration>) -> Latency {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let rank = |p: f64| {
        let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i].as_secs_f64() * 1e6
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

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
