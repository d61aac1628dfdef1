//! The client against a hand-played server: exact bytes on the wire.

use crate::common;

use std::time::Duration;

use common::*;
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN, MESSAGE_TYPE_DATA, MESSAGE_TYPE_RESPONSE};
use nri_ttrpc::{Code, Error, MAX_MESSAGE_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn request_bytes_are_exact() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call("s", "M", vec![0x01, 0x02], None).await });
    let mut buf = [0u8; 20];
    within(peer.read_exact(&mut buf)).await.unwrap();
    let expected: [u8; 20] = [
        0, 0, 0, 10, // payload length
        0, 0, 0, 1, // stream id 1
        1, // type: request
        0, // flags
        0x0a, 0x01, b's', // service
        0x12, 0x01, b'M', // method
        0x1a, 0x02, 0x01, 0x02, // payload; no timeout_nano, no metadata
    ];
    assert_eq!(buf, expected);
    answer(&mut peer, 1, b"ok").await;
    assert_eq!(within(call).await.unwrap().unwrap(), b"ok");
    // Nothing else was written before the connection closed.
    client.close();
    let mut rest = Vec::new();
    within(peer.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[tokio::test]
async fn timeout_nano_on_the_wire() {
    let (client, mut peer) = start_raw_server();
    let call = tokio::spawn(async move {
        client
            .call(SVC, "Echo", Vec::new(), Some(Duration::from_secs(2)))
            .await
    });
    let (h, req) = read_request(&mut peer).await;
    assert!(
        req.timeout_nano > 1_000_000_000 && req.timeout_nano <= 2_000_000_000,
        "timeout_nano {}",
        req.timeout_nano
    );
    assert_eq!(req.service, SVC);
    assert_eq!(req.method, "Echo");
    assert!(req.metadata.is_empty());
    answer(&mut peer, h.stream_id, b"").await;
    within(call).await.unwrap().unwrap();
}

#[tokio::test]
async fn stream_ids_are_odd_and_increasing() {
    let (client, mut peer) = start_raw_server();
    // Sequential calls.
    for expected in [1u32, 3, 5, 7] {
        let c = client.clone();
        let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
        let (h, _) = read_request(&mut peer).await;
        assert_eq!(h.stream_id, expected);
        answer(&mut peer, h.stream_id, b"").await;
        within(call).await.unwrap().unwrap();
    }
    // Concurrent calls: on the wire the ids still only go up.
    let mut calls = Vec::new();
    for i in 0..20u8 {
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            c.call(SVC, "Echo", vec![i], None).await.map(|r| (i, r))
        }));
    }
    let mut ids = Vec::new();
    let mut frames = Vec::new();
    for _ in 0..20 {
        let (h, req) = read_request(&mut peer).await;
        ids.push(h.stream_id);
        frames.push((h.stream_id, req.payload));
    }
    let expected: Vec<u32> = (0..20).map(|i| 9 + 2 * i).collect();
    assert_eq!(ids, expected);
    // Answer in reverse order; every call gets its own payload back.
    for (id, payload) in frames.iter().rev() {
        answer(&mut peer, *id, payload).await;
    }
    for call in calls {
        let (i, reply) = within(call).await.unwrap().unwrap();
        assert_eq!(reply, vec![i]);
    }
}

#[tokio::test]
async fn local_timeout_then_late_response_is_dropped() {
    let (client, mut peer) = start_raw_server();
    let err = within(client.call(SVC, "Echo", Vec::new(), Some(Duration::from_millis(50))))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert_eq!(err.code(), Code::DeadlineExceeded);
    let (h, _) = read_request(&mut peer).await;
    assert_eq!(h.stream_id, 1);
    // The late answer for stream 1 must not confuse the next call.
    answer(&mut peer, 1, b"late").await;

    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    assert_eq!(h.stream_id, 3);
    answer(&mut peer, 3, b"fresh").await;
    assert_eq!(within(call).await.unwrap().unwrap(), b"fresh");
    assert!(!client.is_closed());
}

