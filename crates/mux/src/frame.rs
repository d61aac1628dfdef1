//! Frame layout on the trunk: `[conn id u32 BE][payload length u32 BE][payload]`.

use bytes::{BufMut, BytesMut};

/// Identifier of a logical connection within a [`Mux`](crate::Mux).
pub type ConnId = u32;

/// Connection id 0 is reserved and cannot be opened.
pub const RESERVED_CONN_ID: ConnId = 0;

/// The lowest connection id that can be opened.
pub const LOWEST_CONN_ID: ConnId = 1;

/// Connection carrying the `Plugin` ttRPC service (the plugin serves, the runtime calls).
pub const PLUGIN_SERVICE_CONN: ConnId = 1;

/// Connection carrying the `Runtime` ttRPC service (the runtime serves, the plugin calls).
pub const RUNTIME_SERVICE_CONN: ConnId = 2;

/// Length of a frame header: connection id and payload length, both `u32` big-endian.
pub const HEADER_LEN: usize = 8;

/// Largest frame payload accepted from the peer: a ttRPC message header (10 bytes) plus
/// the largest ttRPC message body (4 MiB).
pub const MAX_FRAME_PAYLOAD: usize = 10 + (4 << 20);

/// Size of the buffer through which Go peers read each logical connection. Go peers fail
/// when a frame larger than this is read into an empty buffer, so frames sent to them
/// must not exceed it.
pub const GO_READ_BUFFER: usize = 4096;

/// Default number of frames that may wait unread on one connection.
pub const DEFAULT_READ_QUEUE_LEN: usize = 256;

/// A frame header: the connection the payload belongs to and its length.
///
/// For code that reads or writes the trunk without a [`Mux`](crate::Mux),
/// such as a blocking plugin.
///
/// ```
/// use nri_mux::FrameHeader;
///
/// let header = FrameHeader { id: 2, len: 300 };
/// let raw = header.encode();
/// assert_eq!(raw, [0, 0, 0, 2, 0, 0, 1, 44]);
/// assert_eq!(FrameHeader::decode(raw), header);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The logical connection.
    pub id: ConnId,
    /// The payload's length in bytes.
    pub len: u32,
}

impl FrameHeader {
    /// Reads a header from its 8 wire bytes.
    pub fn decode(raw: [u8; HEADER_LEN]) -> FrameHeader {
        let [a, b, c, d, e, f, g, h] = raw;
        FrameHeader {
            id: u32::from_be_bytes([a, b, c, d]),
            len: u32::from_be_bytes([e, f, g, h]),
        }
    }

    /// The header's 8 wire bytes.
    pub fn encode(self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let (id, len) = out.split_at_mut(4);
        id.copy_from_slice(&self.id.to_be_bytes());
        len.copy_from_slice(&self.len.to_be_bytes());
        out
    }
}

