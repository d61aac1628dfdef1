//! Message framing: the 10-byte ttRPC header and a bounded frame reader.
//!
//! Every message on the wire is a header followed by `length` payload bytes:
//!
//! ```text
//! +----------------+----------------+--------+--------+----------------+
//! | length u32 BE  | stream id u32BE| type u8| flags u8| payload ...   |
//! +----------------+----------------+--------+--------+----------------+
//! ```

#[cfg(feature = "mux")]
use std::any::Any;
#[cfg(feature = "mux")]
use std::pin::Pin;
#[cfg(feature = "mux")]
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
#[cfg(feature = "mux")]
use std::task::{Context, Poll};

#[cfg(feature = "async")]
use bytes::{Buf, Bytes, BytesMut};
#[cfg(feature = "mux")]
use nri_mux::MuxConn;
#[cfg(feature = "async")]
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

#[cfg(feature = "async")]
use crate::error::Error;

/// Length of the message header in bytes.
pub const HEADER_LEN: usize = 10;

/// Largest payload (encoded envelope) accepted or sent: 4 MiB.
pub const MAX_MESSAGE_LEN: usize = 4 << 20;

/// Message type of a request.
pub const MESSAGE_TYPE_REQUEST: u8 = 1;
/// Message type of a response.
pub const MESSAGE_TYPE_RESPONSE: u8 = 2;
/// Message type of a streaming data message (not used by unary calls).
pub const MESSAGE_TYPE_DATA: u8 = 3;

/// Size of the chunks an oversized payload is discarded in.
#[cfg(feature = "async")]
const DISCARD_CHUNK: usize = 16 * 1024;
/// Initial read buffer capacity.
#[cfg(feature = "async")]
const READ_BUF: usize = 8 * 1024;

/// A decoded message header.
///
/// ```
/// use nri_ttrpc::frame::{FrameHeader, MESSAGE_TYPE_REQUEST};
///
/// let h = FrameHeader { length: 7, stream_id: 3, kind: MESSAGE_TYPE_REQUEST, flags: 0 };
/// let bytes = h.encode();
/// assert_eq!(bytes, [0, 0, 0, 7, 0, 0, 0, 3, 1, 0]);
/// assert_eq!(FrameHeader::decode(&bytes), h);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length, excluding the header.
    pub length: u32,
    /// Stream id: odd for client-initiated streams.
    pub stream_id: u32,
    /// Message type ([`MESSAGE_TYPE_REQUEST`], [`MESSAGE_TYPE_RESPONSE`], ...).
    pub kind: u8,
    /// Type-specific flags.
    pub flags: u8,
}

impl FrameHeader {
    /// Encodes the header into its 10 wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&self.length.to_be_bytes());
        out[4..8].copy_from_slice(&self.stream_id.to_be_bytes());
        out[8] = self.kind;
        out[9] = self.flags;
        out
    }

    /// Decodes a header from its 10 wire bytes.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Self {
        let [l0, l1, l2, l3, s0, s1, s2, s3, kind, flags] = *bytes;
        FrameHeader {
            length: u32::from_be_bytes([l0, l1, l2, l3]),
            stream_id: u32::from_be_bytes([s0, s1, s2, s3]),
            kind,
            flags,
        }
    }
}

/// The text Go's ttRPC uses for a message over the size limit (the
/// description of its `ResourceExhausted` status).
///
/// ```
/// assert_eq!(
///     nri_ttrpc::frame::oversize_message(5, 4),
///     "message length 5 exceed maximum message size of 4"
/// );
/// ```
pub fn oversize_message(len: usize, max: usize) -> String {
    format!("message length {len} exceed maximum message size of {max}")
}

/// Human-readable name of a message type, for logs and errors.
#[cfg(feature = "async")]
pub(crate) fn kind_name(kind: u8) -> &'static str {
    match kind {
        MESSAGE_TYPE_REQUEST => "request",
        MESSAGE_TYPE_RESPONSE => "response",
        MESSAGE_TYPE_DATA => "data",
        _ => "unknown",
    }
}

