//! Closing, failures and flow control.

use crate::common;

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use common::{header, pattern, read_frame, send_frame, within};
use nri_mux::{Mux, MuxError, MuxOptions, MAX_FRAME_PAYLOAD};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::UnixStream;

#[tokio::test]
async fn oversized_frame_closes_the_mux_without_waiting_for_payload() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    // Announce one byte more than allowed; send no payload at all.
    raw.write_all(&header(1, MAX_FRAME_PAYLOAD as u32 + 1))
        .await
        .unwrap();
    within(mux.closed()).await;
    let err = mux.error().unwrap();
    assert!(
        matches!(err, MuxError::FrameTooLarge { conn: 1, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "conn 1: frame payload 4194315 bytes, maximum is 4194314"
    );
    let read_err = within(conn.read(&mut [0u8; 8])).await.unwrap_err();
    assert_eq!(read_err.kind(), io::ErrorKind::InvalidData);
    // The trunk is shut down: the peer sees EOF.
    let mut rest = Vec::new();
    within(raw.read_to_end(&mut rest)).await.unwrap();
}

#[tokio::test]
async fn largest_allowed_frame_is_accepted() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let data = pattern(MAX_FRAME_PAYLOAD, 3);
    let writer = tokio::spawn(async move {
        send_frame(&mut raw, 1, &data).await;
        (raw, data)
    });
    let mut got = vec![0u8; MAX_FRAME_PAYLOAD];
    within(conn.read_exact(&mut got)).await.unwrap();
    let (_raw, data) = within(writer).await.unwrap();
    assert_eq!(got, data);
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn peer_vanishing_mid_frame_closes_with_error() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    send_frame(&mut raw, 1, b"whole").await;
    raw.write_all(&header(1, 100)).await.unwrap();
    raw.write_all(b"partial").await.unwrap();
    drop(raw);

    within(mux.closed()).await;
    let err = mux.error().unwrap();
    assert!(
        matches!(
            err,
            MuxError::TrunkRead {
                what: "payload",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "failed to read payload from trunk: unexpected EOF"
    );
    // What arrived whole is still readable, then the error.
    let mut buf = [0u8; 5];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"whole");
    let read_err = within(conn.read(&mut buf)).await.unwrap_err();
    assert_eq!(read_err.kind(), io::ErrorKind::UnexpectedEof);
}

#[tokio::test]
async fn peer_vanishing_mid_header_closes_with_error() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    raw.write_all(&[0, 0, 0]).await.unwrap();
    drop(raw);
    within(mux.closed()).await;
    assert_eq!(
        mux.error().unwrap().to_string(),
        "failed to read header from trunk: unexpected EOF"
    );
}

#[tokio::test]
async fn clean_eof_drains_then_reads_end_of_stream() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    send_frame(&mut raw, 1, b"last words").await;
    drop(raw);
    within(mux.closed()).await;
    assert!(matches!(mux.error(), Some(MuxError::Eof)));
    let mut got = Vec::new();
    within(conn.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, b"last words");
    let err = conn.write_all(b"x").await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert!(matches!(mux.open(2), Err(MuxError::Closed)));
}

#[tokio::test]
async fn queue_overflow_closes_the_mux() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let mut burst = Vec::new();
    for i in 0..257u32 {
        burst.extend_from_slice(&common::frame(1, &i.to_be_bytes()));
    }
    raw.write_all(&burst).await.unwrap();
    within(mux.closed()).await;
    let err = mux.error().unwrap();
    assert_eq!(err.to_string(), "failed to queue payload for reading");
    assert!(matches!(err, MuxError::QueueOverflow { conn: 1 }));
    // The 256 queued frames are still readable, then the error shows.
    let mut buf = vec![0u8; 256 * 4];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf[buf.len() - 4..], &255u32.to_be_bytes());
    let read_err = within(conn.read(&mut [0u8; 4])).await.unwrap_err();
    assert!(read_err.to_string().contains("failed to queue payload"));
}

#[tokio::test]
async fn full_queue_without_overflow_keeps_the_mux_open() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let opts = MuxOptions {
        read_queue_len: 4,
        ..MuxOptions::default()
    };
    let mux = Mux::new(a, opts);
    let mut conn = mux.open(1).unwrap();
    let mut sync = mux.open(2).unwrap();
    for i in 0..4u8 {
        send_frame(&mut raw, 1, &[i]).await;
    }
    // Once conn 2 got its frame, all four frames for conn 1 were queued.
    send_frame(&mut raw, 2, b"s").await;
    within(sync.read_exact(&mut [0u8; 1])).await.unwrap();
    assert!(!mux.is_closed());
    let mut buf = [0u8; 4];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(buf, [0, 1, 2, 3]);

    // Now a fifth unread frame on top of four overflows the small queue.
    for i in 0..5u8 {
        send_frame(&mut raw, 1, &[i]).await;
    }
    within(mux.closed()).await;
    assert!(matches!(
        mux.error(),
        Some(MuxError::QueueOverflow { conn: 1 })
    ));
}

#[tokio::test]
async fn blocked_mux_reads_nothing_until_unblocked() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let opts = MuxOptions {
        blocked_read: true,
        ..MuxOptions::default()
    };
    let mux = Mux::new(a, opts);
    // Sent before the conn is open, then the peer goes away: a reading mux would
    // drop the frame and close on EOF.
    send_frame(&mut raw, 1, b"early").await;
    drop(raw);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!mux.is_closed(), "the trunk was read while blocked");

    let mut conn = mux.open(1).unwrap();
    mux.unblock();
    mux.unblock();
    let mut got = Vec::new();
    within(conn.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, b"early");
    within(mux.closed()).await;
    assert!(matches!(mux.error(), Some(MuxError::Eof)));
}

