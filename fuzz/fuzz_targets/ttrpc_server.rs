//! nri-ttrpc: arbitrary bytes into `Server::serve`.
//!
//! The server has an echo method (raw), a typed echo (the payload decoded as
//! a ttRPC request and encoded back) and a method that sleeps. The input is
//! a list of chunks: raw bytes, bare headers, or well-formed requests (with
//! fuzzed ids, names, payloads, timeouts and metadata), all concatenated.
//!
//! Checked: no panic, no hang, `serve` returns once the peer has closed;
//! every message the server writes is a complete response envelope for a
//! stream id that was sent; every request message that arrived whole (and
//! every message on an even stream id, refused as Go's server does) is
//! answered exactly once per occurrence (unless it went to the sleeping
//! method); a raw echo that succeeds returns the request payload.
#![no_main]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_fuzz::{run_paused, ttrpc_frame};
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN, MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};
use nri_ttrpc::{proto, BoxFuture, Server, Status, MAX_MESSAGE_LEN};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERVICE: &str = "fuzz.Echo";

#[derive(Arbitrary, Debug)]
enum Name {
    Echo,
    Typed,
    Sleep,
    Other(String),
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
    Request {
        stream_id: u32,
        kind_request: bool,
        flags: u8,
        known_service: bool,
        method: Name,
        payload: Vec<u8>,
        timeout_nano: i64,
        metadata: Vec<(String, String)>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    chunks: Vec<Chunk>,
    pipe_small: bool,
}

fn encode(chunks: &[Chunk]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        match c {
            Chunk::Raw(b) => out.extend_from_slice(b),
            Chunk::Header {
                length,
                stream_id,
                kind,
                flags,
            } => out.extend_from_slice(
                &FrameHeader {
                    length: *length,
                    stream_id: *stream_id,
                    kind: *kind,
                    flags: *flags,
                }
                .encode(),
            ),
            Chunk::Request {
                stream_id,
                kind_request,
                flags,
                known_service,
                method,
                payload,
                timeout_nano,
                metadata,
            } => {
                let method = match method {
                    Name::Echo => "Echo".to_string(),
                    Name::Typed => "Typed".to_string(),
                    Name::Sleep => "Sleep".to_string(),
                    Name::Other(s) => s.clone(),
                };
                let req = proto::Request {
                    service: if *known_service {
                        SERVICE.to_string()
                    } else {
                        "fuzz.Missing".to_string()
                    },
                    method,
                    payload: payload.clone(),
                    timeout_nano: *timeout_nano,
                    metadata: metadata
                        .iter()
                        .map(|(k, v)| proto::KeyValue {
                            key: k.clone(),
                            value: v.clone(),
                        })
                        .collect(),
                };
                let kind = if *kind_request {
                    MESSAGE_TYPE_REQUEST
                } else {
                    3
                };
                out.extend(ttrpc_frame(*stream_id, kind, *flags, &req.encode_to_vec()));
            }
        }
    }
    out
}

/// What the server must answer, from the bytes as it frames them: per
/// stream id, how many whole messages arrived that get an answer (requests,
/// and any message on an even stream id), whether one of them
/// is a Sleep call (whose answer may be cut off by the end of input) and
/// the payloads of valid raw echo calls.
#[derive(Default)]
struct Want {
    requests: HashMap<u32, usize>,
    unsure: Vec<u32>,
    echo_payloads: HashMap<u32, Vec<u8>>,
}

