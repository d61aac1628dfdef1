//! nri-ttrpc: arbitrary bytes as the responses a `Client` reads.
//!
//! A few calls are made (some with timeouts); the peer reads the requests
//! and answers with the fuzzed chunks (raw bytes, bare headers, or response
//! envelopes for the calls' stream ids or any other), then closes.
//!
//! Checked: no panic, no hang: every call finishes once the peer has closed,
//! and `closed()` resolves; a call that succeeds got a payload that one of
//! the sent responses carried with an OK (or no) status.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_fuzz::{run_paused, ttrpc_frame};
use nri_ttrpc::frame::FrameHeader;
use nri_ttrpc::{proto, Client};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Arbitrary, Debug)]
struct Call {
    payload: Vec<u8>,
    timeout_ms: Option<u16>,
}

#[derive(Arbitrary, Debug)]
enum Chunk {
    Raw(Vec<u8>),
    Header {
        length: u32,
        stream_id: u32,
        kind: u8,
        flags: u8,
    },
    Response {
        /// Below 8: the stream id of call `n` (1, 3, 5, ...); else as is.
        stream_id: u32,
        kind: u8,
        flags: u8,
        status: Option<(i32, String)>,
        payload: Vec<u8>,
    },
    /// Lets virtual time pass before the next chunk.
    Pause(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    calls: Vec<Call>,
    chunks: Vec<Chunk>,
    pipe_small: bool,
}

fuzz_target!(|input: Input| {
    let calls: Vec<Call> = input.calls.into_iter().take(6).collect();
    let mut ok_payloads: Vec<Vec<u8>> = Vec::new();
    for c in &input.chunks {
        if let Chunk::Response {
            status, payload, ..
        } = c
        {
            if status.as_ref().is_none_or(|(code, _)| *code == 0) {
                ok_payloads.push(payload.clone());
            }
        }
    }
    let chunks = input.chunks;
    let pipe = if input.pipe_small { 11 } else { 1 << 20 };

    let results = run_paused(async move {
        let (peer, local) = tokio::io::duplex(pipe);
        let client = Client::new(local);
        let mut tasks = Vec::new();
        for call in calls {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                client
                    .call(
                        "fuzz.Svc",
                        "Method",
                        call.payload,
                        call.timeout_ms
                            .map(|ms| Duration::from_millis(u64::from(ms))),
                    )
                    .await
            }));
        }
        // Let the calls go out first, so responses find them waiting.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let (mut rd, mut wr) = tokio::io::split(peer);
        // Swallow the requests so the client's writes never block.
        let sink = tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = rd.read_to_end(&mut buf).await;
        });
        for chunk in chunks {
            let bytes = match chunk {
                Chunk::Raw(b) => b,
                Chunk::Header {
                    length,
                    stream_id,
                    kind,
                    flags,
                } => FrameHeader {
                    length,
                    stream_id,
                    kind,
                    flags,
                }
                .encode()
                .to_vec(),
                Chunk::Response {
                    stream_id,
                    kind,
                    flags,
                    status,
                    payload,
                } => {
                    let id = if stream_id < 8 {
                        stream_id * 2 + 1
                    } else {
                        stream_id
                    };
                    let resp = proto::Response {
                        status: status.map(|(code, message)| proto::Status {
                            code,
                            message,
                            details: Vec::new(),
                        }),
                        payload,
                    };
                    // Mostly responses (type 2); sometimes another type.
                    let kind = if kind < 200 { 2 } else { kind };
                    ttrpc_frame(id, kind, flags, &resp.encode_to_vec())
                }
                Chunk::Pause(ms) => {
                    tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
                    continue;
                }
            };
            if wr.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
        drop(wr);
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.expect("call task"));
        }
        client.closed().await;
        client.close();
        let _ = sink.await;
        results
    });

    for r in results {
        if let Ok(payload) = r {
            assert!(
                ok_payloads.contains(&payload),
                "call returned a payload no response carried"
            );
        }
    }
});
