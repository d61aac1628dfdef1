//! Data flow through the mux: round trips, byte-stream reads, conn table behaviour.

use crate::common;

use common::{pattern, send_frame, within};
use nri_mux::{Mux, MuxError, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

fn pair() -> (Mux, Mux) {
    let (a, b) = UnixStream::pair().unwrap();
    (
        Mux::new(a, MuxOptions::default()),
        Mux::new(b, MuxOptions::default()),
    )
}

/// Echo server on `conn`: reads `len` bytes and writes them back.
async fn echo(mut conn: nri_mux::MuxConn, len: usize) -> nri_mux::MuxConn {
    let mut buf = vec![0u8; len];
    conn.read_exact(&mut buf).await.unwrap();
    conn.write_all(&buf).await.unwrap();
    conn.flush().await.unwrap();
    conn
}

async fn round_trip_two_conns() {
    const LEN: usize = 300 * 1024 + 17;
    let (left, right) = pair();
    let mut handles = Vec::new();
    for (id, seed) in [(PLUGIN_SERVICE_CONN, 1u8), (RUNTIME_SERVICE_CONN, 2u8)] {
        let server = right.open(id).unwrap();
        let server = tokio::spawn(echo(server, LEN));
        let mut client = left.open(id).unwrap();
        handles.push(tokio::spawn(async move {
            let data = pattern(LEN, seed);
            client.write_all(&data).await.unwrap();
            let mut back = vec![0u8; LEN];
            client.read_exact(&mut back).await.unwrap();
            assert_eq!(back, data, "conn {id}");
            client
        }));
        handles.push(server);
    }
    for h in handles {
        within(h).await.unwrap();
    }
    assert!(!left.is_closed());
    assert!(!right.is_closed());
}

#[tokio::test]
async fn round_trip_two_conns_current_thread() {
    round_trip_two_conns().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_two_conns_multi_thread() {
    round_trip_two_conns().await;
}

#[tokio::test]
async fn big_frame_reads_through_a_small_buffer() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    let data = pattern(100 * 1024, 5);
    send_frame(&mut raw, 1, &data).await;

    let mut got = Vec::new();
    let mut buf = [0u8; 1000];
    while got.len() < data.len() {
        let n = within(conn.read(&mut buf)).await.unwrap();
        assert!(n > 0 && n <= 1000);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, data);
}

#[tokio::test]
async fn small_frames_coalesce_into_one_read() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    for chunk in [&b"ab"[..], b"cd", b"ef"] {
        send_frame(&mut raw, 1, chunk).await;
    }
    let mut buf = [0u8; 6];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"abcdef");
}

#[tokio::test]
async fn zero_length_frame_reads_as_zero_then_data_continues() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(4).unwrap();
    send_frame(&mut raw, 4, b"xy").await;
    send_frame(&mut raw, 4, b"").await;
    send_frame(&mut raw, 4, b"z").await;

    let mut buf = [0u8; 16];
    // Data before the empty frame is returned first, without the empty frame.
    assert_eq!(within(conn.read(&mut buf)).await.unwrap(), 2);
    assert_eq!(&buf[..2], b"xy");
    assert_eq!(within(conn.read(&mut buf)).await.unwrap(), 0);
    assert_eq!(within(conn.read(&mut buf)).await.unwrap(), 1);
    assert_eq!(buf[0], b'z');
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn zero_length_write_reaches_peer_as_zero_read() {
    let (left, right) = pair();
    let mut tx = left.open(2).unwrap();
    let mut rx = right.open(2).unwrap();
    tx.write_all(b"a").await.unwrap();
    assert_eq!(tx.write(&[]).await.unwrap(), 0);
    tx.write_all(b"b").await.unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(within(rx.read(&mut buf)).await.unwrap(), 1);
    assert_eq!(within(rx.read(&mut buf)).await.unwrap(), 0);
    assert_eq!(within(rx.read(&mut buf)).await.unwrap(), 1);
    assert_eq!(buf[0], b'b');
}

#[tokio::test]
async fn frames_for_unknown_conns_are_discarded() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(1).unwrap();
    send_frame(&mut raw, 7, b"lost").await;
    send_frame(&mut raw, 1, b"one").await;
    send_frame(&mut raw, 0, b"reserved").await;
    send_frame(&mut raw, u32::MAX, &pattern(70_000, 1)).await;
    send_frame(&mut raw, 1, b"two").await;
    let mut buf = [0u8; 6];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"onetwo");
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn open_twice_is_refused_until_the_first_is_dropped() {
    let (a, _raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let conn = mux.open(1).unwrap();
    let err = mux.open(1).unwrap_err();
    assert!(matches!(err, MuxError::AlreadyOpen(1)));
    assert_eq!(err.to_string(), "ConnID 1 is already open");
    drop(conn);
    assert_eq!(mux.open(1).unwrap().id(), 1);
}

#[tokio::test]
async fn reserved_id_cannot_be_opened() {
    let (a, _raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let err = mux.open(0).unwrap_err();
    assert_eq!(err.to_string(), "ConnID 0 is reserved");
    assert!(matches!(err, MuxError::ReservedConnId(0)));
}

#[tokio::test]
async fn dropped_conn_loses_later_frames_and_reopen_is_fresh() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut other = mux.open(2).unwrap();
    let mut conn = mux.open(1).unwrap();
    send_frame(&mut raw, 1, b"old").await;
    let mut buf = [0u8; 3];
    within(conn.read_exact(&mut buf)).await.unwrap();
    drop(conn);

    send_frame(&mut raw, 1, b"gone").await;
    // Once conn 2 got its frame, the reader has passed the frame for the dropped conn 1.
    send_frame(&mut raw, 2, b"sync").await;
    let mut sync = [0u8; 4];
    within(other.read_exact(&mut sync)).await.unwrap();
    assert_eq!(&sync, b"sync");

    let mut conn = mux.open(1).unwrap();
    send_frame(&mut raw, 1, b"new").await;
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"new");
}

