//! A transparent wrapper around the connection to the runtime that watches the
//! bytes coming in: it parses the mux frames of the plugin's service connection and
//! the ttRPC requests in them, and records which method carried each request and the
//! parts of a Synchronize. The stub sees the bytes unchanged.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use nri_stub::api::SynchronizeRequest;
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN as TTRPC_HEADER_LEN, MESSAGE_TYPE_REQUEST};
use prost::Message;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Mux frame header: connection id and length, both u32 big endian.
const MUX_HEADER_LEN: usize = 8;
/// The mux connection the plugin serves its ttRPC service on.
const PLUGIN_SERVICE_CONN: u32 = 1;
/// Anything larger is not a frame we understand; the tap then stops watching.
const MAX_LEN: usize = 10 + (4 << 20);

/// One Synchronize request as it arrived.
#[derive(Debug, Clone, Serialize)]
pub struct SyncPart {
    pub pods: usize,
    pub containers: usize,
    pub more: bool,
    /// Size of the ttRPC payload (the encoded request envelope).
    pub bytes: usize,
}

/// What the tap saw so far.
#[derive(Debug, Default)]
struct Seen {
    last_method: Option<String>,
    sync_parts: Vec<SyncPart>,
    broken: Option<String>,
}

/// Shared view of what the tap recorded.
#[derive(Debug, Clone, Default)]
pub struct TapLog(Arc<Mutex<Seen>>);

impl TapLog {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The method of the latest request (the runtime sends one request at a time).
    pub fn last_method(&self) -> Option<String> {
        let seen = self.seen();
        match &seen.broken {
            Some(why) => Some(format!("unknown ({why})")),
            None => seen.last_method.clone(),
        }
    }

    /// The Synchronize requests seen so far; clears the list.
    pub fn take_sync_parts(&self) -> Vec<SyncPart> {
        std::mem::take(&mut self.seen().sync_parts)
    }
}

/// Incremental parser of the incoming byte stream.
#[derive(Debug, Default)]
struct Parser {
    mux: Vec<u8>,
    ttrpc: Vec<u8>,
    stopped: bool,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8], log: &TapLog) {
        if self.stopped {
            return;
        }
        self.mux.extend_from_slice(bytes);
        if let Err(why) = self.drain(log) {
            self.stopped = true;
            self.mux = Vec::new();
            self.ttrpc = Vec::new();
            log.seen().broken = Some(why);
        }
    }

    fn drain(&mut self, log: &TapLog) -> Result<(), String> {
        loop {
            let Some(header) = self.mux.get(..MUX_HEADER_LEN) else {
                return Ok(());
            };
            let conn = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
            let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
            if len > MAX_LEN {
                return Err(format!("mux frame of {len} bytes"));
            }
            let end = MUX_HEADER_LEN + len;
            let Some(payload) = self.mux.get(MUX_HEADER_LEN..end) else {
                return Ok(());
            };
            if conn == PLUGIN_SERVICE_CONN {
                self.ttrpc.extend_from_slice(payload);
                self.messages(log)?;
            }
            self.mux.drain(..end);
        }
    }

    fn messages(&mut self, log: &TapLog) -> Result<(), String> {
        loop {
            let Some(bytes) = self.ttrpc.get(..TTRPC_HEADER_LEN) else {
                return Ok(());
            };
            let mut raw = [0u8; TTRPC_HEADER_LEN];
            raw.copy_from_slice(bytes);
            let header = FrameHeader::decode(&raw);
            let len = header.length as usize;
            if len > MAX_LEN {
                return Err(format!("ttRPC message of {len} bytes"));
            }
            let end = TTRPC_HEADER_LEN + len;
            let Some(payload) = self.ttrpc.get(TTRPC_HEADER_LEN..end) else {
                return Ok(());
            };
            if header.kind == MESSAGE_TYPE_REQUEST {
                record(payload, log)?;
            }
            self.ttrpc.drain(..end);
        }
    }
}

fn record(payload: &[u8], log: &TapLog) -> Result<(), String> {
    let request = nri_ttrpc::proto::Request::decode(payload)
        .map_err(|e| format!("undecodable request: {e}"))?;
    let mut seen = log.seen();
    if request.method == "Synchronize" {
        let sync = SynchronizeRequest::decode(request.payload.as_slice())
            .map_err(|e| format!("undecodable Synchronize: {e}"))?;
        seen.sync_parts.push(SyncPart {
            pods: sync.pods.len(),
            containers: sync.containers.len(),
            more: sync.more,
            bytes: payload.len(),
        });
    }
    seen.last_method = Some(request.method);
    Ok(())
}

/// The connection, watched.
pub struct Tapped<S> {
    inner: S,
    parser: Parser,
    log: TapLog,
}

impl<S> Tapped<S> {
    /// Wraps `inner`; what it sees goes to the returned log.
    pub fn new(inner: S) -> (Tapped<S>, TapLog) {
        let log = TapLog::default();
        let tapped = Tapped {
            inner,
            parser: Parser::default(),
            log: log.clone(),
        };
        (tapped, log)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tapped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &poll {
            if let Some(new) = buf.filled().get(before..) {
                this.parser.feed(new, &this.log);
            }
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tapped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ttrpc_request(method: &str, payload: Vec<u8>) -> Vec<u8> {
        let req = nri_ttrpc::proto::Request {
            service: "nri.pkg.api.v1alpha1.Plugin".into(),
            method: method.into(),
            payload,
            ..Default::default()
        };
        let body = req.encode_to_vec();
        let header = FrameHeader {
            length: body.len() as u32,
            stream_id: 1,
            kind: MESSAGE_TYPE_REQUEST,
            flags: 0,
        };
        let mut out = header.encode().to_vec();
        out.extend(body);
        out
    }

    fn mux_frames(conn: u32, data: &[u8], chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in data.chunks(chunk) {
            out.extend(conn.to_be_bytes());
            out.extend((piece.len() as u32).to_be_bytes());
            out.extend(piece);
        }
        out
    }

    #[test]
    fn records_methods_and_sync_parts_across_frames_and_reads() {
        let sync = SynchronizeRequest {
            more: true,
            containers: vec![Default::default(); 3],
            ..Default::default()
        };
        let mut stream = mux_frames(2, b"ignored response bytes", 7);
        stream.extend(mux_frames(
            1,
            &ttrpc_request("Synchronize", sync.encode_to_vec()),
            5,
        ));
        stream.extend(mux_frames(1, &ttrpc_request("StateChange", vec![]), 100));
        let log = TapLog::default();
        let mut parser = Parser::default();
        for piece in stream.chunks(3) {
            parser.feed(piece, &log);
        }
        assert_eq!(log.last_method().as_deref(), Some("StateChange"));
        let parts = log.take_sync_parts();
        assert_eq!(parts.len(), 1);
        assert_eq!((parts[0].containers, parts[0].more), (3, true));
    }

    #[test]
    fn garbage_stops_the_tap_and_says_so() {
        let log = TapLog::default();
        let mut parser = Parser::default();
        parser.feed(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff], &log);
        assert!(log.last_method().unwrap().starts_with("unknown"));
    }
}