/// Encodes `msg` behind a header into one contiguous buffer.
///
/// Fails with [`Error::Oversized`] when the encoded message exceeds
/// [`MAX_MESSAGE_LEN`]; nothing is allocated for it in that case.
#[cfg(feature = "async")]
pub(crate) fn encode_frame(
    stream_id: u32,
    kind: u8,
    flags: u8,
    msg: &impl prost::Message,
) -> Result<Vec<u8>, Error> {
    let mut buf = start_frame(stream_id, kind, flags, msg.encoded_len())?;
    InPlace(msg).put(&mut buf)?;
    Ok(buf)
}

/// The payload field of an envelope being encoded into a frame: a message
/// encoded in place (no intermediate buffer), or bytes already encoded.
#[cfg(feature = "async")]
pub(crate) trait Payload {
    /// Encoded length in bytes.
    fn encoded_len(&self) -> usize;
    /// Appends the encoding (`encoded_len` bytes) to `buf`.
    fn put(&self, buf: &mut Vec<u8>) -> Result<(), Error>;
}

/// A message as a [`Payload`].
#[cfg(feature = "async")]
pub(crate) struct InPlace<'a, M>(pub(crate) &'a M);

#[cfg(feature = "async")]
impl<M: prost::Message> Payload for InPlace<'_, M> {
    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }
    fn put(&self, buf: &mut Vec<u8>) -> Result<(), Error> {
        self.0
            .encode(buf)
            .map_err(|e| Error::Protocol(format!("encoding message: {e}")))
    }
}

#[cfg(feature = "async")]
impl Payload for [u8] {
    fn encoded_len(&self) -> usize {
        self.len()
    }
    fn put(&self, buf: &mut Vec<u8>) -> Result<(), Error> {
        buf.extend_from_slice(self);
        Ok(())
    }
}

/// Length of a length-delimited field (`bytes`, `string`, message) of
/// `len` bytes; proto3 leaves an empty one out.
#[cfg(feature = "async")]
fn delimited_len(tag: u32, len: usize) -> usize {
    use prost::encoding::{encoded_len_varint, key_len};
    if len == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(len as u64) + len
    }
}

/// Key and length of a length-delimited field, unless it is empty.
#[cfg(feature = "async")]
fn put_delimited_head(tag: u32, len: usize, buf: &mut Vec<u8>) {
    use prost::encoding::{encode_key, encode_varint, WireType};
    if len != 0 {
        encode_key(tag, WireType::LengthDelimited, buf);
        encode_varint(len as u64, buf);
    }
}

/// Allocates a frame of `len` envelope bytes with its header written;
/// [`Error::Oversized`] (and no allocation) past [`MAX_MESSAGE_LEN`].
#[cfg(feature = "async")]
fn start_frame(stream_id: u32, kind: u8, flags: u8, len: usize) -> Result<Vec<u8>, Error> {
    if len > MAX_MESSAGE_LEN {
        return Err(Error::Oversized {
            len,
            max: MAX_MESSAGE_LEN,
        });
    }
    let length = u32::try_from(len).map_err(|_| Error::Oversized {
        len,
        max: MAX_MESSAGE_LEN,
    })?;
    let mut buf = Vec::with_capacity(HEADER_LEN + len);
    let header = FrameHeader {
        length,
        stream_id,
        kind,
        flags,
    };
    buf.extend_from_slice(&header.encode());
    Ok(buf)
}

/// Checks that a frame holds exactly what its header announced.
#[cfg(feature = "async")]
fn finish_frame(buf: Vec<u8>, len: usize) -> Result<Vec<u8>, Error> {
    if buf.len() != HEADER_LEN + len {
        return Err(Error::Protocol(format!(
            "encoded {} envelope bytes, announced {len}",
            buf.len().saturating_sub(HEADER_LEN)
        )));
    }
    Ok(buf)
}

