//! Requests and replies are written by the task that produced them: a client's
//! request by the calling task, a server's reply by the connection's task when the
//! handler completes at once. Handlers that wait still run in tasks of their own.

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use common::{boxed_handler, within, SVC};
use nri_ttrpc::{Client, Code, Server};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::runtime::Handle;

/// On one thread, the first poll of a call puts its request on the stream: the
/// peer can read it before any other task has run.
#[tokio::test(flavor = "current_thread")]
async fn a_call_writes_its_request_before_it_first_waits() {
    let (client_io, mut peer) = tokio::io::duplex(64 * 1024);
    let client = Client::new(client_io);
    let mut cx = Context::from_waker(Waker::noop());
    let mut call = pin!(client.call(SVC, "Echo", b"ping".to_vec(), None));
    assert!(call.as_mut().poll(&mut cx).is_pending());

    let mut buf = [0u8; 256];
    let mut read = ReadBuf::new(&mut buf);
    let polled = pin!(&mut peer).poll_read(&mut cx, &mut read);
    assert!(matches!(polled, Poll::Ready(Ok(()))), "{polled:?}");
    let got = read.filled();
    // ttRPC header: length, stream id 1, type request.
    assert!(got.len() > 10, "{} bytes on the stream", got.len());
    assert_eq!(&got[4..8], &1u32.to_be_bytes());
    assert_eq!(got[8], 1);
    assert!(got.windows(4).any(|w| w == b"ping"));
}

/// A handler that completes at once runs without a task of its own; one that
/// waits goes on in one: seen in the number of live tasks while each runs.
#[tokio::test(flavor = "current_thread")]
async fn only_a_handler_that_waits_gets_a_task_of_its_own() {
    let at_once = Arc::new(AtomicUsize::new(0));
    let after_wait = Arc::new(AtomicUsize::new(0));
    let mut server = Server::new();
    let seen = Arc::clone(&at_once);
    server.register(SVC, "AtOnce", move |_ctx, payload| {
        let seen = Arc::clone(&seen);
        boxed_handler(async move {
            seen.store(
                Handle::current().metrics().num_alive_tasks(),
                Ordering::SeqCst,
            );
            Ok(payload)
        })
    });
    let seen = Arc::clone(&after_wait);
    server.register(SVC, "Waits", move |_ctx, payload| {
        let seen = Arc::clone(&seen);
        boxed_handler(async move {
            tokio::task::yield_now().await;
            seen.store(
                Handle::current().metrics().num_alive_tasks(),
                Ordering::SeqCst,
            );
            Ok(payload)
        })
    });
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(Arc::new(server).serve(server_io));
    let client = Client::new(client_io);

    for _ in 0..3 {
        let reply = within(client.call(SVC, "AtOnce", b"a".to_vec(), None)).await;
        assert_eq!(reply.unwrap(), b"a");
        let reply = within(client.call(SVC, "Waits", b"w".to_vec(), None)).await;
        assert_eq!(reply.unwrap(), b"w");
        let (once, waited) = (
            at_once.load(Ordering::SeqCst),
            after_wait.load(Ordering::SeqCst),
        );
        assert!(once > 0);
        assert_eq!(
            waited,
            once + 1,
            "tasks alive: {once} at once, {waited} after a wait"
        );
    }
}

/// A handler that panics after it first waited (in its own task) is answered with
/// `Internal`, like one that panics at once, and the connection goes on.
#[tokio::test]
async fn a_handler_that_panics_after_waiting_is_answered() {
    let mut server = common::test_server();
    server.register(SVC, "PanicLater", |_ctx, _payload| {
        boxed_handler(async move {
            tokio::task::yield_now().await;
            panic!("handler panic after a wait, for test")
        })
    });
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(Arc::new(server).serve(server_io));
    let client = Client::new(client_io);
    for method in ["PanicLater", "Panic"] {
        let err = within(client.call(SVC, method, Vec::new(), None))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{method}: {err}");
        let reply = within(client.call(SVC, "Echo", b"on".to_vec(), None)).await;
        assert_eq!(reply.unwrap(), b"on");
    }
}
