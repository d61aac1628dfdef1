//! Errors of the multiplexer.

use std::io;
use std::sync::Arc;

use crate::frame::ConnId;

/// An error of the multiplexer.
///
/// Cheap to clone: the first error that closes a [`Mux`](crate::Mux) is recorded and
/// handed out by [`Mux::error`](crate::Mux::error).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum MuxError {
    /// Connection id 0 cannot be opened.
    #[error("ConnID {0} is reserved")]
    ReservedConnId(ConnId),

    /// The connection id is already open on this multiplexer.
    #[error("ConnID {0} is already open")]
    AlreadyOpen(ConnId),

    /// The multiplexer is closed.
    #[error("multiplexer is closed")]
    Closed,

    /// The peer closed the trunk at a frame boundary.
    #[error("EOF")]
    Eof,

    /// Reading the trunk failed (including the peer vanishing in the middle of a frame).
    #[error("failed to read {what} from trunk: {source}")]
    TrunkRead {
        /// Which part of a frame was being read: `header` or `payload`.
        what: &'static str,
        /// The underlying I/O error.
        #[source]
        source: Arc<io::Error>,
    },

    /// Writing the trunk failed.
    #[error("failed to write frames to trunk: {source}")]
    TrunkWrite {
        /// The underlying I/O error.
        #[source]
        source: Arc<io::Error>,
    },

    /// The peer announced a frame larger than [`MAX_FRAME_PAYLOAD`](crate::MAX_FRAME_PAYLOAD).
    #[error("conn {conn}: frame payload {len} bytes, maximum is {limit}")]
    FrameTooLarge {
        /// Connection id named in the frame header.
        conn: ConnId,
        /// Announced payload length.
        len: u32,
        /// The largest accepted payload length.
        limit: usize,
    },

    /// A connection had more unread frames than the read queue holds.
    #[error("failed to queue payload for reading")]
    QueueOverflow {
        /// The connection whose queue overflowed.
        conn: ConnId,
    },
}

impl MuxError {
    /// True for the errors that only mean "the trunk ended" ([`MuxError::Eof`] and
    /// [`MuxError::Closed`]); reads see these as end of stream.
    pub fn is_eof(&self) -> bool {
        matches!(self, MuxError::Eof | MuxError::Closed)
    }

    /// The [`io::ErrorKind`] used when this error is reported through a connection.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            MuxError::ReservedConnId(_) => io::ErrorKind::InvalidInput,
            MuxError::AlreadyOpen(_) => io::ErrorKind::AlreadyExists,
            MuxError::Closed => io::ErrorKind::NotConnected,
            MuxError::Eof => io::ErrorKind::UnexpectedEof,
            MuxError::TrunkRead { source, .. } | MuxError::TrunkWrite { source } => source.kind(),
            MuxError::FrameTooLarge { .. } => io::ErrorKind::InvalidData,
            MuxError::QueueOverflow { .. } => io::ErrorKind::OutOfMemory,
        }
    }
}

impl From<MuxError> for io::Error {
    fn from(err: MuxError) -> io::Error {
        io::Error::new(err.io_kind(), err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_the_reference() {
        assert_eq!(
            MuxError::ReservedConnId(0).to_string(),
            "ConnID 0 is reserved"
        );
        assert_eq!(
            MuxError::QueueOverflow { conn: 1 }.to_string(),
            "failed to queue payload for reading"
        );
        assert_eq!(MuxError::Eof.to_string(), "EOF");
    }

    #[test]
    fn frame_too_large_names_conn_and_sizes() {
        let e = MuxError::FrameTooLarge {
            conn: 3,
            len: 5_000_000,
            limit: crate::MAX_FRAME_PAYLOAD,
        };
        assert_eq!(
            e.to_string(),
            "conn 3: frame payload 5000000 bytes, maximum is 4194314"
        );
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn trunk_errors_keep_the_io_kind() {
        let e = MuxError::TrunkWrite {
            source: Arc::new(io::Error::from(io::ErrorKind::BrokenPipe)),
        };
        assert_eq!(e.io_kind(), io::ErrorKind::BrokenPipe);
        assert!(e
            .to_string()
            .starts_with("failed to write frames to trunk: "));
        assert!(!e.is_eof());
        assert!(MuxError::Eof.is_eof());
    }
}