/// Encodes a request frame: the bytes [`encode_frame`] makes of a
/// [`proto::Request`](crate::proto::Request) with these fields, but with
/// the payload encoded straight into the frame.
///
/// Fails with [`Error::Oversized`] when the envelope exceeds
/// [`MAX_MESSAGE_LEN`]; nothing is allocated for it in that case.
#[cfg(feature = "async")]
pub(crate) fn encode_request_frame(
    service: &str,
    method: &str,
    payload: &(impl Payload + ?Sized),
    timeout_nano: i64,
    metadata: &[crate::proto::KeyValue],
) -> Result<Vec<u8>, Error> {
    use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, message};
    let payload_len = payload.encoded_len();
    let timeout_len = if timeout_nano == 0 {
        0
    } else {
        key_len(4) + encoded_len_varint(timeout_nano as u64)
    };
    let len = delimited_len(1, service.len())
        + delimited_len(2, method.len())
        + delimited_len(3, payload_len)
        + timeout_len
        + message::encoded_len_repeated(5, metadata);
    let mut buf = start_frame(0, MESSAGE_TYPE_REQUEST, 0, len)?;
    put_delimited_head(1, service.len(), &mut buf);
    buf.extend_from_slice(service.as_bytes());
    put_delimited_head(2, method.len(), &mut buf);
    buf.extend_from_slice(method.as_bytes());
    put_delimited_head(3, payload_len, &mut buf);
    if payload_len != 0 {
        payload.put(&mut buf)?;
    }
    if timeout_nano != 0 {
        encode_key(4, prost::encoding::WireType::Varint, &mut buf);
        encode_varint(timeout_nano as u64, &mut buf);
    }
    message::encode_repeated(5, metadata, &mut buf);
    finish_frame(buf, len)
}

/// Encodes the frame of a successful response: the bytes [`encode_frame`]
/// makes of a [`proto::Response`](crate::proto::Response) without status,
/// with the payload encoded straight into the frame.
#[cfg(feature = "async")]
pub(crate) fn encode_ok_response_frame(
    stream_id: u32,
    payload: &(impl Payload + ?Sized),
) -> Result<Vec<u8>, Error> {
    let payload_len = payload.encoded_len();
    let len = delimited_len(2, payload_len);
    let mut buf = start_frame(stream_id, MESSAGE_TYPE_RESPONSE, 0, len)?;
    put_delimited_head(2, payload_len, &mut buf);
    if payload_len != 0 {
        payload.put(&mut buf)?;
    }
    finish_frame(buf, len)
}

/// Rewrites the stream id of a frame built by [`encode_frame`].
#[cfg(feature = "async")]
pub(crate) fn set_stream_id(frame: &mut [u8], stream_id: u32) {
    if let Some(slot) = frame.get_mut(4..8) {
        slot.copy_from_slice(&stream_id.to_be_bytes());
    }
}

/// What the [`FrameReader`] produced.
#[cfg(feature = "async")]
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A complete message.
    Frame(FrameHeader, Bytes),
    /// A message whose announced length exceeded [`MAX_MESSAGE_LEN`]; its
    /// payload has been read and discarded.
    Oversized(FrameHeader),
    /// The peer closed the stream cleanly, between two messages.
    Eof,
}

/// Where a [`FrameReader`] reads from.
#[cfg(feature = "async")]
pub(crate) enum Source {
    /// Any byte stream: its bytes are read into the reader's buffer.
    Stream(Box<dyn AsyncRead + Send + Unpin>),
    /// A mux connection, shared with its writing half: each received piece
    /// is taken over as it is, so that a message that arrives whole in one
    /// piece is not copied.
    #[cfg(feature = "mux")]
    Mux(Arc<Mutex<MuxConn>>),
}

/// Reads frames from a byte stream with bounded memory.
///
/// [`FrameReader::next`] is cancel-safe: all progress is kept in the reader,
/// so the future may be dropped (e.g. in `tokio::select!`) and called again
/// without losing bytes.
#[cfg(feature = "async")]
pub(crate) struct FrameReader {
    source: Source,
    /// Received bytes not yet taken, as a [`Source::Mux`] handed them over.
    /// Messages that lie whole in it are sliced out of it; only one of
    /// `chunk` and `buf` holds bytes at a time.
    chunk: Bytes,
    buf: BytesMut,
    /// Header of an oversized message being discarded, and the bytes left.
    discarding: Option<(FrameHeader, usize)>,
}

