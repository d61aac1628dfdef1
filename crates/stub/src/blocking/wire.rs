//! The trunk read and written in place, on the calling thread: mux frames
//! carrying ttRPC messages on the two connections of a plugin.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nri_mux::{
    encode_frames, ConnId, FrameHeader, GO_READ_BUFFER, HEADER_LEN, MAX_FRAME_PAYLOAD,
    PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN,
};
use nri_ttrpc::frame::{FrameHeader as MessageHeader, HEADER_LEN as MESSAGE_HEADER_LEN};
use nri_ttrpc::MAX_MESSAGE_LEN;
use prost::bytes::BytesMut;

/// Why the trunk could not be read.
#[derive(Debug)]
pub(crate) enum WireError {
    /// The socket failed, or its read timeout passed.
    Io(io::Error),
    /// The runtime sent something no NRI peer sends.
    Protocol(String),
}

impl From<io::Error> for WireError {
    fn from(err: io::Error) -> Self {
        WireError::Io(err)
    }
}

/// One whole ttRPC message.
#[derive(Debug)]
pub(crate) struct Message {
    /// The mux connection it came on.
    pub(crate) conn: ConnId,
    pub(crate) header: MessageHeader,
    pub(crate) body: Vec<u8>,
}

/// Both ends of the plugin's connection to the runtime.
pub(crate) struct Wire {
    reader: BufReader<UnixStream>,
    /// What has come of a ttRPC message so far, per connection: the Plugin
    /// service's and the Runtime service's.
    partial: [Vec<u8>; 2],
}

/// Where the bytes of `conn` collect; `None` for a connection a plugin
/// does not use (its frames are read and dropped, as a mux drops frames of
/// connections nobody opened).
fn slot(conn: ConnId) -> Option<usize> {
    match conn {
        PLUGIN_SERVICE_CONN => Some(0),
        RUNTIME_SERVICE_CONN => Some(1),
        _ => None,
    }
}

impl Wire {
    pub(crate) fn new(stream: UnixStream) -> io::Result<Wire> {
        stream.set_nonblocking(false)?;
        Ok(Wire {
            reader: BufReader::with_capacity(GO_READ_BUFFER * 2, stream),
            partial: [Vec::new(), Vec::new()],
        })
    }

    /// Bounds each read that waits for the runtime; `None`: no bound.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }

    /// The next whole message from the runtime; `None` once it closed the
    /// connection between two frames.
    pub(crate) fn next(&mut self) -> Result<Option<Message>, WireError> {
        loop {
            for conn in [PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN] {
                if let Some(message) = self.take_message(conn)? {
                    return Ok(Some(message));
                }
            }
            if self.reader.fill_buf()?.is_empty() {
                return Ok(None);
            }
            let mut raw = [0u8; HEADER_LEN];
            self.reader.read_exact(&mut raw)?;
            let frame = FrameHeader::decode(raw);
            let len = frame.len as usize;
            if len > MAX_FRAME_PAYLOAD {
                return Err(WireError::Protocol(format!(
                    "a frame of {len} bytes on connection {}, over the limit of {MAX_FRAME_PAYLOAD}",
                    frame.id
                )));
            }
            match slot(frame.id) {
                Some(at) => {
                    let buf = &mut self.partial[at];
                    let start = buf.len();
                    buf.resize(start + len, 0);
                    self.reader.read_exact(&mut buf[start..])?;
                }
                None => {
                    let mut left = len;
                    while left > 0 {
                        let available = self.reader.fill_buf()?.len();
                        if available == 0 {
                            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                        }
                        let skipped = available.min(left);
                        self.reader.consume(skipped);
                        left -= skipped;
                    }
                }
            }
        }
    }

    /// Splits a whole message off the front of what `conn` received.
    fn take_message(&mut self, conn: ConnId) -> Result<Option<Message>, WireError> {
        let Some(buf) = slot(conn).map(|at| &mut self.partial[at]) else {
            return Ok(None);
        };
        let Some(raw) = buf.first_chunk::<MESSAGE_HEADER_LEN>() else {
            return Ok(None);
        };
        let header = MessageHeader::decode(raw);
        let len = header.length as usize;
        if len > MAX_MESSAGE_LEN {
            return Err(WireError::Protocol(format!(
                "a ttRPC message of {len} bytes on connection {conn}, over the limit of {MAX_MESSAGE_LEN}"
            )));
        }
        let end = MESSAGE_HEADER_LEN + len;
        let Some(body) = buf.get(MESSAGE_HEADER_LEN..end) else {
            return Ok(None);
        };
        let body = body.to_vec();
        buf.drain(..end);
        Ok(Some(Message { conn, header, body }))
    }

    /// Sends one ttRPC message on `conn`, framed as Go peers expect: a first
    /// frame that fits their read buffer, then the rest.
    pub(crate) fn send(
        &mut self,
        conn: ConnId,
        stream_id: u32,
        kind: u8,
        body: &[u8],
    ) -> io::Result<()> {
        let length = u32::try_from(body.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "message too large"))?;
        let header = MessageHeader {
            length,
            stream_id,
            kind,
            flags: 0,
        };
        let mut message = Vec::with_capacity(MESSAGE_HEADER_LEN + body.len());
        message.extend_from_slice(&header.encode());
        message.extend_from_slice(body);
        let mut out = BytesMut::new();
        encode_frames(&mut out, conn, &message, GO_READ_BUFFER);
        self.reader.get_ref().write_all(&out)
    }
}

