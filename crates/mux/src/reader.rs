//! The task that reads frames from the trunk and queues them on their connections.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};

use crate::error::MuxError;
use crate::frame::{FrameHeader, HEADER_LEN, MAX_FRAME_PAYLOAD};
use crate::shared::{wait_closed, Inner};

/// Buffer between the trunk and the frame parser; saves system calls for small frames.
const TRUNK_READ_BUFFER: usize = 64 * 1024;

/// How much of a payload is allocated before its bytes arrive, so a peer that announces
/// a big frame and then stalls or vanishes does not get the whole size allocated.
const PAYLOAD_GROWTH_STEP: usize = 64 * 1024;

/// Largest unread frame that the next frame of its connection is read
/// together with (its bytes are copied once more).
const MERGE_LIMIT: usize = 64 * 1024;

pub(crate) async fn run<R>(inner: Arc<Inner>, trunk: R)
where
    R: AsyncRead + Unpin,
{
    let mut closed = inner.subscribe_closed();
    let mut unblocked = inner.subscribe_unblock();
    tokio::select! {
        _ = wait_closed(&mut closed) => return,
        res = unblocked.wait_for(|u| *u) => {
            if res.is_err() {
                return;
            }
        }
    }
    let mut trunk = BufReader::with_capacity(TRUNK_READ_BUFFER, trunk);
    let err = tokio::select! {
        _ = wait_closed(&mut closed) => return,
        err = read_frames(&inner, &mut trunk) => err,
    };
    inner.fail(err);
}

/// Reads and delivers frames until something ends the stream; returns why.
async fn read_frames<R>(inner: &Inner, trunk: &mut R) -> MuxError
where
    R: AsyncRead + Unpin,
{
    loop {
        let header = match read_header(trunk).await {
            Ok(Some(h)) => h,
            Ok(None) => return MuxError::Eof,
            Err(e) => {
                return MuxError::TrunkRead {
                    what: "header",
                    source: Arc::new(e),
                }
            }
        };
        let len = match usize::try_from(header.len) {
            Ok(len) if len <= MAX_FRAME_PAYLOAD => len,
            _ => {
                return MuxError::FrameTooLarge {
                    conn: header.id,
                    len: header.len,
                    limit: MAX_FRAME_PAYLOAD,
                }
            }
        };
        // A writer's frames follow one another on the trunk: a short first
        // frame (the peer's largest first frame is small, see
        // `MuxOptions::max_write_frame`) and the rest of the write. When the
        // short one still waits unread, the next is read into one buffer
        // with it, so that its reader gets the write in one piece rather
        // than in two that it has to copy together.
        let head = match len {
            0 => None,
            _ => inner.take_back(header.id, MERGE_LIMIT),
        };
        let (before, frames) = match &head {
            Some((bytes, frames)) => (&bytes[..], frames + 1),
            None => (&[][..], 1),
        };
        let payload = match read_payload_after(trunk, before, len).await {
            Ok(p) => p,
            Err(e) => {
                // What was received before stays readable.
                if let Some((bytes, frames)) = head {
                    let _ = inner.deliver(header.id, bytes, frames);
                }
                return MuxError::TrunkRead {
                    what: "payload",
                    source: Arc::new(e),
                };
            }
        };
        if let Err(e) = inner.deliver(header.id, payload, frames) {
            return e;
        }
    }
}

/// Reads one frame header. `Ok(None)` means the trunk ended cleanly before the header;
/// an end inside the header is an `UnexpectedEof` error.
async fn read_header<R>(trunk: &mut R) -> io::Result<Option<FrameHeader>>
where
    R: AsyncRead + Unpin,
{
    let mut raw = [0u8; HEADER_LEN];
    let mut filled = 0;
    while let Some(rest) = raw.get_mut(filled..).filter(|r| !r.is_empty()) {
        let n = trunk.read(rest).await?;
        if n == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(unexpected_eof());
        }
        filled += n;
    }
    Ok(Some(FrameHeader::decode(raw)))
}