#[cfg(feature = "async")]
impl FrameReader {
    /// A reader of any byte stream.
    #[cfg(test)]
    pub(crate) fn new(inner: impl AsyncRead + Send + Unpin + 'static) -> Self {
        FrameReader::from_source(Source::Stream(Box::new(inner)))
    }

    pub(crate) fn from_source(source: Source) -> Self {
        FrameReader {
            source,
            chunk: Bytes::new(),
            buf: BytesMut::with_capacity(READ_BUF),
            discarding: None,
        }
    }

    /// Returns the next message, an oversize notice, or EOF.
    pub(crate) async fn next(&mut self) -> Result<Inbound, Error> {
        loop {
            if let Some((header, left)) = self.discarding.as_mut() {
                let from_chunk = (*left).min(self.chunk.len());
                self.chunk.advance(from_chunk);
                *left -= from_chunk;
                let drop_now = (*left).min(self.buf.len());
                self.buf.advance(drop_now);
                *left -= drop_now;
                if *left == 0 {
                    let header = *header;
                    self.discarding = None;
                    return Ok(Inbound::Oversized(header));
                }
                // Keep the buffer small while discarding.
                if self.buf.capacity() < DISCARD_CHUNK {
                    self.buf.reserve(DISCARD_CHUNK);
                }
                self.fill("oversized message").await?;
                continue;
            }

            if !self.chunk.is_empty() {
                match front(&self.chunk) {
                    Front::Whole(header) => {
                        self.chunk.advance(HEADER_LEN);
                        let payload = self.chunk.split_to(header.length as usize);
                        return Ok(Inbound::Frame(header, payload));
                    }
                    Front::Oversized(header) => {
                        self.chunk.advance(HEADER_LEN);
                        self.start_discarding(header);
                        continue;
                    }
                    // Part of a message: it is put together in the buffer.
                    Front::Part(_) => {
                        self.buf.extend_from_slice(&self.chunk);
                        self.chunk = Bytes::new();
                    }
                }
            }

            match front(&self.buf) {
                Front::Whole(header) => {
                    self.buf.advance(HEADER_LEN);
                    let payload = self.buf.split_to(header.length as usize).freeze();
                    return Ok(Inbound::Frame(header, payload));
                }
                Front::Oversized(header) => {
                    self.buf.advance(HEADER_LEN);
                    self.start_discarding(header);
                }
                Front::Part(_) if self.buf.is_empty() => {
                    if self.buf.capacity() < READ_BUF {
                        self.buf.reserve(READ_BUF);
                    }
                    if self.read_more().await? == 0 {
                        return Ok(Inbound::Eof);
                    }
                }
                Front::Part(total) => {
                    let what = match self.buf.len() < HEADER_LEN {
                        true => "message header",
                        false => "message payload",
                    };
                    self.buf.reserve(total - self.buf.len());
                    self.fill(what).await?;
                }
            }
        }
    }

    fn start_discarding(&mut self, header: FrameHeader) {
        let len = header.length as usize;
        tracing::debug!(
            stream_id = header.stream_id,
            len,
            "discarding oversized message"
        );
        self.discarding = Some((header, len));
    }

    /// Reads more bytes: into `buf`, or as `chunk` when `buf` is empty and
    /// the source hands over its bytes. Returns how many; 0 is the end of
    /// the stream.
    async fn read_more(&mut self) -> Result<usize, Error> {
        match &mut self.source {
            Source::Stream(inner) => Ok(inner.read_buf(&mut self.buf).await?),
            #[cfg(feature = "mux")]
            Source::Mux(conn) => {
                let bytes = std::future::poll_fn(|cx| lock(conn).poll_read_bytes(cx)).await?;
                let n = bytes.len();
                if self.buf.is_empty() {
                    self.chunk = bytes;
                } else {
                    self.buf.extend_from_slice(&bytes);
                }
                Ok(n)
            }
        }
    }

