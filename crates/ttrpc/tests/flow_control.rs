//! Per-connection flow control of the server: at most `max_in_flight`
//! requests (handlers running plus replies not yet written) per connection;
//! at the bound the server stops reading.
//!
//! The tests run on tokio's paused clock over in-memory duplex streams: a
//! long sleep then returns only once every task is idle, which is how they
//! wait until the server has taken everything it is going to take.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{encode_request, read_response, request, status_of, within, SVC};
use nri_ttrpc::{BoxFuture, Client, Code, Server, Status};
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

const MAX_IN_FLIGHT: usize = 8;
/// Payload of each `Reply` response.
const REPLY_LEN: usize = 1000;
/// Buffer of each direction of the duplex: holds two replies, not three.
const DUPLEX_BUF: usize = 2048;

/// Waits until every other task on the (paused-clock) runtime is idle.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// A server whose `Reply` method counts its calls and returns `REPLY_LEN`
/// bytes, and whose `Gated` method waits for a permit of `gate` first.
fn server(handled: Arc<AtomicUsize>, started: Arc<AtomicUsize>, gate: Arc<Semaphore>) -> Server {
    let mut server = Server::new();
    server.set_max_in_flight(MAX_IN_FLIGHT);
    server.register(SVC, "Reply", move |_ctx, _payload| {
        handled.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(vec![7u8; REPLY_LEN]) }) as BoxFuture<'static, _>
    });
    server.register(SVC, "Gated", move |_ctx, payload| {
        started.fetch_add(1, Ordering::SeqCst);
        let gate = gate.clone();
        Box::pin(async move {
            let permit = gate
                .acquire()
                .await
                .map_err(|_| Status::internal("gate closed"))?;
            permit.forget();
            Ok(payload)
        }) as BoxFuture<'static, _>
    });
    server
}

#[tokio::test(start_paused = true)]
async fn peer_that_does_not_read_replies_is_held_up() {
    const TOTAL: u32 = 2000;
    let handled = Arc::new(AtomicUsize::new(0));
    let srv = server(handled.clone(), Arc::default(), Arc::new(Semaphore::new(0)));
    let (peer, server_io) = tokio::io::duplex(DUPLEX_BUF);
    let serving = tokio::spawn(Arc::new(srv).serve(server_io));
    let (mut peer_rd, mut peer_wr) = tokio::io::split(peer);

    // Flood requests without reading a single reply.
    let sent = Arc::new(AtomicUsize::new(0));
    let flood = tokio::spawn({
        let sent = sent.clone();
        async move {
            for i in 0..TOTAL {
                let frame = encode_request(2 * i + 1, &request("Reply", b"x", 0));
                peer_wr.write_all(&frame).await.unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
            }
            peer_wr
        }
    });
    settle().await;

    // The server ran exactly as many handlers as it had slots, plus those
    // whose replies the stream itself took (two fit in its buffer), and
    // then stopped reading: the flood is stuck in its own writes.
    let taken = handled.load(Ordering::SeqCst);
    assert!(taken >= MAX_IN_FLIGHT, "bound never reached: {taken}");
    assert!(
        taken <= MAX_IN_FLIGHT + DUPLEX_BUF / REPLY_LEN,
        "{taken} requests taken from a peer that reads no replies"
    );
    let stuck_at = sent.load(Ordering::SeqCst);
    assert!(stuck_at < TOTAL as usize, "the whole flood was accepted");
    assert!(!flood.is_finished());

    // Once the peer reads, the server resumes: every request is answered,
    // none refused.
    for _ in 0..TOTAL {
        let (header, resp) = read_response(&mut peer_rd).await;
        assert_eq!(status_of(&resp).0, Code::Ok, "stream {}", header.stream_id);
        assert_eq!(resp.payload.len(), REPLY_LEN);
    }
    assert_eq!(handled.load(Ordering::SeqCst), TOTAL as usize);
    let peer_wr = flood.await.unwrap();
    drop(peer_wr);
    drop(peer_rd);
    assert!(serving.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn slow_handlers_pause_reading_instead_of_piling_up() {
    const CALLS: usize = 50;
    let started = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let srv = server(Arc::default(), started.clone(), gate.clone());
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(Arc::new(srv).serve(server_io));
    let client = Client::new(client_io);

    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let body = format!("call-{i}").into_bytes();
                let reply = client.call(SVC, "Gated", body.clone(), None).await;
                (body, reply)
            })
        })
        .collect();
    settle().await;
    // Every request was sent (the duplex buffer holds them all), but only
    // as many handlers started as there are slots.
    assert_eq!(started.load(Ordering::SeqCst), MAX_IN_FLIGHT);

    // Releasing the handlers frees slots; the waiting requests are then
    // read and served, not refused.
    gate.add_permits(CALLS);
    for call in calls {
        let (body, reply) = call.await.unwrap();
        assert_eq!(reply.unwrap(), body);
    }
    assert_eq!(started.load(Ordering::SeqCst), CALLS);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_is_answered_and_frees_its_slot() {
    // One slot: the panic's `Internal` reply carries the handler's slot,
    // which must come back for the next request to be read at all.
    let mut srv = common::test_server();
    srv.set_max_in_flight(1);
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(Arc::new(srv).serve(server_io));
    let client = Client::new(client_io);
    for _ in 0..3 {
        let err = within(client.call(SVC, "Panic", Vec::new(), None))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        let reply = within(client.call(SVC, "Echo", b"hi".to_vec(), None))
            .await
            .unwrap();
        assert_eq!(reply, b"hi");
    }
}
