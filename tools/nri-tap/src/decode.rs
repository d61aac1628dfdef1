//! Reassembles the bytes of one direction of an NRI connection into ttRPC
//! messages: the mux frames (`[conn id u32][length u32][payload]`) carry,
//! per logical connection, a stream of ttRPC messages
//! (`[length u32][stream id u32][type u8][flags u8][body]`).
//!
//! The decoder only watches: it is fed copies of bytes already forwarded.
//! A frame it cannot make sense of is reported once as [`Item::Malformed`]
//! and decoding of that direction stops; the traffic itself is untouched.

use std::collections::HashMap;

use nri_mux::{ConnId, MAX_FRAME_PAYLOAD};
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN as TTRPC_HEADER_LEN};
use nri_ttrpc::MAX_MESSAGE_LEN;

const MUX_HEADER_LEN: usize = nri_mux::HEADER_LEN;

/// What the decoder found in the bytes fed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// One whole ttRPC message of logical connection `conn`.
    Message {
        /// Mux connection id (1: Plugin service, 2: Runtime service).
        conn: ConnId,
        /// The ttRPC message header.
        header: FrameHeader,
        /// The message body (a protobuf `Request` or `Response`).
        body: Vec<u8>,
    },
    /// A ttRPC message longer than the protocol allows; its body is
    /// skipped (peers answer such messages with an error, or fail).
    Oversized {
        /// Mux connection id.
        conn: ConnId,
        /// The message header.
        header: FrameHeader,
    },
    /// The bytes stopped making sense; nothing more is decoded in this
    /// direction.
    Malformed {
        /// Why.
        reason: String,
        /// The first bytes that could not be decoded (at most 64).
        head: Vec<u8>,
    },
}

#[derive(Default)]
struct Conn {
    buf: Vec<u8>,
    /// Body bytes of an oversized message still to skip.
    skip: usize,
}

/// Decoder of one direction.
///
/// ```
/// use nri_tap::decode::{Deframer, Item};
///
/// // A mux frame on conn 1 holding a ttRPC request (stream 1, body "hi").
/// let mut wire = vec![0, 0, 0, 1, 0, 0, 0, 12];
/// wire.extend([0, 0, 0, 2, 0, 0, 0, 1, 1, 0]);
/// wire.extend(b"hi");
/// let mut d = Deframer::default();
/// let mut items = Vec::new();
/// d.feed(&wire[..5], &mut items); // any split works
/// d.feed(&wire[5..], &mut items);
/// let [Item::Message { conn, header, body }] = &items[..] else { panic!() };
/// assert_eq!((*conn, header.stream_id, body.as_slice()), (1, 1, &b"hi"[..]));
/// ```
#[derive(Default)]
pub struct Deframer {
    buf: Vec<u8>,
    conns: HashMap<ConnId, Conn>,
    broken: bool,
}

impl Deframer {
    /// Whether decoding stopped at a malformed frame.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Feeds the next bytes; appends what they complete to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Item>) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(data);
        let mut at = 0;
        while let Some(hdr) = self.buf.get(at..at + MUX_HEADER_LEN) {
            let id = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]) as usize;
            if len > MAX_FRAME_PAYLOAD || id == nri_mux::RESERVED_CONN_ID {
                self.fail(
                    format!("mux frame on conn {id} with payload length {len}"),
                    at,
                    out,
                );
                return;
            }
            let Some(payload) = self.buf.get(at + MUX_HEADER_LEN..at + MUX_HEADER_LEN + len) else {
                break;
            };
            let conn = self.conns.entry(id).or_default();
            conn.buf.extend_from_slice(payload);
            at += MUX_HEADER_LEN + len;
            if let Err(reason) = messages(id, conn, out) {
                let head = conn.buf.iter().take(64).copied().collect();
                self.broken = true;
                self.buf = Vec::new();
                self.conns.clear();
                out.push(Item::Malformed { reason, head });
                return;
            }
        }
        self.buf.drain(..at);
    }

    fn fail(&mut self, reason: String, at: usize, out: &mut Vec<Item>) {
        let head = self.buf.iter().skip(at).take(64).copied().collect();
        self.broken = true;
        self.buf = Vec::new();
        self.conns.clear();
        out.push(Item::Malformed { reason, head });
    }
}

