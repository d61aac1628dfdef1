//! Round trip of a small NRI call over the multiplexer: nri-rs next to the Go
//! reference, measured in the same run on the same machine (see
//! `common/hop.rs` for what is measured; `cargo bench -p nri-interop --bench
//! adaptation` puts the same measurement in docs/PERFORMANCE.md).
//!
//! Run with `cargo bench -p nri-interop --bench wire`.
//! `NRI_WIRE_BENCH_ITERS` sets the number of measured round trips (default
//! 20000; a tenth more is run first as warm-up).

#[path = "common/hop.rs"]
mod hop;
#[path = "common/machine.rs"]
mod machine;

use hop::Latency;
use machine::{cpu_model, nproc};

fn main() {
    let iters: usize = std::env::var("NRI_WIRE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(20_000);
    let hop = hop::measure(iters);
    let go = &hop.go;
    let (req_len, resp_len) = hop.trunk_bytes;

    println!("machine: {} CPUs, {}", nproc(), cpu_model());
    println!(
        "call: Plugin.StartContainer, request payload {} B (Go {} B), {iters} round trips each",
        hop.request_payload_bytes, go.request_payload_bytes
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
    row("ttRPC over mux", hop.rust_ttrpc_over_mux, go.ttrpc_over_mux);
    row("raw socketpair echo", hop.rust_raw, go.raw);
    let (rust, go) = hop.over_raw();
    println!();
    println!("one hop / raw round trip (median): Rust {rust:.2}x, Go {go:.2}x");
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