#[tokio::test]
async fn oversized_request_writes_nothing() {
    let (client, mut peer) = start_raw_server();
    let err = within(client.call(SVC, "Echo", vec![0; MAX_MESSAGE_LEN + 1], None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Oversized { .. }), "{err:?}");
    assert_eq!(err.code(), Code::ResourceExhausted);
    // The first bytes the peer sees belong to the next call, which got id 1.
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", b"small".to_vec(), None).await });
    let (h, req) = read_request(&mut peer).await;
    assert_eq!(h.stream_id, 1);
    assert_eq!(req.payload, b"small");
    answer(&mut peer, 1, b"").await;
    within(call).await.unwrap().unwrap();
}

#[tokio::test]
async fn oversized_response_fails_only_that_call() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    let len = MAX_MESSAGE_LEN + 1;
    let header = FrameHeader {
        length: len as u32,
        stream_id: h.stream_id,
        kind: MESSAGE_TYPE_RESPONSE,
        flags: 0,
    };
    let writer = tokio::spawn(async move {
        peer.write_all(&header.encode()).await.unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            peer.write_all(&chunk[..n]).await.unwrap();
            left -= n;
        }
        peer
    });
    let err = within(call).await.unwrap().unwrap_err();
    let st = err.status().expect("a status");
    assert_eq!(st.code(), Code::ResourceExhausted);
    assert_eq!(
        st.message(),
        format!("message length {len} exceed maximum message size of {MAX_MESSAGE_LEN}")
    );
    let mut peer = within(writer).await.unwrap();

    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    assert_eq!(h.stream_id, 3);
    answer(&mut peer, 3, b"fine").await;
    assert_eq!(within(call).await.unwrap().unwrap(), b"fine");
}

#[tokio::test]
async fn response_for_unknown_stream_is_ignored() {
    let (client, mut peer) = start_raw_server();
    answer(&mut peer, 41, b"stray").await;
    answer(&mut peer, 2, b"even").await;
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    answer(&mut peer, h.stream_id, b"mine").await;
    assert_eq!(within(call).await.unwrap().unwrap(), b"mine");
}

#[tokio::test]
async fn wrong_message_type_fails_the_call() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    let header = FrameHeader {
        length: 0,
        stream_id: h.stream_id,
        kind: MESSAGE_TYPE_DATA,
        flags: 0,
    };
    write_raw(&mut peer, header, &[]).await;
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn undecodable_response_envelope_fails_the_call() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    let (h, _) = read_request(&mut peer).await;
    let header = FrameHeader {
        length: 2,
        stream_id: h.stream_id,
        kind: MESSAGE_TYPE_RESPONSE,
        flags: 0,
    };
    // Field 1 (status) with wire type varint: invalid for a message field.
    write_raw(&mut peer, header, &[0x08, 0x01]).await;
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn peer_disappearing_fails_pending_calls_with_closed() {
    let (client, mut peer) = start_raw_server();
    let mut calls = Vec::new();
    for _ in 0..3 {
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            c.call(SVC, "Echo", Vec::new(), None).await
        }));
    }
    for _ in 0..3 {
        read_request(&mut peer).await;
    }
    drop(peer);
    for call in calls {
        let err = within(call).await.unwrap().unwrap_err();
        assert!(matches!(err, Error::Closed), "{err:?}");
        assert_eq!(err.code(), Code::Unavailable);
    }
    within(client.closed()).await;
    assert!(client.is_closed());
    let err = within(client.call(SVC, "Echo", Vec::new(), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
}

#[tokio::test]
async fn garbage_then_eof_fails_pending_calls_with_closed() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    read_request(&mut peer).await;
    // Half a header, then gone.
    peer.write_all(&[0x00, 0x00, 0x01]).await.unwrap();
    drop(peer);
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
    within(client.closed()).await;
}

#[tokio::test]
async fn garbage_announcing_huge_length_then_eof_does_not_hang() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move { c.call(SVC, "Echo", Vec::new(), None).await });
    read_request(&mut peer).await;
    peer.write_all(b"\xff\xff\xff\xffgarbage-garbage")
        .await
        .unwrap();
    drop(peer);
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
}

#[tokio::test]
async fn close_sends_eof_to_peer() {
    let (client, mut peer) = start_raw_server();
    client.close();
    let mut buf = [0u8; HEADER_LEN];
    let n = within(peer.read(&mut buf)).await.unwrap();
    assert_eq!(n, 0);
}