    /// Reads more bytes; EOF here means the peer stopped mid-message.
    async fn fill(&mut self, what: &str) -> Result<(), Error> {
        if self.read_more().await? == 0 {
            return Err(Error::Protocol(format!(
                "connection closed in the middle of a {what}"
            )));
        }
        Ok(())
    }
}

/// What the bytes at the front of a buffer hold.
#[cfg(feature = "async")]
enum Front {
    /// A whole message, header and payload.
    Whole(FrameHeader),
    /// The header of a message above [`MAX_MESSAGE_LEN`].
    Oversized(FrameHeader),
    /// Part of a message, which takes this many bytes in all (the header's
    /// length while not even the header is there).
    Part(usize),
}

#[cfg(feature = "async")]
fn front(buf: &[u8]) -> Front {
    let Some(header) = buf
        .get(..HEADER_LEN)
        .and_then(|h| <&[u8; HEADER_LEN]>::try_from(h).ok())
        .map(FrameHeader::decode)
    else {
        return Front::Part(HEADER_LEN);
    };
    let len = header.length as usize;
    if len > MAX_MESSAGE_LEN {
        Front::Oversized(header)
    } else if buf.len() - HEADER_LEN >= len {
        Front::Whole(header)
    } else {
        Front::Part(HEADER_LEN + len)
    }
}

/// Locks a mux connection shared by the two halves of a stream.
#[cfg(feature = "mux")]
fn lock(conn: &Mutex<MuxConn>) -> MutexGuard<'_, MuxConn> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The writing half of a mux connection whose reading half is a
/// [`Source::Mux`].
#[cfg(feature = "mux")]
struct MuxWriter(Arc<Mutex<MuxConn>>);

#[cfg(feature = "mux")]
impl AsyncWrite for MuxWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *lock(&self.0)).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *lock(&self.0)).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *lock(&self.0)).poll_shutdown(cx)
    }
}