/// Takes every whole ttRPC message off `conn`'s buffer.
fn messages(id: ConnId, conn: &mut Conn, out: &mut Vec<Item>) -> Result<(), String> {
    let mut at = 0;
    loop {
        if conn.skip > 0 {
            let n = conn.skip.min(conn.buf.len() - at);
            conn.skip -= n;
            at += n;
            if conn.skip > 0 {
                break;
            }
        }
        let Some(raw) = conn.buf.get(at..at + TTRPC_HEADER_LEN) else {
            break;
        };
        let mut bytes = [0u8; TTRPC_HEADER_LEN];
        bytes.copy_from_slice(raw);
        let header = FrameHeader::decode(&bytes);
        if !(1..=3).contains(&header.kind) {
            return Err(format!(
                "ttRPC message of unknown type {} on conn {id}",
                header.kind
            ));
        }
        let len = header.length as usize;
        if len > MAX_MESSAGE_LEN {
            out.push(Item::Oversized { conn: id, header });
            at += TTRPC_HEADER_LEN;
            conn.skip = len;
            continue;
        }
        let Some(body) = conn
            .buf
            .get(at + TTRPC_HEADER_LEN..at + TTRPC_HEADER_LEN + len)
        else {
            break;
        };
        out.push(Item::Message {
            conn: id,
            header,
            body: body.to_vec(),
        });
        at += TTRPC_HEADER_LEN + len;
    }
    conn.buf.drain(..at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = id.to_be_bytes().to_vec();
        v.extend((payload.len() as u32).to_be_bytes());
        v.extend(payload);
        v
    }

    fn msg(stream: u32, kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = FrameHeader {
            length: body.len() as u32,
            stream_id: stream,
            kind,
            flags: 0,
        }
        .encode()
        .to_vec();
        v.extend(body);
        v
    }

    #[test]
    fn a_message_split_over_frames_and_reads_is_reassembled() {
        let m = msg(3, 1, &[7u8; 5000]);
        let (a, b) = m.split_at(4096);
        let mut wire = frame(2, a);
        wire.extend(frame(1, &msg(5, 2, b"x")));
        wire.extend(frame(2, b));
        let mut d = Deframer::default();
        let mut out = Vec::new();
        for chunk in wire.chunks(777) {
            d.feed(chunk, &mut out);
        }
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(&out[0], Item::Message { conn: 1, body, .. } if body == b"x"));
        assert!(
            matches!(&out[1], Item::Message { conn: 2, header, body } if header.stream_id == 3 && body.len() == 5000)
        );
    }

    #[test]
    fn garbage_is_reported_once_and_decoding_stops() {
        let mut d = Deframer::default();
        let mut out = Vec::new();
        d.feed(&[0xff; 20], &mut out);
        d.feed(&frame(1, &msg(1, 1, b"ok")), &mut out);
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0], Item::Malformed { head, .. } if head.len() == 20));
        assert!(d.is_broken());
    }

    #[test]
    fn bad_ttrpc_type_is_malformed() {
        let mut d = Deframer::default();
        let mut out = Vec::new();
        d.feed(&frame(1, &msg(1, 9, b"??")), &mut out);
        assert!(
            matches!(&out[..], [Item::Malformed { reason, .. }] if reason.contains("unknown type 9"))
        );
    }

    #[test]
    fn oversized_message_is_reported_and_skipped() {
        let mut hdr = FrameHeader {
            length: (MAX_MESSAGE_LEN + 1) as u32,
            stream_id: 1,
            kind: 1,
            flags: 0,
        }
        .encode()
        .to_vec();
        hdr.extend(vec![0u8; MAX_MESSAGE_LEN + 1]);
        hdr.extend(msg(3, 1, b"next"));
        let mut d = Deframer::default();
        let mut out = Vec::new();
        for chunk in hdr.chunks(MAX_FRAME_PAYLOAD) {
            d.feed(&frame(1, chunk), &mut out);
        }
        assert!(
            matches!(&out[0], Item::Oversized { conn: 1, .. }),
            "{:?}",
            out.len()
        );
        assert!(matches!(&out[1], Item::Message { body, .. } if body == b"next"));
    }
}
