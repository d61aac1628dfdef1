//! Client and server talking to each other.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use nri_ttrpc::{Client, Code, Error, Server, Status, MAX_MESSAGE_LEN};

#[tokio::test]
async fn echo() {
    let (client, _server) = start();
    let reply = within(client.call(SVC, "Echo", b"hello".to_vec(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"hello");
    let reply = within(client.call(SVC, "Echo", Vec::new(), None))
        .await
        .unwrap();
    assert!(reply.is_empty());
}

#[tokio::test]
async fn hundred_concurrent_calls_out_of_order() {
    let (client, _server) = start();
    let mut tasks = Vec::new();
    for i in 0..100u64 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            // Pseudo-random sleeps so handlers finish in a shuffled order.
            let ms = (i.wrapping_mul(7919) ^ 0x5bd1) % 40;
            let body = format!("call-{i}");
            let reply = client
                .call(SVC, "Sleep", sleep_payload(ms, body.as_bytes()), None)
                .await
                .unwrap();
            assert_eq!(reply, body.as_bytes());
            i
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        done.push(within(t).await.unwrap());
    }
    assert_eq!(done, (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_multi_thread_runtime() {
    let (client, _server) = start();
    echo_from_many_tasks(&client, 200).await;
}

#[tokio::test]
async fn works_over_an_in_memory_duplex() {
    let (a, b) = tokio::io::duplex(4096);
    let server = tokio::spawn(Arc::new(test_server()).serve(b));
    let client = Client::new(a);
    // Bigger than the duplex buffer, so frames are written in pieces.
    let body = vec![0xab; 100_000];
    let reply = within(client.call(SVC, "Echo", body.clone(), None))
        .await
        .unwrap();
    assert_eq!(reply, body);
    client.close();
    assert!(within(server).await.unwrap().is_ok());
}

#[tokio::test]
async fn unknown_service_and_method_are_unimplemented() {
    let (client, _server) = start();
    let err = within(client.call("no.Such", "Echo", Vec::new(), None))
        .await
        .unwrap_err();
    let st = err.status().expect("a status");
    assert_eq!(st.code(), Code::Unimplemented);
    assert_eq!(st.message(), "service no.Such");

    let err = within(client.call(SVC, "Nope", Vec::new(), None))
        .await
        .unwrap_err();
    let st = err.status().expect("a status");
    assert_eq!(st.code(), Code::Unimplemented);
    assert_eq!(st.message(), "method Nope");
}

#[tokio::test]
async fn handler_error_is_transported() {
    let (client, _server) = start();
    let err = within(client.call(SVC, "Fail", b"x1".to_vec(), None))
        .await
        .unwrap_err();
    match err {
        Error::Status(st) => {
            assert_eq!(st.code, Code::NotFound);
            assert_eq!(st.message, "nothing here: x1");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn handler_panic_answers_internal_and_server_survives() {
    let (client, server) = start();
    let err = within(client.call(SVC, "Panic", Vec::new(), None))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    let reply = within(client.call(SVC, "Echo", b"still".to_vec(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"still");
    assert!(!server.is_finished());
}

#[tokio::test]
async fn oversized_response_becomes_resource_exhausted() {
    let (client, _server) = start();
    let err = within(client.call(SVC, "Big", Vec::new(), None))
        .await
        .unwrap_err();
    let st = err.status().expect("a status");
    assert_eq!(st.code(), Code::ResourceExhausted);
    assert_eq!(
        st.message(),
        format!(
            "message length {} exceed maximum message size of {}",
            MAX_MESSAGE_LEN + 5, // payload tag (1) + length varint (4)
            MAX_MESSAGE_LEN
        )
    );
    let reply = within(client.call(SVC, "Echo", b"ok".to_vec(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"ok");
}

#[tokio::test]
async fn oversized_request_is_refused_locally() {
    let (client, _server) = start();
    let err = within(client.call(SVC, "Echo", vec![0; MAX_MESSAGE_LEN + 1], None))
        .await
        .unwrap_err();
    match err {
        Error::Oversized { len, max } => {
            assert_eq!(max, MAX_MESSAGE_LEN);
            // Envelope: service, method, payload field headers plus payload.
            let expected = MAX_MESSAGE_LEN + 1 + 5 + 2 + SVC.len() + 2 + "Echo".len();
            assert_eq!(len, expected);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!client.is_closed());
    let reply = within(client.call(SVC, "Echo", b"after".to_vec(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"after");
}

#[tokio::test]
async fn largest_allowed_request_goes_through() {
    let (client, _server) = start();
    let overhead = 2 + SVC.len() + 2 + "Echo".len() + 5;
    let body = vec![3u8; MAX_MESSAGE_LEN - overhead];
    // The request envelope is exactly at the limit; the response envelope is
    // smaller (no service/method), so it fits too.
    let reply = within(client.call(SVC, "Echo", body.clone(), None))
        .await
        .unwrap();
    assert_eq!(reply.len(), body.len());
}

#[tokio::test]
async fn server_deadline_exceeded() {
    let (client, _server) = start();
    let err = within(client.call(
        SVC,
        "Sleep",
        sleep_payload(10_000, b""),
        Some(Duration::from_millis(100)),
    ))
    .await
    .unwrap_err();
    // The server drops the call unanswered; the client's own timeout ends it.
    assert_eq!(err.code(), Code::DeadlineExceeded);
    let reply = within(client.call(SVC, "Echo", b"next".to_vec(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"next");
}

#[tokio::test]
async fn deadline_reaches_the_handler() {
    let (client, _server) = start();
    let reply = within(client.call(SVC, "Context", Vec::new(), Some(Duration::from_secs(30))))
        .await
        .unwrap();
    let text = String::from_utf8(reply).unwrap();
    let ms: u64 = text
        .split("deadline=")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no deadline in {text:?}"));
    assert!(ms > 20_000 && ms <= 30_000, "deadline {ms} ms");
    assert!(text.starts_with("test.Svc/Context "));

    let reply = within(client.call(SVC, "Context", Vec::new(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"test.Svc/Context deadline=none ");
}

#[derive(Clone, PartialEq, prost::Message)]
struct Greeting {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(uint32, tag = "2")]
    count: u32,
}

fn greeter() -> Server {
    let mut server = Server::new();
    server.register_msg("test.Greeter", "Greet", |_ctx, req: Greeting| async move {
        if req.name.is_empty() {
            return Err(Status::new(Code::InvalidArgument, "no name"));
        }
        Ok(Greeting {
            name: format!("hello {}", req.name),
            count: req.count + 1,
        })
    });
    server
}

#[tokio::test]
async fn typed_calls() {
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    let server = Arc::new(greeter());
    assert!(server.has_method("test.Greeter", "Greet"));
    assert!(!server.has_method("test.Greeter", "Other"));
    tokio::spawn(server.serve(b));
    let client = Client::new(a);

    let req = Greeting {
        name: "nri".into(),
        count: 41,
    };
    let resp: Greeting = within(client.call_msg("test.Greeter", "Greet", &req, None))
        .await
        .unwrap();
    assert_eq!(resp.name, "hello nri");
    assert_eq!(resp.count, 42);

    let err =
        within(client.call_msg::<_, Greeting>("test.Greeter", "Greet", &Greeting::default(), None))
            .await
            .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // A payload that is not a Greeting: field 1 as a varint is a wire-type
    // mismatch for a string field.
    let err = within(client.call("test.Greeter", "Greet", vec![0x08, 0x01], None))
        .await
        .unwrap_err();
    let st = err.status().expect("a status");
    assert_eq!(st.code(), Code::Internal);
    assert!(
        st.message()
            .starts_with("ttrpc: error unmarshalling payload: "),
        "{}",
        st.message()
    );
}

#[tokio::test]
async fn undecodable_typed_response_is_a_protocol_error() {
    let (raw_client, mut peer) = start_raw_server();
    let call = tokio::spawn(async move {
        raw_client
            .call_msg::<Greeting, Greeting>(SVC, "Echo", &Greeting::default(), None)
            .await
    });
    let (h, _) = read_request(&mut peer).await;
    answer(&mut peer, h.stream_id, &[0xff]).await;
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn close_fails_pending_calls_and_ends_server() {
    let (client, server) = start();
    let pending = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .call(SVC, "Sleep", sleep_payload(10_000, b""), None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.close();
    assert!(client.is_closed());
    within(client.closed()).await;
    let err = within(pending).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
    let err = within(client.call(SVC, "Echo", Vec::new(), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
    // The server sees a clean EOF.
    assert!(within(server).await.unwrap().is_ok());
}

#[tokio::test]
async fn server_serves_many_connections() {
    let server = Arc::new(test_server());
    let mut clients = Vec::new();
    for _ in 0..3 {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(server.clone().serve(b));
        clients.push(Client::new(a));
    }
    for (i, c) in clients.iter().enumerate() {
        let body = vec![i as u8; 3];
        assert_eq!(
            within(c.call(SVC, "Echo", body.clone(), None))
                .await
                .unwrap(),
            body
        );
    }
}
