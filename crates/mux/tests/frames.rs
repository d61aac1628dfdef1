//! The exact frames a `MuxConn` puts on the trunk.

use crate::common;

use common::{pattern, read_frame, within};
use nri_mux::{Mux, MuxOptions};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

#[tokio::test]
async fn write_sizes_give_the_expected_frame_sequence() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut conn = mux.open(3).unwrap();

    // Zero-length write: one header-only frame, Ok(0).
    assert_eq!(within(conn.write(&[])).await.unwrap(), 0);
    within(conn.flush()).await.unwrap();
    assert_eq!(read_frame(&mut raw).await, (3, vec![]));

    for (len, expected) in [
        (1usize, vec![1usize]),
        (4096, vec![4096]),
        (4097, vec![4096, 1]),
        // Large writes: a first 4096-byte frame, then the rest in one frame,
        // as Go peers write a large ttRPC message.
        (1 << 20, vec![4096, (1 << 20) - 4096]),
    ] {
        let data = pattern(len, len as u8);
        // Big writes exceed the socket buffer: read while the writer task writes.
        within(conn.write_all(&data)).await.unwrap();
        let mut got = Vec::new();
        for &want in &expected {
            let (id, payload) = read_frame(&mut raw).await;
            assert_eq!(id, 3);
            assert_eq!(payload.len(), want, "write of {len} bytes");
            got.extend_from_slice(&payload);
        }
        assert_eq!(got, data, "write of {len} bytes");
        within(conn.flush()).await.unwrap();
    }
}

#[tokio::test]
async fn custom_frame_size_is_respected() {
    let (a, mut raw) = UnixStream::pair().unwrap();
    let opts = MuxOptions {
        max_write_frame: 100,
        ..MuxOptions::default()
    };
    let mux = Mux::new(a, opts);
    let mut conn = mux.open(9).unwrap();
    within(conn.write_all(&pattern(250, 1))).await.unwrap();
    within(conn.flush()).await.unwrap();
    let sizes: Vec<usize> = [read_frame(&mut raw).await, read_frame(&mut raw).await]
        .iter()
        .map(|(id, p)| {
            assert_eq!(*id, 9);
            p.len()
        })
        .collect();
    assert_eq!(sizes, vec![100, 150]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_of_one_write_are_contiguous() {
    const WRITE: usize = 64 * 1024;
    const WRITES: usize = 20;
    // A first 4096-byte frame, then the rest of the write in one frame.
    const FRAMES_PER_WRITE: usize = 2;

    let (a, mut raw) = UnixStream::pair().unwrap();
    let mux = Mux::new(a, MuxOptions::default());
    let mut tasks = Vec::new();
    for id in [1u32, 2] {
        let mut conn = mux.open(id).unwrap();
        tasks.push(tokio::spawn(async move {
            let data = pattern(WRITE, id as u8);
            for _ in 0..WRITES {
                // A single write call of 64 KiB is accepted whole.
                let n = conn.write(&data).await.unwrap();
                assert_eq!(n, WRITE);
            }
            conn.flush().await.unwrap();
            conn
        }));
    }
    let reader = tokio::spawn(async move {
        let mut frames = Vec::new();
        for _ in 0..2 * WRITES * FRAMES_PER_WRITE {
            let (id, payload) = read_frame(&mut raw).await;
            assert!(
                payload.len() == 4096 || payload.len() == WRITE - 4096,
                "{}",
                payload.len()
            );
            frames.push(id);
        }
        frames
    });
    let mut _conns = Vec::new();
    for t in tasks {
        _conns.push(within(t).await.unwrap());
    }
    let frames = within(reader).await.unwrap();

    // Every run of frames of one conn is made of whole writes.
    let mut run = 1;
    for pair in frames.windows(2) {
        if pair[0] == pair[1] {
            run += 1;
        } else {
            assert_eq!(run % FRAMES_PER_WRITE, 0, "a write was split: {frames:?}");
            run = 1;
        }
    }
    assert_eq!(run % FRAMES_PER_WRITE, 0);
    assert_eq!(
        frames.iter().filter(|&&id| id == 1).count(),
        WRITES * FRAMES_PER_WRITE
    );
}