/// Whether `err` is a read timeout's.
pub(crate) fn timed_out(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_ttrpc::frame::{MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};

    fn pair() -> (Wire, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        (Wire::new(ours).expect("wire"), theirs)
    }

    fn frame(conn: ConnId, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).expect("small");
        let mut out = FrameHeader { id: conn, len }.encode().to_vec();
        out.extend_from_slice(payload);
        out
    }

    fn message(stream_id: u32, kind: u8, body: &[u8]) -> Vec<u8> {
        let length = u32::try_from(body.len()).expect("small");
        let header = MessageHeader {
            length,
            stream_id,
            kind,
            flags: 0,
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn a_message_split_over_frames_and_interleaved_comes_whole() {
        let (mut wire, mut peer) = pair();
        let first = message(3, MESSAGE_TYPE_REQUEST, b"configure");
        let second = message(1, MESSAGE_TYPE_RESPONSE, b"registered");
        let mut bytes = frame(PLUGIN_SERVICE_CONN, &first[..4]);
        bytes.extend(frame(7, b"ignored"));
        bytes.extend(frame(RUNTIME_SERVICE_CONN, &second));
        bytes.extend(frame(PLUGIN_SERVICE_CONN, &first[4..]));
        peer.write_all(&bytes).expect("write");
        drop(peer);

        let got = wire.next().expect("read").expect("a message");
        assert_eq!((got.conn, got.header.stream_id), (RUNTIME_SERVICE_CONN, 1));
        assert_eq!(got.body, b"registered");
        let got = wire.next().expect("read").expect("a message");
        assert_eq!((got.conn, got.header.stream_id), (PLUGIN_SERVICE_CONN, 3));
        assert_eq!(got.header.kind, MESSAGE_TYPE_REQUEST);
        assert_eq!(got.body, b"configure");
        assert!(wire.next().expect("end of stream").is_none());
    }

    #[test]
    fn two_messages_in_one_frame_come_one_after_the_other() {
        let (mut wire, mut peer) = pair();
        let mut both = message(1, MESSAGE_TYPE_REQUEST, b"a");
        both.extend(message(3, MESSAGE_TYPE_REQUEST, b""));
        peer.write_all(&frame(PLUGIN_SERVICE_CONN, &both))
            .expect("write");
        let first = wire.next().expect("read").expect("first");
        let second = wire.next().expect("read").expect("second");
        assert_eq!(
            (first.header.stream_id, first.body.as_slice()),
            (1, &b"a"[..])
        );
        assert_eq!((second.header.stream_id, second.body.len()), (3, 0));
    }

    #[test]
    fn an_oversized_frame_or_message_is_refused_without_reading_it() {
        let (mut wire, mut peer) = pair();
        let huge = u32::try_from(MAX_FRAME_PAYLOAD + 1).expect("fits");
        peer.write_all(&FrameHeader { id: 1, len: huge }.encode())
            .expect("write");
        match wire.next() {
            Err(WireError::Protocol(text)) => assert!(text.contains("over the limit"), "{text}"),
            other => panic!("expected a protocol error, got {other:?}"),
        }

        let (mut wire, mut peer) = pair();
        let header = MessageHeader {
            length: u32::try_from(MAX_MESSAGE_LEN + 1).expect("fits"),
            stream_id: 1,
            kind: MESSAGE_TYPE_REQUEST,
            flags: 0,
        };
        peer.write_all(&frame(PLUGIN_SERVICE_CONN, &header.encode()))
            .expect("write");
        match wire.next() {
            Err(WireError::Protocol(text)) => assert!(text.contains("ttRPC message"), "{text}"),
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    #[test]
    fn a_connection_closed_inside_a_frame_is_an_error_not_an_end() {
        let (mut wire, mut peer) = pair();
        let mut bytes = frame(
            PLUGIN_SERVICE_CONN,
            &message(1, MESSAGE_TYPE_REQUEST, b"abc"),
        );
        bytes.truncate(bytes.len() - 1);
        peer.write_all(&bytes).expect("write");
        drop(peer);
        assert!(matches!(wire.next(), Err(WireError::Io(_))));
    }

    #[test]
    fn a_large_message_goes_out_as_a_go_sized_first_frame_and_the_rest() {
        let (mut wire, mut peer) = pair();
        let body = vec![9u8; 10_000];
        wire.send(PLUGIN_SERVICE_CONN, 5, MESSAGE_TYPE_RESPONSE, &body)
            .expect("send");
        drop(wire);
        let mut bytes = Vec::new();
        peer.read_to_end(&mut bytes).expect("read");
        let first = FrameHeader::decode(bytes[..HEADER_LEN].try_into().expect("header"));
        assert_eq!(first.len as usize, GO_READ_BUFFER);
        // Read back through a wire of our own: the same message comes out.
        let (mut reader, mut theirs) = pair();
        theirs.write_all(&bytes).expect("write");
        let got = reader.next().expect("read").expect("message");
        assert_eq!((got.header.stream_id, got.body), (5, body));
    }
}