#[tokio::test]
async fn shutting_down_one_conn_leaves_the_others_working() {
    let (left, right) = pair();
    let mut a1 = left.open(1).unwrap();
    let mut a2 = left.open(2).unwrap();
    let mut b2 = right.open(2).unwrap();

    a1.write_all(b"x").await.unwrap();
    within(a1.shutdown()).await.unwrap();
    let err = a1.write_all(b"y").await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(
        err.to_string().contains("mux connection 1 is closed"),
        "{err}"
    );
    let mut buf = [0u8; 1];
    assert_eq!(within(a1.read(&mut buf)).await.unwrap(), 0);

    a2.write_all(b"still").await.unwrap();
    let mut got = [0u8; 5];
    within(b2.read_exact(&mut got)).await.unwrap();
    assert_eq!(&got, b"still");
    assert!(!left.is_closed());
    // The id is free again.
    assert!(left.open(1).is_ok());
}

#[tokio::test]
async fn split_halves_work_concurrently() {
    let (left, right) = pair();
    let a = left.open(1).unwrap();
    let b = right.open(1).unwrap();
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let data = pattern(50_000, 9);
    let d2 = data.clone();
    let w = tokio::spawn(async move {
        aw.write_all(&d2).await.unwrap();
        bw.write_all(&d2).await.unwrap();
        (aw, bw)
    });
    let mut x = vec![0u8; data.len()];
    let mut y = vec![0u8; data.len()];
    within(br.read_exact(&mut x)).await.unwrap();
    within(ar.read_exact(&mut y)).await.unwrap();
    within(w).await.unwrap();
    assert_eq!(x, data);
    assert_eq!(y, data);
}

/// Waits for the next received bytes of `conn`, taken without copying.
async fn next_bytes(conn: &mut nri_mux::MuxConn) -> bytes::Bytes {
    within(std::future::poll_fn(|cx| conn.poll_read_bytes(cx)))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_large_write_read_unread_comes_as_one_piece() {
    // Written as a frame of 4096 bytes and one of the rest; the reader
    // looks only once both are there.
    const LEN: usize = 200 * 1024 + 3;
    let (left, right) = pair();
    let mut tx = left.open(2).unwrap();
    let mut rx = right.open(2).unwrap();
    let mut marker = left.open(3).unwrap();
    let mut marker_rx = right.open(3).unwrap();
    let data = pattern(LEN, 7);
    tx.write_all(&data).await.unwrap();
    tx.flush().await.unwrap();
    // Frames are read in order: once conn 3's arrived, both of conn 2's did.
    marker.write_all(b"m").await.unwrap();
    assert_eq!(&next_bytes(&mut marker_rx).await[..], b"m");
    let got = next_bytes(&mut rx).await;
    assert_eq!(got.len(), LEN);
    assert!(got[..] == data[..]);
}

#[tokio::test]
async fn bytes_reads_follow_byte_reads_and_empty_frames_stay_apart() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(4).unwrap();
    let mut marker = mux.open(5).unwrap();
    send_frame(&mut raw, 4, b"abc").await;
    send_frame(&mut raw, 4, b"de").await;
    send_frame(&mut raw, 4, b"").await;
    send_frame(&mut raw, 4, b"f").await;
    send_frame(&mut raw, 5, b"m").await;
    assert_eq!(&next_bytes(&mut marker).await[..], b"m");

    // The two frames before the empty one were read as one piece; a byte
    // read takes part of it and a bytes read the rest.
    let mut one = [0u8; 1];
    within(conn.read_exact(&mut one)).await.unwrap();
    assert_eq!(&one, b"a");
    assert_eq!(&next_bytes(&mut conn).await[..], b"bcde");
    // The empty frame still reads as nothing, and data continues after it.
    assert!(next_bytes(&mut conn).await.is_empty());
    assert_eq!(&next_bytes(&mut conn).await[..], b"f");
    assert!(!mux.is_closed());
}

#[tokio::test]
async fn frames_read_together_still_count_against_the_queue() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let opts = MuxOptions {
        read_queue_len: 3,
        ..MuxOptions::default()
    };
    let mux = Mux::new(a, opts);
    let mut conn = mux.open(1).unwrap();
    for i in 0..4u8 {
        send_frame(&mut raw, 1, &[i]).await;
    }
    within(mux.closed()).await;
    assert!(matches!(
        mux.error(),
        Some(MuxError::QueueOverflow { conn: 1 })
    ));
    // The three frames queued before the overflow are still read.
    let mut buf = [0u8; 3];
    within(conn.read_exact(&mut buf)).await.unwrap();
    assert_eq!(buf, [0, 1, 2]);
}
