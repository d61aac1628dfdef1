//! The protobuf messages of the ttRPC envelope, written by hand with
//! `prost` derives.
//!
//! They mirror `ttrpc/request.proto` and `google/rpc/status.proto`:
//!
//! ```text
//! message Request  { string service = 1; string method = 2; bytes payload = 3;
//!                    int64 timeout_nano = 4; repeated KeyValue metadata = 5; }
//! message Response { google.rpc.Status status = 1; bytes payload = 2; }
//! message KeyValue { string key = 1; string value = 2; }
//! message google.rpc.Status { int32 code = 1; string message = 2;
//!                             repeated google.protobuf.Any details = 3; }
//! message google.protobuf.Any { string type_url = 1; bytes value = 2; }
//! ```

/// A ttRPC request envelope (message type 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Fully qualified service name, e.g. `nri.pkg.api.v1alpha1.Plugin`.
    #[prost(string, tag = "1")]
    pub service: String,
    /// Method name, e.g. `Configure`.
    #[prost(string, tag = "2")]
    pub method: String,
    /// The encoded request message.
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    /// Time left until the caller's deadline in nanoseconds; 0 means none.
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
    /// Request metadata.
    #[prost(message, repeated, tag = "5")]
    pub metadata: Vec<KeyValue>,
}

/// A ttRPC response envelope (message type 2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The outcome; absent or code 0 means success.
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    /// The encoded response message.
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// [`Request`] as a server decodes it: the payload shares the buffer of
/// the frame it came in (no copy).
#[cfg(feature = "async")]
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestIn {
    #[prost(string, tag = "1")]
    pub service: String,
    #[prost(string, tag = "2")]
    pub method: String,
    #[prost(bytes = "bytes", tag = "3")]
    pub payload: bytes::Bytes,
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
    #[prost(message, repeated, tag = "5")]
    pub metadata: Vec<KeyValue>,
}

/// [`Response`] as a client decodes it: the payload shares the buffer of
/// the frame it came in (no copy).
#[cfg(feature = "async")]
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResponseIn {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(bytes = "bytes", tag = "2")]
    pub payload: bytes::Bytes,
}

/// One metadata entry of a [`Request`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// Metadata key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Metadata value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `google.rpc.Status` as carried in a [`Response`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// A `google.rpc.Code` value.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// The error message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Error details.
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// Type URL of the packed message.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The packed message.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn request_encoding_is_pinned() {
        let req = Request {
            service: "svc".into(),
            method: "M".into(),
            payload: vec![0x01, 0x02],
            timeout_nano: 1_000_000_000,
            metadata: vec![KeyValue {
                key: "k".into(),
                value: "v".into(),
            }],
        };
        // Hand-computed protobuf encoding:
        //   0a 03 's' 'v' 'c'            field 1, length 3
        //   12 01 'M'                    field 2, length 1
        //   1a 02 01 02                  field 3, length 2
        //   20 80 94 eb dc 03            field 4, varint 1_000_000_000
        //   2a 06 0a 01 'k' 12 01 'v'    field 5, length 6, nested KeyValue
        let expected: Vec<u8> = vec![
            0x0a, 0x03, b's', b'v', b'c', //
            0x12, 0x01, b'M', //
            0x1a, 0x02, 0x01, 0x02, //
            0x20, 0x80, 0x94, 0xeb, 0xdc, 0x03, //
            0x2a, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v',
        ];
        assert_eq!(req.encode_to_vec(), expected);
        assert_eq!(Request::decode(expected.as_slice()).unwrap(), req);
    }

    #[test]
    fn negative_timeout_uses_ten_byte_varint() {
        let req = Request {
            timeout_nano: -1,
            ..Default::default()
        };
        assert_eq!(
            req.encode_to_vec(),
            vec![0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn ok_response_encoding_is_pinned() {
        // A successful response leaves the status out, as Go's server sends
        // it; an explicitly empty status encodes as 0a 00 and also means OK.
        let resp = Response {
            status: None,
            payload: vec![0xaa],
        };
        assert_eq!(resp.encode_to_vec(), vec![0x12, 0x01, 0xaa]);
        let resp = Response {
            status: Some(Status::default()),
            payload: vec![0xaa],
        };
        assert_eq!(resp.encode_to_vec(), vec![0x0a, 0x00, 0x12, 0x01, 0xaa]);
    }

    #[test]
    fn error_response_encoding_is_pinned() {
        let resp = Response {
            status: Some(Status {
                code: 12,
                message: "service x".into(),
                details: Vec::new(),
            }),
            payload: Vec::new(),
        };
        let mut expected = vec![0x0a, 0x0d, 0x08, 0x0c, 0x12, 0x09];
        expected.extend_from_slice(b"service x");
        assert_eq!(resp.encode_to_vec(), expected);
    }
}
