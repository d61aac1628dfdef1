//! The server against a hand-played client: exact behaviour per frame.

use crate::common;

use common::*;
use nri_ttrpc::frame::{FrameHeader, MESSAGE_TYPE_DATA, MESSAGE_TYPE_REQUEST};
use nri_ttrpc::{proto, Code, Error, MAX_MESSAGE_LEN};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

/// Sends `req` on stream `id` and reads the answer, which must come back on
/// that stream.
async fn exchange(peer: &mut UnixStream, id: u32, req: &proto::Request) -> proto::Response {
    peer.write_all(&encode_request(id, req)).await.unwrap();
    let (h, resp) = read_response(peer).await;
    assert_eq!(h.stream_id, id);
    resp
}

#[tokio::test]
async fn ok_response_bytes_are_exact() {
    let (mut peer, _server) = start_raw_client();
    peer.write_all(&encode_request(1, &request("Echo", &[0xaa], 0)))
        .await
        .unwrap();
    let (h, body) = read_raw(&mut peer).await;
    assert_eq!(
        h,
        FrameHeader {
            length: 3,
            stream_id: 1,
            kind: 2,
            flags: 0
        }
    );
    // No status (as Go's server sends for OK), then the payload.
    assert_eq!(body, vec![0x12, 0x01, 0xaa]);
}

#[tokio::test]
async fn unimplemented_texts_follow_go() {
    let (mut peer, _server) = start_raw_client();
    let mut req = request("Echo", b"", 0);
    req.service = "other.Svc".into();
    let resp = exchange(&mut peer, 1, &req).await;
    assert_eq!(
        status_of(&resp),
        (Code::Unimplemented, "service other.Svc".to_string())
    );

    let resp = exchange(&mut peer, 3, &request("Missing", b"", 0)).await;
    assert_eq!(
        status_of(&resp),
        (Code::Unimplemented, "method Missing".to_string())
    );
}

#[tokio::test]
async fn handler_exceeding_timeout_nano_is_dropped_unanswered() {
    // One request in flight at a time: the second request is read only once
    // the first one's slot is free, so the first frame back shows whether the
    // first request was answered when its deadline passed.
    let (mut peer, b) = tokio::net::UnixStream::pair().unwrap();
    let mut server = test_server();
    server.set_max_in_flight(1);
    let _server = tokio::spawn(std::sync::Arc::new(server).serve(b));
    let slow = request("Sleep", &sleep_payload(60_000, b"late"), 50_000_000);
    peer.write_all(&encode_request(1, &slow)).await.unwrap();
    peer.write_all(&encode_request(3, &request("Echo", b"next", 0)))
        .await
        .unwrap();
    let (h, resp) = within(read_response(&mut peer)).await;
    assert_eq!(
        h.stream_id, 3,
        "the timed-out request was answered: {resp:?}"
    );
    assert_eq!(status_of(&resp).0, Code::Ok);
    assert_eq!(resp.payload, b"next");
}

#[tokio::test]
async fn handler_within_timeout_nano_succeeds() {
    let (mut peer, _server) = start_raw_client();
    let req = request("Sleep", &sleep_payload(10, b"done"), 10_000_000_000);
    peer.write_all(&encode_request(1, &req)).await.unwrap();
    let (_, resp) = read_response(&mut peer).await;
    assert_eq!(status_of(&resp).0, Code::Ok);
    assert_eq!(resp.payload, b"done");
}

#[tokio::test]
async fn metadata_reaches_the_handler() {
    let (mut peer, _server) = start_raw_client();
    let mut req = request("Context", b"", 0);
    req.metadata = vec![
        proto::KeyValue {
            key: "a".into(),
            value: "1".into(),
        },
        proto::KeyValue {
            key: "b".into(),
            value: "2".into(),
        },
    ];
    peer.write_all(&encode_request(1, &req)).await.unwrap();
    let (_, resp) = read_response(&mut peer).await;
    assert_eq!(resp.payload, b"test.Svc/Context deadline=none a=1,b=2");
}

#[tokio::test]
async fn oversized_request_is_answered_and_connection_survives() {
    let (mut peer, server) = start_raw_client();
    let len = MAX_MESSAGE_LEN + 1;
    let header = FrameHeader {
        length: len as u32,
        stream_id: 1,
        kind: MESSAGE_TYPE_REQUEST,
        flags: 0,
    };
    let (mut rd, mut wr) = peer.split();
    let write = async {
        wr.write_all(&header.encode()).await.unwrap();
        let chunk = vec![0x42u8; 64 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            wr.write_all(&chunk[..n]).await.unwrap();
            left -= n;
        }
    };
    let read = read_response(&mut rd);
    let ((), (h, resp)) = within(async { tokio::join!(write, read) }).await;
    assert_eq!(h.stream_id, 1);
    assert_eq!(
        status_of(&resp),
        (
            Code::ResourceExhausted,
            format!("message length {len} exceed maximum message size of {MAX_MESSAGE_LEN}")
        )
    );

    let resp = exchange(&mut peer, 3, &request("Echo", b"again", 0)).await;
    assert_eq!(resp.payload, b"again");
    assert!(!server.is_finished());
}