#[tokio::test]
async fn blocked_mux_still_writes() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(
        a,
        MuxOptions {
            blocked_read: true,
            ..MuxOptions::default()
        },
    );
    let mut conn = mux.open(2).unwrap();
    conn.write_all(b"out").await.unwrap();
    assert_eq!(read_frame(&mut raw).await, (2, b"out".to_vec()));
}

#[tokio::test]
async fn close_is_idempotent_and_observable() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let clone = mux.clone();
    let mut conn = mux.open(1).unwrap();
    let waiter = tokio::spawn(async move { clone.closed().await });

    mux.close();
    mux.close();
    within(waiter).await.unwrap();
    within(mux.closed()).await;
    assert!(mux.is_closed());
    assert!(mux.error().is_none());

    assert_eq!(within(conn.read(&mut [0u8; 4])).await.unwrap(), 0);
    let err = conn.write(b"x").await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(err.to_string(), "multiplexer is closed");
    assert!(matches!(mux.open(2), Err(MuxError::Closed)));

    let mut rest = Vec::new();
    within(raw.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn close_wakes_a_pending_reader() {
    let (a, _raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let reader = tokio::spawn(async move { conn.read(&mut [0u8; 4]).await });
    tokio::task::yield_now().await;
    mux.close();
    assert_eq!(within(reader).await.unwrap().unwrap(), 0);
}

#[tokio::test]
async fn writes_accepted_before_close_are_delivered() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let data = pattern(20_000, 4);
    conn.write_all(&data).await.unwrap();
    mux.close();
    let mut rest = Vec::new();
    within(raw.read_to_end(&mut rest)).await.unwrap();
    let mut expected = common::frame(1, &data[..4096]);
    expected.extend_from_slice(&common::frame(1, &data[4096..]));
    assert_eq!(rest, expected);
}

#[tokio::test]
async fn dropping_every_handle_closes_the_trunk() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let conn = mux.open(1).unwrap();
    drop(mux);
    // A live conn keeps the mux open.
    send_frame(&mut raw, 1, b"hi").await;
    let mut conn = conn;
    let mut buf = [0u8; 2];
    within(conn.read_exact(&mut buf)).await.unwrap();
    drop(conn);
    let mut rest = Vec::new();
    within(raw.read_to_end(&mut rest)).await.unwrap();
}

/// A trunk whose reads never complete and whose writes fail or stall.
struct BadTrunk {
    fail_writes: bool,
    accepted: Arc<AtomicUsize>,
}

impl AsyncRead for BadTrunk {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for BadTrunk {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.fail_writes {
            Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionReset, "boom")))
        } else {
            // Take a little, then stall forever.
            if self.accepted.load(Ordering::SeqCst) == 0 {
                self.accepted.store(buf.len().min(100), Ordering::SeqCst);
                return Poll::Ready(Ok(buf.len().min(100)));
            }
            Poll::Pending
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn failed_trunk_write_closes_the_mux() {
    let trunk = BadTrunk {
        fail_writes: true,
        accepted: Arc::default(),
    };
    let mux = Mux::new(trunk, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    conn.write_all(b"hello").await.unwrap();
    let flush_err = within(conn.flush()).await.unwrap_err();
    assert_eq!(flush_err.kind(), io::ErrorKind::BrokenPipe);
    within(mux.closed()).await;
    let err = mux.error().unwrap();
    assert_eq!(err.to_string(), "failed to write frames to trunk: boom");
    assert_eq!(err.io_kind(), io::ErrorKind::ConnectionReset);
    let write_err = conn.write(b"again").await.unwrap_err();
    assert_eq!(
        write_err.to_string(),
        "multiplexer is closed: failed to write frames to trunk: boom"
    );
}

#[tokio::test]
async fn stalled_trunk_applies_back_pressure() {
    let accepted = Arc::new(AtomicUsize::new(0));
    let trunk = BadTrunk {
        fail_writes: false,
        accepted: Arc::clone(&accepted),
    };
    let mux = Mux::new(trunk, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let mut total = 0usize;
    // The loop must block at some point; the timeout only ends the test.
    let blocked = tokio::time::timeout(Duration::from_millis(300), async {
        loop {
            conn.write_all(&chunk).await.unwrap();
            total += chunk.len();
        }
    })
    .await;
    assert!(blocked.is_err());
    assert!(
        total < 1024 * 1024,
        "accepted {total} bytes into a stalled trunk"
    );
    assert!(total >= 256 * 1024);
    // Closing gives up on the stalled trunk instead of hanging, and wakes the writer.
    mux.close();
    let err = within(conn.write_all(&chunk)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
}

/// A write accepted before the mux closes is still delivered, and a flush
/// after the close waits for it instead of failing: here the writer task
/// has not run yet when the mux closes (one thread, no await in between).
#[tokio::test(flavor = "current_thread")]
async fn flush_after_close_waits_for_accepted_bytes() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(5).unwrap();
    let data = pattern(1000, 5);
    assert_eq!(within(conn.write(&data)).await.unwrap(), 1000);
    mux.close();
    within(conn.flush()).await.unwrap();
    assert_eq!(read_frame(&mut raw).await, (5, data));
    // Once the writer has stopped, a write is refused and a flush with
    // nothing pending succeeds.
    assert_eq!(
        within(conn.write(b"x")).await.unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
    within(conn.flush()).await.unwrap();
}
