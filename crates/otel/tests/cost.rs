//! What tracing export costs a runtime request (ignored by default; run in
//! release: `cargo test --release -p nri-otel --test cost -- --ignored
//! --nocapture`).
//!
//! CreateContainer to one in-process nri-stub plugin over a real socket,
//! on one thread, under three subscribers: no export (the spans are still
//! created, as with any `tracing` subscriber), `OtelLayer` to a batch span
//! processor whose exporter discards, and `OtelLayer` to OTLP/HTTP with a
//! receiver on the loopback interface. Each call makes three exported
//! spans: `nri.request`, `nri.plugin_call`, and the plugin's
//! `nri.plugin_request`.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Instant;

use nri_api::*;
use nri_otel::OtelLayer;
use nri_stub::{Context, CreateContainerResult, Plugin};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanExporter};
use support::*;
use tracing_subscriber::layer::SubscriberExt;

const CALLS: usize = 3000;
const WARMUP: usize = 300;

struct Noop;

#[nri_stub::plugin]
impl Plugin for Noop {
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        Ok(CreateContainerResult::default())
    }
}

#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
        Ok(())
    }
}

/// An OTLP/HTTP receiver that reads each request and answers 200.
fn receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = vec![0u8; 1 << 16];
            let mut raw = Vec::new();
            let mut want = None;
            while want.is_none_or(|w| raw.len() < w) {
                let Ok(n) = conn.read(&mut buf) else { break };
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&buf[..n]);
                if want.is_none() {
                    if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        want = Some(end + 4 + len);
                    }
                }
            }
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    format!("http://{addr}")
}

/// Median and p99 of CALLS CreateContainer calls, in microseconds.
async fn measure() -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (nri, plugin) = runtime_with_plugin(dir.path(), Noop, "noop").await;
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let req = CreateContainerRequest {
            pod: Some(pod("pod0")),
            container: Some(ctr(&format!("ctr{i}"))),
        };
        let start = Instant::now();
        nri.create_container(req).await.unwrap();
        if i >= WARMUP {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    nri.stop().await;
    let _ = tokio::time::timeout(WAIT, plugin).await;
    times.sort_by(f64::total_cmp);
    (times[CALLS / 2], times[CALLS * 99 / 100])
}

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn cost_per_create_container() {
    let endpoint = receiver();
    let mut medians: [Vec<f64>; 3] = Default::default();
    for round in 0..2 {
        for (mode, name) in ["none", "discard", "otlp"].iter().enumerate() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (median, p99) = match mode {
                0 => {
                    let _g = tracing::subscriber::set_default(tracing_subscriber::registry());
                    rt.block_on(measure())
                }
                1 => {
                    let (layer, export) =
                        OtelLayer::new(BatchSpanProcessor::builder(Discard).build());
                    let _g = tracing::subscriber::set_default(
                        tracing_subscriber::registry().with(layer),
                    );
                    let r = rt.block_on(measure());
                    export.shutdown();
                    r
                }
                _ => {
                    let (layer, export) = nri_otel::otlp(&endpoint, "cost").unwrap();
                    let _g = tracing::subscriber::set_default(
                        tracing_subscriber::registry().with(layer),
                    );
                    let r = rt.block_on(measure());
                    export.shutdown();
                    r
                }
            };
            println!(
                "round {round} export={name}: CreateContainer 1 plugin median {median:.1} us, p99 {p99:.1} us"
            );
            medians[mode].push(median);
        }
    }
    let mid = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "mean of medians: none {:.1} us, discard {:.1} us, otlp {:.1} us",
        mid(&medians[0]),
        mid(&medians[1]),
        mid(&medians[2])
    );
}