#[tokio::test]
async fn even_stream_id_is_invalid_argument() {
    let (mut peer, _server) = start_raw_client();
    let resp = exchange(&mut peer, 2, &request("Echo", b"", 0)).await;
    assert_eq!(
        status_of(&resp),
        (
            Code::InvalidArgument,
            "StreamID must be odd for client initiated streams".to_string()
        )
    );
}

#[tokio::test]
async fn reused_stream_id_is_invalid_argument() {
    let (mut peer, _server) = start_raw_client();
    peer.write_all(&encode_request(5, &request("Echo", b"x", 0)))
        .await
        .unwrap();
    let (_, resp) = read_response(&mut peer).await;
    assert_eq!(resp.payload, b"x");
    let resp = exchange(&mut peer, 3, &request("Echo", b"y", 0)).await;
    assert_eq!(
        status_of(&resp),
        (
            Code::InvalidArgument,
            "StreamID cannot be re-used and must increment".to_string()
        )
    );
    // Higher ids keep working.
    let resp = exchange(&mut peer, 7, &request("Echo", b"z", 0)).await;
    assert_eq!(resp.payload, b"z");
}

#[tokio::test]
async fn undecodable_request_is_invalid_argument() {
    let (mut peer, _server) = start_raw_client();
    let header = FrameHeader {
        length: 2,
        stream_id: 1,
        kind: MESSAGE_TYPE_REQUEST,
        flags: 0,
    };
    // Field 1 (service, a string) sent as a varint.
    write_raw(&mut peer, header, &[0x08, 0x01]).await;
    let (h, resp) = read_response(&mut peer).await;
    assert_eq!(h.stream_id, 1);
    let (code, message) = status_of(&resp);
    assert_eq!(code, Code::InvalidArgument);
    assert!(
        message.starts_with("unmarshal request error: "),
        "{message}"
    );
}

#[tokio::test]
async fn data_and_unknown_frames_are_ignored() {
    let (mut peer, server) = start_raw_client();
    for kind in [MESSAGE_TYPE_DATA, 0x7f] {
        let header = FrameHeader {
            length: 3,
            stream_id: 1,
            kind,
            flags: 0,
        };
        write_raw(&mut peer, header, b"abc").await;
    }
    let resp = exchange(&mut peer, 1, &request("Echo", b"after", 0)).await;
    assert_eq!(resp.payload, b"after");
    assert!(!server.is_finished());
}

#[tokio::test]
async fn clean_eof_returns_ok() {
    let (peer, server) = start_raw_client();
    drop(peer);
    assert!(within(server).await.unwrap().is_ok());
}

#[tokio::test]
async fn eof_with_handlers_running_returns_ok() {
    let (mut peer, server) = start_raw_client();
    let req = request("Sleep", &sleep_payload(60_000, b""), 0);
    peer.write_all(&encode_request(1, &req)).await.unwrap();
    drop(peer);
    assert!(within(server).await.unwrap().is_ok());
}

#[tokio::test]
async fn truncated_header_then_eof_is_an_error() {
    let (mut peer, server) = start_raw_client();
    peer.write_all(&[0, 0, 0, 5, 0]).await.unwrap();
    drop(peer);
    let result = within(server).await.unwrap();
    assert!(matches!(result, Err(Error::Protocol(_))), "{result:?}");
}

#[tokio::test]
async fn garbage_then_eof_is_an_error() {
    let (mut peer, server) = start_raw_client();
    peer.write_all(b"this is not ttrpc at all").await.unwrap();
    drop(peer);
    let result = within(server).await.unwrap();
    assert!(matches!(result, Err(Error::Protocol(_))), "{result:?}");
}

#[tokio::test]
async fn truncated_payload_then_eof_is_an_error() {
    let (mut peer, server) = start_raw_client();
    let full = encode_request(1, &request("Echo", b"payload", 0));
    peer.write_all(&full[..full.len() - 3]).await.unwrap();
    drop(peer);
    let result = within(server).await.unwrap();
    assert!(matches!(result, Err(Error::Protocol(_))), "{result:?}");
}