/// Splits `stream` into the source of its frames and its writing half. A
/// [`MuxConn`] hands its received pieces over without a copy; any other
/// stream is split with [`tokio::io::split`].
#[cfg(feature = "mux")]
pub(crate) fn split<S>(stream: S) -> (Source, Box<dyn AsyncWrite + Send + Unpin>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let mut slot = Some(stream);
    let mux = (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<MuxConn>>()
        .and_then(Option::take);
    match (mux, slot) {
        (Some(conn), _) => {
            let conn = Arc::new(Mutex::new(conn));
            (Source::Mux(Arc::clone(&conn)), Box::new(MuxWriter(conn)))
        }
        (None, Some(stream)) => split_stream(stream),
        // Not reached: only a `MuxConn` is taken out of `slot`. A stream
        // that ends at once is the harmless answer.
        (None, None) => (
            Source::Stream(Box::new(tokio::io::empty())),
            Box::new(tokio::io::sink()),
        ),
    }
}

/// Splits `stream` into the source of its frames and its writing half.
#[cfg(all(feature = "async", not(feature = "mux")))]
pub(crate) fn split<S>(stream: S) -> (Source, Box<dyn AsyncWrite + Send + Unpin>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    split_stream(stream)
}

#[cfg(feature = "async")]
fn split_stream<S>(stream: S) -> (Source, Box<dyn AsyncWrite + Send + Unpin>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    (Source::Stream(Box::new(rd)), Box::new(wr))
}

#[cfg(all(test, feature = "async"))]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn header(length: u32, stream_id: u32, kind: u8) -> [u8; HEADER_LEN] {
        FrameHeader {
            length,
            stream_id,
            kind,
            flags: 0,
        }
        .encode()
    }

    /// The envelopes encoded in place are byte for byte what prost makes
    /// of the envelope messages, for empty and set fields alike.
    #[test]
    fn in_place_envelopes_match_the_messages() {
        use crate::proto::{KeyValue, Request, Response};
        use prost::Message;
        let inner = Request {
            service: "inner".into(),
            payload: vec![7; 300],
            ..Default::default()
        };
        let metadata = vec![
            KeyValue {
                key: "traceparent".into(),
                value: "00-abc".into(),
            },
            KeyValue {
                key: "k".into(),
                value: String::new(),
            },
        ];
        // (service, method, payload, timeout_nano, metadata)
        type Case<'a> = (&'a str, &'a str, Vec<u8>, i64, &'a [KeyValue]);
        let cases: [Case; 5] = [
            ("svc", "M", inner.encode_to_vec(), 1_000_000_000, &metadata),
            ("", "", Vec::new(), 0, &[]),
            (
                "nri.pkg.api.v1alpha1.Plugin",
                "Synchronize",
                vec![1; 200_000],
                -5,
                &[],
            ),
            ("svc", "", Vec::new(), i64::MAX, &metadata[..1]),
            ("", "M", vec![0], 0, &metadata),
        ];
        for (service, method, payload, timeout_nano, metadata) in cases {
            let want = encode_frame(
                0,
                MESSAGE_TYPE_REQUEST,
                0,
                &Request {
                    service: service.into(),
                    method: method.into(),
                    payload: payload.clone(),
                    timeout_nano,
                    metadata: metadata.to_vec(),
                },
            )
            .unwrap();
            let bytes = encode_request_frame(service, method, &payload[..], timeout_nano, metadata)
                .unwrap();
            assert_eq!(bytes, want, "request {service}/{method}, bytes");
            let decoded = Request::decode(payload.as_slice()).ok();
            if decoded
                .as_ref()
                .is_some_and(|d| d.encode_to_vec() == payload)
            {
                let msg = decoded.unwrap();
                let in_place =
                    encode_request_frame(service, method, &InPlace(&msg), timeout_nano, metadata)
                        .unwrap();
                assert_eq!(in_place, want, "request {service}/{method}, in place");
            }

            let want = encode_frame(
                9,
                MESSAGE_TYPE_RESPONSE,
                0,
                &Response {
                    status: None,
                    payload: payload.clone(),
                },
            )
            .unwrap();
            assert_eq!(encode_ok_response_frame(9, &payload[..]).unwrap(), want);
        }
        let in_place = encode_ok_response_frame(3, &InPlace(&inner)).unwrap();
        let want = encode_frame(
            3,
            MESSAGE_TYPE_RESPONSE,
            0,
            &Response {
                status: None,
                payload: inner.encode_to_vec(),
            },
        )
        .unwrap();
        assert_eq!(in_place, want);
    }

    #[test]
    fn in_place_envelopes_refuse_oversized() {
        let big = vec![0u8; MAX_MESSAGE_LEN];
        assert!(matches!(
            encode_request_frame("s", "m", &big[..], 0, &[]),
            Err(Error::Oversized { .. })
        ));
        assert!(matches!(
            encode_ok_response_frame(1, &big[..]),
            Err(Error::Oversized { .. })
        ));
    }

    #[tokio::test]
    async fn reads_frames_split_across_writes() {
        let (mut a, b) = tokio::io::duplex(64);
        let mut reader = FrameReader::new(b);
        let writer = tokio::spawn(async move {
            let mut bytes = header(3, 1, MESSAGE_TYPE_REQUEST).to_vec();
            bytes.extend_from_slice(b"abc");
            bytes.extend_from_slice(&header(0, 3, MESSAGE_TYPE_RESPONSE));
            for b in bytes {
                a.write_all(&[b]).await.unwrap();
            }
        });
        match reader.next().await.unwrap() {
            Inbound::Frame(h, p) => {
                assert_eq!(h.stream_id, 1);
                assert_eq!(h.kind, MESSAGE_TYPE_REQUEST);
                assert_eq!(&p[..], b"abc");
            }
            other => panic!("unexpected {other:?}"),
        }
        match reader.next().await.unwrap() {
            Inbound::Frame(h, p) => {
                assert_eq!(h.stream_id, 3);
                assert!(p.is_empty());
            }
            other => panic!("unexpected {other:?}"),
        }
        writer.await.unwrap();
        assert!(matches!(reader.next().await.unwrap(), Inbound::Eof));
    }

    #[tokio::test]
    async fn discards_oversized_payload_without_buffering_it() {
        let (mut a, b) = tokio::io::duplex(64 * 1024);
        let mut reader = FrameReader::new(b);
        let len = MAX_MESSAGE_LEN + 1;
        let writer = tokio::spawn(async move {
            a.write_all(&header(len as u32, 5, MESSAGE_TYPE_REQUEST))
                .await
                .unwrap();
            let chunk = vec![0x55u8; 64 * 1024];
            let mut left = len;
            while left > 0 {
                let n = left.min(chunk.len());
                a.write_all(&chunk[..n]).await.unwrap();
                left -= n;
            }
            a.write_all(&header(1, 7, MESSAGE_TYPE_REQUEST))
                .await
                .unwrap();
            a.write_all(b"z").await.unwrap();
        });
        match reader.next().await.unwrap() {
            Inbound::Oversized(h) => {
                assert_eq!(h.stream_id, 5);
                assert_eq!(h.length as usize, len);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(reader.buf.capacity() < 1024 * 1024);
        match reader.next().await.unwrap() {
            Inbound::Frame(h, p) => {
                assert_eq!(h.stream_id, 7);
                assert_eq!(&p[..], b"z");
            }
            other => panic!("unexpected {other:?}"),
        }
        writer.await.unwrap();
    }

    /// A frame of the mux's wire format: connection id, length, payload.
    #[cfg(feature = "mux")]
    fn mux_frame(conn: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = conn.to_be_bytes().to_vec();
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A message: header and `len` payload bytes made from `seed`.
    fn message(len: usize, stream_id: u32, seed: u8) -> Vec<u8> {
        let mut m = header(len as u32, stream_id, MESSAGE_TYPE_REQUEST).to_vec();
        m.extend((0..len).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)));
        m
    }

    async fn expect_frame(reader: &mut FrameReader, want: &[u8]) {
        match reader.next().await.unwrap() {
            Inbound::Frame(h, p) => {
                assert_eq!(
                    h.stream_id,
                    u32::from_be_bytes(want[4..8].try_into().unwrap())
                );
                assert_eq!(&p[..], &want[HEADER_LEN..]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Over a mux connection, messages whole in one received piece, split
    /// across pieces anywhere (inside the header too), several in one
    /// piece and an oversized one all read as over a plain stream.
    #[cfg(feature = "mux")]
    #[tokio::test]
    async fn reads_messages_from_mux_pieces_however_they_are_cut() {
        use nri_mux::{Mux, MuxOptions};
        let (a, mut raw) = tokio::net::UnixStream::pair().unwrap();
        let mux = Mux::new(a, MuxOptions::default());
        let (source, _writer) = split(mux.open(1).unwrap());
        assert!(matches!(source, Source::Mux(_)));
        let mut reader = FrameReader::from_source(source);

        let whole = message(300_000, 1, 1);
        let small = [message(3, 3, 2), message(0, 5, 3), message(20, 7, 4)];
        let cut = message(200_000, 9, 5);
        let after = message(5, 11, 6);
        let oversized_len = MAX_MESSAGE_LEN + 1;
        // The mux reads a frame together with the one before it when that
        // one is small and unread: pieces after a large one stay apart.
        let mut stream = Vec::new();
        stream.extend(mux_frame(1, &whole));
        stream.extend(mux_frame(1, &small.concat()));
        // `cut` in three pieces: inside its header, inside its payload.
        stream.extend(mux_frame(1, &cut[..4]));
        stream.extend(mux_frame(1, &cut[4..100_000]));
        // The end of `cut` shares a piece with the start of `after`, whose
        // header ends in the next piece.
        let mut tail = cut[100_000..].to_vec();
        tail.extend_from_slice(&after[..7]);
        stream.extend(mux_frame(1, &tail));
        stream.extend(mux_frame(1, &after[7..]));
        stream.extend(mux_frame(
            1,
            &header(oversized_len as u32, 13, MESSAGE_TYPE_REQUEST),
        ));
        let writer = tokio::spawn(async move {
            raw.write_all(&stream).await.unwrap();
            // The oversized payload, then one more message.
            let chunk = vec![0x55u8; 1 << 20];
            let mut left = oversized_len;
            while left > 0 {
                let n = left.min(chunk.len());
                raw.write_all(&mux_frame(1, &chunk[..n])).await.unwrap();
                left -= n;
            }
            raw.write_all(&mux_frame(1, &message(2, 15, 7)))
                .await
                .unwrap();
            raw
        });

        expect_frame(&mut reader, &whole).await;
        for m in &small {
            expect_frame(&mut reader, m).await;
        }
        expect_frame(&mut reader, &cut).await;
        expect_frame(&mut reader, &after).await;
        match reader.next().await.unwrap() {
            Inbound::Oversized(h) => {
                assert_eq!(h.stream_id, 13);
                assert_eq!(h.length as usize, oversized_len);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(reader.buf.capacity() < MAX_MESSAGE_LEN);
        expect_frame(&mut reader, &message(2, 15, 7)).await;
        let raw = writer.await.unwrap();
        drop(raw);
        assert!(matches!(reader.next().await.unwrap(), Inbound::Eof));
    }

    /// A message that arrives in one piece is handed on as a slice of that
    /// piece, not copied.
    #[cfg(feature = "mux")]
    #[tokio::test]
    async fn a_message_whole_in_one_mux_piece_is_not_copied() {
        use nri_mux::{Mux, MuxOptions};
        let (a, mut raw) = tokio::net::UnixStream::pair().unwrap();
        let mux = Mux::new(a, MuxOptions::default());
        let (source, _writer) = split(mux.open(1).unwrap());
        let mut reader = FrameReader::from_source(source);
        let two = [message(100, 1, 1), message(50, 3, 2)].concat();
        raw.write_all(&mux_frame(1, &two)).await.unwrap();
        let Inbound::Frame(_, first) = reader.next().await.unwrap() else {
            panic!("no frame");
        };
        let Inbound::Frame(_, second) = reader.next().await.unwrap() else {
            panic!("no frame");
        };
        // Both payloads lie in one buffer, at their offsets in the piece.
        let gap = second.as_ptr() as usize - first.as_ptr() as usize;
        assert_eq!(gap, 100 + HEADER_LEN);
        assert!(reader.buf.is_empty());
    }

    #[tokio::test]
    async fn any_other_stream_is_read_as_a_byte_stream() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (source, _writer) = split(a);
        assert!(matches!(source, Source::Stream(_)));
        let mut reader = FrameReader::from_source(source);
        let mut b = b;
        let m = message(10, 1, 9);
        b.write_all(&m).await.unwrap();
        expect_frame(&mut reader, &m).await;
    }

    #[tokio::test]
    async fn truncated_header_is_a_protocol_error() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0]).await.unwrap();
        drop(a);
        let mut reader = FrameReader::new(b);
        assert!(matches!(reader.next().await, Err(Error::Protocol(_))));
    }

    #[tokio::test]
    async fn truncated_payload_is_a_protocol_error() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&header(10, 1, MESSAGE_TYPE_REQUEST))
            .await
            .unwrap();
        a.write_all(b"abc").await.unwrap();
        drop(a);
        let mut reader = FrameReader::new(b);
        assert!(matches!(reader.next().await, Err(Error::Protocol(_))));
    }

    #[test]
    fn encode_frame_refuses_oversized() {
        let msg = crate::proto::Response {
            status: None,
            payload: vec![0; MAX_MESSAGE_LEN],
        };
        match encode_frame(1, MESSAGE_TYPE_RESPONSE, 0, &msg) {
            Err(Error::Oversized { len, max }) => {
                assert_eq!(max, MAX_MESSAGE_LEN);
                assert_eq!(len, MAX_MESSAGE_LEN + 1 + 4);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn encode_frame_layout() {
        let msg = crate::proto::KeyValue {
            key: "a".into(),
            value: String::new(),
        };
        let mut frame = encode_frame(0, MESSAGE_TYPE_REQUEST, 0, &msg).unwrap();
        set_stream_id(&mut frame, 9);
        assert_eq!(frame, vec![0, 0, 0, 3, 0, 0, 0, 9, 1, 0, 0x0a, 0x01, b'a']);
    }
}