fn reference(mut rest: &[u8]) -> Want {
    let mut want = Want::default();
    while rest.len() >= HEADER_LEN {
        let mut raw = [0u8; HEADER_LEN];
        raw.copy_from_slice(&rest[..HEADER_LEN]);
        let h = FrameHeader::decode(&raw);
        let len = h.length as usize;
        if rest.len() - HEADER_LEN < len {
            break;
        }
        let payload = &rest[HEADER_LEN..HEADER_LEN + len];
        rest = &rest[HEADER_LEN + len..];
        // Even stream ids are refused whatever the message type (as Go's
        // server does); other non-request messages are ignored.
        let even = h.stream_id % 2 == 0;
        if len > MAX_MESSAGE_LEN || (h.kind != MESSAGE_TYPE_REQUEST && !even) {
            continue;
        }
        *want.requests.entry(h.stream_id).or_default() += 1;
        if even || h.kind != MESSAGE_TYPE_REQUEST {
            continue;
        }
        if let Ok(req) = proto::Request::decode(payload) {
            if req.service == SERVICE && req.method == "Sleep" {
                want.unsure.push(h.stream_id);
            }
            if req.service == SERVICE && req.method == "Echo" {
                want.echo_payloads.insert(h.stream_id, req.payload);
            }
        }
    }
    want
}

fn server() -> Server {
    let mut s = Server::new();
    s.register(SERVICE, "Echo", |_ctx, payload: Vec<u8>| {
        Box::pin(async move { Ok::<_, Status>(payload) }) as BoxFuture<'static, _>
    });
    s.register_msg(SERVICE, "Typed", |_ctx, req: proto::Request| async move {
        Ok::<_, Status>(req)
    });
    s.register(SERVICE, "Sleep", |_ctx, payload: Vec<u8>| {
        Box::pin(async move {
            let ms = payload.first().copied().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(u64::from(ms) * 10)).await;
            Ok::<_, Status>(payload)
        }) as BoxFuture<'static, _>
    });
    s
}

fuzz_target!(|input: Input| {
    let bytes = encode(&input.chunks);
    let want = reference(&bytes);
    let pipe = if input.pipe_small { 13 } else { 1 << 20 };

    let output = run_paused(async move {
        let (mut peer, local) = tokio::io::duplex(pipe);
        let serving = tokio::spawn(Arc::new(server()).serve(local));
        let (mut rd, mut wr) = tokio::io::split(&mut peer);
        let feed = async {
            let _ = wr.write_all(&bytes).await;
            // Let every handler that can finish answer before the end.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = wr.shutdown().await;
        };
        let mut output = Vec::new();
        let collect = rd.read_to_end(&mut output);
        let (_, read) = tokio::join!(feed, collect);
        let _ = read;
        let _ = serving.await.expect("serve task");
        output
    });

    // Everything the server wrote is a sequence of response messages
    // (the last one may be cut off when the connection ends).
    let mut got: HashMap<u32, usize> = HashMap::new();
    let mut rest = output.as_slice();
    while rest.len() >= HEADER_LEN {
        let mut raw = [0u8; HEADER_LEN];
        raw.copy_from_slice(&rest[..HEADER_LEN]);
        let h = FrameHeader::decode(&raw);
        assert_eq!(h.kind, MESSAGE_TYPE_RESPONSE, "server wrote {h:?}");
        assert_eq!(h.flags, 0);
        let len = h.length as usize;
        assert!(len <= MAX_MESSAGE_LEN);
        if rest.len() - HEADER_LEN < len {
            break;
        }
        let resp = proto::Response::decode(&rest[HEADER_LEN..HEADER_LEN + len])
            .expect("server wrote an undecodable response");
        assert!(
            want.requests.contains_key(&h.stream_id),
            "response for stream {} that was never sent",
            h.stream_id
        );
        if resp.status.is_none() {
            if let Some(p) = want.echo_payloads.get(&h.stream_id) {
                if want.requests.get(&h.stream_id) == Some(&1) {
                    assert_eq!(&resp.payload, p, "echo changed the payload");
                }
            }
        }
        *got.entry(h.stream_id).or_default() += 1;
        rest = &rest[HEADER_LEN + len..];
    }
    for (id, n) in &want.requests {
        if want.unsure.contains(id) {
            continue;
        }
        assert_eq!(
            got.get(id).copied().unwrap_or(0),
            *n,
            "stream {id}: answers differ from requests"
        );
    }
});
