//! [`Status`]: the outcome of a call as carried on the wire.

use std::fmt;

use crate::code::Code;
use crate::proto;

/// A `google.rpc.Status`: a status code and a human-readable message.
///
/// Handlers return it to fail a call; clients receive it in
/// [`Error::Status`](crate::Error::Status) when the server answered with a
/// non-`OK` code. Its `Display` form follows Go's gRPC status errors, e.g.
/// `rpc error: code = Unimplemented desc = service foo`.
///
/// Status details (`google.protobuf.Any` entries) are not kept: NRI does not
/// use them, and they are dropped when a status is received.
///
/// ```
/// use nri_ttrpc::{Code, Status};
///
/// let st = Status::new(Code::NotFound, "no such container");
/// assert_eq!(st.code(), Code::NotFound);
/// assert_eq!(st.message(), "no such container");
/// assert_eq!(st.to_string(), "rpc error: code = NotFound desc = no such container");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// The status code.
    pub code: Code,
    /// The message describing the error.
    pub message: String,
}

impl Status {
    /// Creates a status from a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message describing the error.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Shorthand for a [`Code::Internal`] status.
    pub fn internal(message: impl Into<String>) -> Self {
        Status::new(Code::Internal, message)
    }

    /// Shorthand for a [`Code::InvalidArgument`] status.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Status::new(Code::InvalidArgument, message)
    }

    /// Shorthand for a [`Code::Unimplemented`] status.
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Status::new(Code::Unimplemented, message)
    }

    /// Shorthand for a [`Code::Unknown`] status.
    pub fn unknown(message: impl Into<String>) -> Self {
        Status::new(Code::Unknown, message)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rpc error: code = {} desc = {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

impl From<proto::Status> for Status {
    fn from(st: proto::Status) -> Self {
        Status {
            code: Code::from(st.code),
            message: st.message,
        }
    }
}

impl From<Status> for proto::Status {
    fn from(st: Status) -> Self {
        proto::Status {
            code: st.code.into(),
            message: st.message,
            details: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_and_from_wire_status() {
        let wire = proto::Status {
            code: 12,
            message: "method Foo".into(),
            details: vec![proto::Any {
                type_url: "x".into(),
                value: vec![1],
            }],
        };
        let st = Status::from(wire);
        assert_eq!(st, Status::unimplemented("method Foo"));
        let back = proto::Status::from(st);
        assert_eq!(back.code, 12);
        assert_eq!(back.message, "method Foo");
        assert!(back.details.is_empty());
    }

    #[test]
    fn unknown_wire_code_becomes_unknown() {
        let st = Status::from(proto::Status {
            code: 77,
            message: String::new(),
            details: Vec::new(),
        });
        assert_eq!(st.code(), Code::Unknown);
    }
}
