//! nri-mux: arbitrary bytes as the trunk.
//!
//! Input: one byte of options, then the bytes the peer sends on the trunk.
//! The target opens conns 1 and 2 (and the ids of the first two frames),
//! feeds the bytes, closes the peer's side, and reads every conn to its end.
//!
//! Checked: no panic, no hang (the paused clock turns a deadlock into a
//! panic), and what each conn reads is exactly the payloads of the frames
//! for its id (a zero-length frame reading as one empty read), as a simple
//! reference parser of the same bytes says; a conn ends with an error
//! exactly when the trunk ended inside a frame or announced an oversized
//! one. With the default read queue (read concurrently), a queue overflow
//! may close the mux early: then each conn has read a prefix.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use nri_fuzz::run_paused;
use nri_mux::{Mux, MuxConn, MuxError, MuxOptions, MAX_FRAME_PAYLOAD};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the reference parser expects on one conn.
#[derive(Default, Debug, PartialEq)]
struct Expected {
    data: Vec<u8>,
    empty_frames: usize,
}

/// The frames of `trunk` by id, and whether the trunk ends cleanly between
/// two frames.
fn reference(trunk: &[u8]) -> (BTreeMap<u32, Expected>, bool, Vec<u32>) {
    let mut out: BTreeMap<u32, Expected> = BTreeMap::new();
    let mut order = Vec::new();
    let mut rest = trunk;
    loop {
        if rest.is_empty() {
            return (out, true, order);
        }
        if rest.len() < 8 {
            return (out, false, order);
        }
        let id = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        if len > MAX_FRAME_PAYLOAD || rest.len() - 8 < len {
            return (out, false, order);
        }
        order.push(id);
        let e = out.entry(id).or_default();
        e.data.extend_from_slice(&rest[8..8 + len]);
        if len == 0 {
            e.empty_frames += 1;
        }
        rest = &rest[8 + len..];
    }
}

/// Reads `conn` until it has returned one more empty read than the number of
/// empty frames it gets (its end), or an error.
async fn drain(mut conn: MuxConn, empty_frames: usize, chunk: usize) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    let mut buf = vec![0u8; chunk];
    let mut empties = 0;
    loop {
        match conn.read(&mut buf).await {
            Ok(0) => {
                empties += 1;
                if empties > empty_frames {
                    // The end is stable: reading again gives the end again.
                    let again = conn.read(&mut buf).await;
                    assert!(matches!(again, Ok(0)), "read after end gave {again:?}");
                    return (data, false);
                }
            }
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(_) => return (data, true),
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, trunk)) = input.split_first() else {
        return;
    };
    let collect = flags & 1 != 0;
    let chunk = [1usize, 7, 4096, 65536][usize::from((flags >> 1) & 3)];
    let pipe = [16usize, 4096, 1 << 20][usize::from((flags >> 3) % 3)];
    let (expected, clean, order) = reference(trunk);

    run_paused(async move {
        let (mut peer, local) = tokio::io::duplex(pipe);
        let opts = MuxOptions {
            read_queue_len: if collect { 1 << 20 } else { 256 },
            ..MuxOptions::default()
        };
        let mux = Mux::new(local, opts);
        let mut ids = vec![1u32, 2];
        for id in order.iter().take(2) {
            if *id != 0 && !ids.contains(id) {
                ids.push(*id);
            }
        }
        let conns: Vec<(u32, MuxConn)> = ids
            .iter()
            .map(|&id| (id, mux.open(id).expect("a fresh id opens")))
            .collect();

        let owned = trunk.to_vec();
        let feeder = tokio::spawn(async move {
            // The mux may close (bad frame) before taking everything.
            let _ = peer.write_all(&owned).await;
            let _ = peer.shutdown().await;
            drop(peer);
        });

        if collect {
            mux.closed().await;
        }
        let mut readers = Vec::new();
        for (id, conn) in conns {
            let want = expected.get(&id).map_or(0, |e| e.empty_frames);
            readers.push((id, tokio::spawn(drain(conn, want, chunk))));
        }
        let mut results = Vec::new();
        for (id, reader) in readers {
            results.push((id, reader.await.expect("reader task")));
        }
        feeder.await.expect("feeder task");
        mux.closed().await;

        let overflowed = matches!(mux.error(), Some(MuxError::QueueOverflow { .. }));
        for (id, (data, failed)) in results {
            let want = expected.get(&id).map(|e| e.data.as_slice()).unwrap_or(&[]);
            if overflowed {
                assert!(!collect, "queue overflow with an unbounded queue");
                assert!(want.starts_with(&data), "conn {id}: not a prefix");
            } else {
                assert_eq!(data, want, "conn {id}: data differs from the frames sent");
                assert_eq!(
                    failed,
                    !clean,
                    "conn {id}: error state, mux {:?}",
                    mux.error()
                );
            }
        }

        // Writes after the end fail, they do not hang.
        if let Ok(mut c) = mux.open(1) {
            let _ = c.write_all(b"late").await;
        }
        mux.close();
    });
});