/// Appends `data` to `out` as frames for conn `id`: a first frame of at most
/// `max_frame` payload bytes, then the rest in frames of at most
/// [`MAX_FRAME_PAYLOAD`] bytes. Empty `data` yields one header-only frame.
/// Returns the number of bytes appended.
///
/// This is the pattern Go peers produce themselves when one write carries one
/// ttRPC message (a 4096-byte buffered writer: a first 4096-byte frame with
/// the message header, then the remainder directly), and the one their
/// readers rely on: the first frame fits the reader's 4096-byte buffer, and a
/// large remainder is read straight into the message buffer. Splitting a large
/// message into many small frames instead could overflow a Go reader's
/// 256-frame queue (a 4 MiB message would be 1024 frames).
///
/// `max_frame` is clamped to 1..=[`MAX_FRAME_PAYLOAD`]; to a Go peer it must
/// be at most [`GO_READ_BUFFER`].
///
/// ```
/// use nri_mux::{encode_frames, FrameHeader, HEADER_LEN};
/// use bytes::BytesMut;
///
/// let mut out = BytesMut::new();
/// let n = encode_frames(&mut out, 1, &[7u8; 5000], 4096);
/// assert_eq!(n, 2 * HEADER_LEN + 5000);
/// let first = FrameHeader::decode(out[..HEADER_LEN].try_into().unwrap());
/// assert_eq!(first, FrameHeader { id: 1, len: 4096 });
/// ```
pub fn encode_frames(out: &mut BytesMut, id: ConnId, data: &[u8], max_frame: usize) -> usize {
    let max_frame = max_frame.clamp(1, MAX_FRAME_PAYLOAD);
    let (first, rest) = data.split_at(data.len().min(max_frame));
    let frames = 1 + rest.len().div_ceil(MAX_FRAME_PAYLOAD);
    let total = frames * HEADER_LEN + data.len();
    out.reserve(total);
    for chunk in std::iter::once(first).chain(rest.chunks(MAX_FRAME_PAYLOAD)) {
        out.put_u32(id);
        // chunk.len() <= MAX_FRAME_PAYLOAD < u32::MAX, so this never saturates.
        out.put_u32(u32::try_from(chunk.len()).unwrap_or(u32::MAX));
        out.put_slice(chunk);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(mut raw: &[u8]) -> Vec<(ConnId, Vec<u8>)> {
        let mut frames = Vec::new();
        while !raw.is_empty() {
            let mut hdr = [0u8; HEADER_LEN];
            hdr.copy_from_slice(&raw[..HEADER_LEN]);
            let h = FrameHeader::decode(hdr);
            let end = HEADER_LEN + h.len as usize;
            frames.push((h.id, raw[HEADER_LEN..end].to_vec()));
            raw = &raw[end..];
        }
        frames
    }

    #[test]
    fn header_round_trip_is_big_endian() {
        let h = FrameHeader {
            id: 0x0102_0304,
            len: 0x0a0b_0c0d,
        };
        assert_eq!(h.encode(), [1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(FrameHeader::decode(h.encode()), h);
    }

    #[test]
    fn empty_data_gives_one_header_only_frame() {
        let mut out = BytesMut::new();
        let n = encode_frames(&mut out, 7, &[], 4096);
        assert_eq!(n, HEADER_LEN);
        assert_eq!(&out[..], &[0, 0, 0, 7, 0, 0, 0, 0]);
    }

    #[test]
    fn first_frame_at_max_frame_then_the_rest() {
        let data: Vec<u8> = (0..10u8).collect();
        let mut out = BytesMut::new();
        let n = encode_frames(&mut out, 2, &data, 4);
        assert_eq!(n, out.len());
        let frames = parse(&out);
        assert_eq!(
            frames,
            vec![(2, vec![0, 1, 2, 3]), (2, vec![4, 5, 6, 7, 8, 9])]
        );
    }

    #[test]
    fn rest_is_split_at_max_frame_payload() {
        let data = vec![3u8; 4096 + MAX_FRAME_PAYLOAD + 5];
        let mut out = BytesMut::new();
        let n = encode_frames(&mut out, 1, &data, 4096);
        assert_eq!(n, out.len());
        let lens: Vec<usize> = parse(&out).iter().map(|(_, p)| p.len()).collect();
        assert_eq!(lens, vec![4096, MAX_FRAME_PAYLOAD, 5]);
    }

    #[test]
    fn exact_multiple_has_no_trailing_empty_frame() {
        let data = vec![1u8; 8];
        let mut out = BytesMut::new();
        encode_frames(&mut out, 1, &data, 4);
        assert_eq!(parse(&out).len(), 2);
    }

    #[test]
    fn zero_max_frame_is_clamped() {
        let mut out = BytesMut::new();
        encode_frames(&mut out, 1, &[9, 9], 0);
        assert_eq!(parse(&out), vec![(1, vec![9]), (1, vec![9])]);
    }
}
