//! [`Error`]: everything a ttRPC call or server can fail with.

use crate::code::Code;
use crate::status::Status;

/// Errors returned by [`Client`](crate::Client) calls and
/// [`Server::serve`](crate::Server::serve).
///
/// Every error maps to a `google.rpc` [`Code`] through [`Error::code`].
///
/// ```
/// use nri_ttrpc::{Code, Error, MAX_MESSAGE_LEN};
///
/// let err = Error::Oversized { len: MAX_MESSAGE_LEN + 1, max: MAX_MESSAGE_LEN };
/// assert_eq!(err.code(), Code::ResourceExhausted);
/// assert_eq!(Error::Closed.code(), Code::Unavailable);
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The peer answered with a non-`OK` status.
    #[error(transparent)]
    Status(Status),

    /// The encoded message is larger than the maximum message size, so it was
    /// not sent. Nothing was written to the connection.
    #[error("rpc error: code = ResourceExhausted desc = message length {len} exceed maximum message size of {max}")]
    Oversized {
        /// Length of the encoded message that was refused.
        len: usize,
        /// The maximum message length.
        max: usize,
    },

    /// The connection is closed or the peer went away. Pending calls fail with
    /// this error when the connection ends.
    #[error("ttrpc: closed")]
    Closed,

    /// The local deadline of a call passed before a response arrived.
    #[error("context deadline exceeded")]
    Timeout,

    /// An I/O error on the underlying stream.
    #[error("ttrpc: i/o error: {0}")]
    Io(#[from] std::io::Error),

    /// The peer sent something that does not follow the protocol (a
    /// truncated frame, an undecodable envelope, an unexpected message type).
    #[error("ttrpc: protocol error: {0}")]
    Protocol(String),
}

impl Error {
    /// The `google.rpc` code this error corresponds to.
    ///
    /// [`Status`](Error::Status) keeps its code; [`Oversized`](Error::Oversized)
    /// is `ResourceExhausted`, [`Closed`](Error::Closed) and
    /// [`Io`](Error::Io) are `Unavailable`, [`Timeout`](Error::Timeout) is
    /// `DeadlineExceeded` and [`Protocol`](Error::Protocol) is `Internal`.
    pub fn code(&self) -> Code {
        match self {
            Error::Status(st) => st.code,
            Error::Oversized { .. } => Code::ResourceExhausted,
            Error::Closed | Error::Io(_) => Code::Unavailable,
            Error::Timeout => Code::DeadlineExceeded,
            Error::Protocol(_) => Code::Internal,
        }
    }

    /// The status the peer answered with, if this is [`Error::Status`].
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Status(st) => Some(st),
            _ => None,
        }
    }
}

impl From<Status> for Error {
    fn from(st: Status) -> Self {
        Error::Status(st)
    }
}

impl From<Error> for Status {
    /// Converts any error into a status, e.g. to forward a failed call as a
    /// handler result. A received status is passed through unchanged.
    fn from(err: Error) -> Self {
        match err {
            Error::Status(st) => st,
            Error::Oversized { len, max } => Status::new(
                Code::ResourceExhausted,
                crate::frame::oversize_message(len, max),
            ),
            other => Status::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(Error::Timeout.code(), Code::DeadlineExceeded);
        assert_eq!(Error::Protocol("x".into()).code(), Code::Internal);
        assert_eq!(
            Error::Io(std::io::Error::other("boom")).code(),
            Code::Unavailable
        );
        assert_eq!(
            Error::Status(Status::unimplemented("service x")).code(),
            Code::Unimplemented
        );
    }

    #[test]
    fn display_follows_go() {
        let err = Error::Oversized { len: 5, max: 4 };
        assert_eq!(
            err.to_string(),
            "rpc error: code = ResourceExhausted desc = message length 5 exceed maximum message size of 4"
        );
        let st = Status::from(err);
        assert_eq!(st.code, Code::ResourceExhausted);
        assert_eq!(
            st.message,
            "message length 5 exceed maximum message size of 4"
        );
        assert_eq!(Error::Closed.to_string(), "ttrpc: closed");
    }
}
