//! Request metadata sent by the client: exact bytes on the wire, and a round
//! trip through our server to a handler.

use crate::common;

use std::sync::Arc;

use common::*;
use nri_ttrpc::{BoxFuture, Client, Server, TraceContext};
use tokio::io::AsyncReadExt;

#[tokio::test]
async fn metadata_bytes_are_exact() {
    let (client, mut peer) = start_raw_server();
    let c = client.clone();
    let call = tokio::spawn(async move {
        let md = [("K", "v"), ("a", "12")];
        c.call_with_metadata("s", "M", vec![0x01], None, &md).await
    });
    let mut buf = [0u8; 10 + 26];
    within(peer.read_exact(&mut buf)).await.unwrap();
    let expected: [u8; 36] = [
        0, 0, 0, 26, // payload length
        0, 0, 0, 1, // stream id 1
        1, // type: request
        0, // flags
        0x0a, 0x01, b's', // service
        0x12, 0x01, b'M', // method
        0x1a, 0x01, 0x01, // payload; no timeout_nano
        // metadata (field 5), one KeyValue{key = 1, value = 2} per entry, in
        // the given order, keys lowercased as Go's ttrpc.MD stores them
        0x2a, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v', //
        0x2a, 0x07, 0x0a, 0x01, b'a', 0x12, 0x02, b'1', b'2',
    ];
    assert_eq!(buf, expected);
    answer(&mut peer, 1, b"ok").await;
    assert_eq!(within(call).await.unwrap().unwrap(), b"ok");
}

#[tokio::test]
async fn traceparent_on_the_wire() {
    let (client, mut peer) = start_raw_server();
    let tc = TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("congo=t61rcWkgMzE"),
    )
    .unwrap();
    let md = tc.to_metadata();
    let call = tokio::spawn(async move {
        client
            .call_msg_with_metadata::<Vec<u8>, Vec<u8>, _, _>(SVC, "Echo", &Vec::new(), None, &md)
            .await
    });
    let (h, req) = read_request(&mut peer).await;
    let kv: Vec<(&str, &str)> = req
        .metadata
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(
        kv,
        [
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            ),
            ("tracestate", "congo=t61rcWkgMzE"),
        ]
    );
    answer(&mut peer, h.stream_id, b"").await;
    within(call).await.unwrap().unwrap();
}

#[tokio::test]
async fn metadata_round_trip_through_our_server() {
    let mut server = Server::new();
    server.register("demo.Meta", "Get", |ctx, _payload: Vec<u8>| {
        let seen = format!("{:?}", ctx.metadata);
        let trace = TraceContext::from_metadata(&ctx.metadata)
            .map(|t| t.traceparent())
            .unwrap_or_default();
        Box::pin(async move { Ok(format!("{seen}|{trace}").into_bytes()) }) as BoxFuture<'static, _>
    });
    let (a, b) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(Arc::new(server).serve(b));
    let client = Client::new(a);

    let tc = TraceContext::generate();
    let mut md = tc.to_metadata();
    md.push(("x-extra".into(), "1".into()));
    md.push(("x-extra".into(), "2".into()));
    let reply = within(client.call_with_metadata("demo.Meta", "Get", Vec::new(), None, &md))
        .await
        .unwrap();
    let expected = format!("{md:?}|{}", tc.traceparent());
    assert_eq!(String::from_utf8(reply).unwrap(), expected);

    // Plain calls still send none.
    let reply = within(client.call("demo.Meta", "Get", Vec::new(), None))
        .await
        .unwrap();
    assert_eq!(reply, b"[]|");
}
