//! Over a `UnixTrunk`, a write that finds nothing queued is sent to the socket by the
//! writing task itself; everything else still goes through the writer task. Checked
//! on the socket: what the peer can read, in what order, and when.

use crate::common;

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::{pattern, within};
use nri_mux::{Mux, MuxOptions, UnixTrunk};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

fn trunk_pair() -> (UnixTrunk, StdUnixStream) {
    let (a, b) = StdUnixStream::pair().unwrap();
    (UnixTrunk::new(a).unwrap(), b)
}

/// On one thread, with no await between the write and the check, the writer task
/// cannot have run: the frame is on the socket already, and the flush is done.
#[tokio::test(flavor = "current_thread")]
async fn an_idle_write_is_on_the_socket_when_it_returns() {
    let (trunk, mut raw) = trunk_pair();
    let mux = Mux::new(trunk, MuxOptions::default());
    let mut conn = mux.open(7).unwrap();
    let data = pattern(300, 1);

    let mut cx = Context::from_waker(Waker::noop());
    let wrote = pin!(&mut conn).poll_write(&mut cx, &data);
    assert!(matches!(wrote, Poll::Ready(Ok(300))), "{wrote:?}");
    assert!(matches!(
        pin!(&mut conn).poll_flush(&mut cx),
        Poll::Ready(Ok(()))
    ));

    raw.set_nonblocking(true).unwrap();
    let mut got = vec![0u8; 8 + 300];
    raw.read_exact(&mut got).unwrap();
    assert_eq!(&got[..4], &7u32.to_be_bytes());
    assert_eq!(&got[4..8], &300u32.to_be_bytes());
    assert_eq!(&got[8..], &data[..]);
}

/// Writes far larger than the socket buffer, from several connections at once on a
/// multi-threaded runtime, mix direct sends and the writer task: every byte arrives,
/// each connection's bytes in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_concurrent_writes_arrive_whole_and_in_order() {
    let (a, b) = StdUnixStream::pair().unwrap();
    let left = Mux::new(UnixTrunk::new(a).unwrap(), MuxOptions::default());
    let right = Mux::new(UnixTrunk::new(b).unwrap(), MuxOptions::default());
    const CONNS: u32 = 4;
    const LEN: usize = 3 << 20;
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for id in 1..=CONNS {
        let mut tx = left.open(id).unwrap();
        let mut rx = right.open(id).unwrap();
        writers.push(tokio::spawn(async move {
            let data = pattern(LEN, id as u8);
            // Uneven pieces, so frames of different connections interleave.
            for piece in data.chunks(10_000 + 997 * id as usize) {
                tx.write_all(piece).await.unwrap();
            }
            tx.flush().await.unwrap();
            tx
        }));
        readers.push(tokio::spawn(async move {
            let mut got = vec![0u8; LEN];
            rx.read_exact(&mut got).await.unwrap();
            (id, got)
        }));
    }
    for w in writers {
        within(w).await.unwrap();
    }
    for r in readers {
        let (id, got) = within(r).await.unwrap();
        assert!(got == pattern(LEN, id as u8), "connection {id} corrupted");
    }
}

/// The mux's duplicate of the socket goes when the mux closes, even while a handle
/// is kept: the socket is then fully closed and the peer's writes fail.
#[tokio::test]
async fn a_closed_mux_keeps_no_descriptor_of_the_socket() {
    let (trunk, mut raw) = trunk_pair();
    let mux = Mux::new(trunk, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    conn.write_all(b"before").await.unwrap();
    mux.close();
    within(mux.closed()).await;

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match raw.write(b"x") {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break,
            _ if Instant::now() > deadline => panic!("the socket is still open"),
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    drop((conn, mux));
}

/// A direct send that fails (the peer is gone) loses nothing silently: the writer
/// task meets the same error and the mux closes; a flush does not report success.
#[tokio::test]
async fn a_gone_peer_closes_the_mux() {
    let (trunk, raw) = trunk_pair();
    let mux = Mux::new(trunk, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    drop(raw);
    let _ = conn.write_all(b"lost").await;
    let flushed = within(conn.flush()).await;
    within(mux.closed()).await;
    assert!(
        flushed.is_err(),
        "flush reported a write to a closed peer as done"
    );
}
