//! The NRI connection multiplexer.
//!
//! NRI runs two ttRPC sessions (one per direction) over a single stream connection, the
//! *trunk*. Every chunk of data on the trunk is a frame:
//!
//! ```text
//! [conn id: u32 big-endian][payload length: u32 big-endian][payload]
//! ```
//!
//! There is no handshake and no open/close signalling: both ends open the same
//! connection ids ([`PLUGIN_SERVICE_CONN`], [`RUNTIME_SERVICE_CONN`]) locally.
//!
//! [`Mux`] owns the trunk; [`Mux::open`] gives a [`MuxConn`], a tokio byte stream that
//! ttRPC (or anything else) can run on. Each write goes out as a first frame of at most
//! [`MuxOptions::max_write_frame`] (default [`GO_READ_BUFFER`], 4096) bytes of payload,
//! which Go readers require, then the rest in one frame, as Go peers write; frames read
//! may be up to [`MAX_FRAME_PAYLOAD`] bytes.
//!
//! Without its default feature `async`, the crate is the frame format alone
//! ([`FrameHeader`], [`encode_frames`], the connection ids and limits), with
//! no tokio, for code that reads and writes the trunk itself on a blocking
//! socket, as `nri-stub`'s blocking stub does.
//!
//! ```
//! use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (a, b) = tokio::net::UnixStream::pair()?;
//! let left = Mux::new(a, MuxOptions::default());
//! let right = Mux::new(b, MuxOptions::default());
//!
//! let mut client = left.open(PLUGIN_SERVICE_CONN)?;
//! let mut server = right.open(PLUGIN_SERVICE_CONN)?;
//! client.write_all(b"ping").await?;
//! let mut buf = [0u8; 4];
//! server.read_exact(&mut buf).await?;
//! assert_eq!(&buf, b"ping");
//!
//! assert_eq!(left.open(0).unwrap_err().to_string(), "ConnID 0 is reserved");
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Items of the default feature `async`, each compiled only with it.
macro_rules! with_async {
    ($($item:item)*) => { $( #[cfg(feature = "async")] $item )* };
}

with_async! {
    mod conn;
    mod mux;
    mod options;
    mod reader;
    mod shared;
    mod trunk;
    mod writer;

    pub use conn::MuxConn;
    pub use mux::Mux;
    pub use options::MuxOptions;
    pub use trunk::UnixTrunk;
}

mod error;
mod frame;

pub use error::MuxError;
pub use frame::{
    encode_frames, ConnId, FrameHeader, DEFAULT_READ_QUEUE_LEN, GO_READ_BUFFER, HEADER_LEN,
    LOWEST_CONN_ID, MAX_FRAME_PAYLOAD, PLUGIN_SERVICE_CONN, RESERVED_CONN_ID, RUNTIME_SERVICE_CONN,
};

#[cfg(all(test, feature = "async"))]
mod tests {
    use super::*;

    fn assert_traits<T: Send + Sync + Unpin + 'static>() {}
    fn assert_stream<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static>() {}

    #[test]
    fn handles_have_the_promised_traits() {
        assert_traits::<Mux>();
        assert_traits::<MuxConn>();
        assert_traits::<MuxError>();
        assert_stream::<MuxConn>();
    }

    #[test]
    fn well_known_ids() {
        assert_eq!(PLUGIN_SERVICE_CONN, 1);
        assert_eq!(RUNTIME_SERVICE_CONN, 2);
        assert_eq!(HEADER_LEN, 8);
        assert_eq!(MAX_FRAME_PAYLOAD, 4_194_314);
    }
}