/// Reads exactly `len` payload bytes into one buffer, after a copy of
/// `head` (the bytes of the frames it is read together with, or none). The
/// buffer holds `head` and the first
/// [`PAYLOAD_GROWTH_STEP`] bytes until they have arrived; then it grows to
/// the whole length at once, so a large payload is not copied again and
/// again as a growing buffer moves.
///
/// The buffer is zeroed as it grows and read into as initialized memory. A
/// read into uninitialized capacity would let the trunk zero the whole
/// unread rest of the payload at every read (a safe reader can only read
/// into initialized bytes): for a 4 MiB payload arriving in socket-sized
/// pieces, many times the payload in `memset`. The whole length is
/// allocated zeroed (`calloc`, which takes fresh pages from the kernel
/// without clearing them again) and the first step copied over, rather
/// than the step's buffer grown and its new part cleared.
async fn read_payload_after<R>(trunk: &mut R, head: &[u8], len: usize) -> io::Result<Bytes>
where
    R: AsyncRead + Unpin,
{
    let total = head.len().saturating_add(len);
    let mut buf = vec![0u8; head.len() + len.min(PAYLOAD_GROWTH_STEP)];
    if let Some(to) = buf.get_mut(..head.len()) {
        to.copy_from_slice(head);
    }
    let mut filled = head.len();
    while filled < total {
        if filled == buf.len() {
            let mut whole = vec![0u8; total];
            if let (Some(to), Some(from)) = (whole.get_mut(..filled), buf.get(..filled)) {
                to.copy_from_slice(from);
            }
            buf = whole;
        }
        let n = trunk.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Err(unexpected_eof());
        }
        filled += n;
    }
    Ok(Bytes::from(buf))
}

fn unexpected_eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "unexpected EOF")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn header_distinguishes_clean_and_truncated_end() {
        let mut empty: &[u8] = &[];
        assert_eq!(read_header(&mut empty).await.unwrap(), None);

        let mut short: &[u8] = &[0, 0, 0, 1, 0];
        let err = read_header(&mut short).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

        let mut full: &[u8] = &[0, 0, 0, 1, 0, 0, 0, 3, 9];
        let h = read_header(&mut full).await.unwrap().unwrap();
        assert_eq!((h.id, h.len), (1, 3));
    }

    #[tokio::test]
    async fn payload_reads_exact_length_across_growth_steps() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut src: &[u8] = &data;
        let got = read_payload_after(&mut src, &[], 150_000).await.unwrap();
        assert_eq!(&got[..], &data[..150_000]);
        assert_eq!(src.len(), 50_000);
    }

    /// Delivers its bytes a few at a time, as a socket does, and records for
    /// each read how much of the space offered was uninitialized (what a
    /// safe reader would have to zero first).
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        uninitialized: Vec<usize>,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            let uninitialized = buf.capacity() - buf.initialized().len();
            self.uninitialized.push(uninitialized);
            let n = buf.remaining().min(4096).min(self.data.len() - self.at);
            let from = self.at;
            buf.put_slice(&self.data[from..from + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn payload_reads_into_initialized_memory() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
        let mut src = Trickle {
            data: data.clone(),
            at: 0,
            uninitialized: Vec::new(),
        };
        let got = read_payload_after(&mut src, &[], data.len()).await.unwrap();
        assert_eq!(&got[..], &data[..]);
        assert!(src.uninitialized.len() > 70, "{}", src.uninitialized.len());
        assert!(
            src.uninitialized.iter().all(|&n| n == 0),
            "reads offered uninitialized space: {:?}",
            &src.uninitialized[..8]
        );
    }

    #[tokio::test]
    async fn truncated_payload_is_an_error() {
        let data = [1u8; 10];
        let mut src: &[u8] = &data;
        let err = read_payload_after(&mut src, &[], 11).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
