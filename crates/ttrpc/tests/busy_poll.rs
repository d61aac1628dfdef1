//! Calls of a client that polls for its responses before it waits
//! (`Client::with_busy_poll`).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use nri_ttrpc::Error;

/// Far longer than any of these calls may take: a call that only returned
/// once its polling window ran out would fail the tests below.
const LONG_WINDOW: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "current_thread")]
async fn response_is_taken_while_polling_on_one_thread() {
    // Client and server share one single-threaded runtime: the server only
    // runs, and the response only arrives, if the polling call lets the
    // runtime check its sockets and run other tasks between its looks.
    let (client, _server) = start();
    let client = client.with_busy_poll(LONG_WINDOW);
    let started = Instant::now();
    for i in 0..50u32 {
        let body = i.to_be_bytes().to_vec();
        let reply = within(client.call(SVC, "Echo", body.clone(), None))
            .await
            .unwrap();
        assert_eq!(reply, body);
    }
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_is_taken_while_polling_on_many_threads() {
    let (client, _server) = start();
    echo_from_many_tasks(&client.with_busy_poll(LONG_WINDOW), 20).await;
}

#[tokio::test]
async fn response_after_the_window_is_still_received() {
    let (client, _server) = start();
    let client = client.with_busy_poll(Duration::from_micros(200));
    let reply = within(client.call(SVC, "Sleep", sleep_payload(30, b"late"), None))
        .await
        .unwrap();
    assert_eq!(reply, b"late");
}

#[tokio::test]
async fn the_timeout_ends_the_polling() {
    let (client, _server) = start();
    let client = client.with_busy_poll(LONG_WINDOW);
    let started = Instant::now();
    let err = within(client.call(
        SVC,
        "Sleep",
        sleep_payload(30_000, b""),
        Some(Duration::from_millis(50)),
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[tokio::test(start_paused = true)]
async fn the_window_passes_with_the_clock_paused() {
    // tokio's clock stands still while the polling task keeps the runtime
    // busy; the window is on the system clock, so it still ends and the
    // call goes on to wait for the late response.
    let (client, _server) = start();
    let client = client.with_busy_poll(Duration::from_millis(5));
    let reply = client
        .call(SVC, "Sleep", sleep_payload(1_000, b"paused"), None)
        .await
        .unwrap();
    assert_eq!(reply, b"paused");
}

#[tokio::test]
async fn closing_fails_a_polling_call() {
    let (client, _server) = start();
    let client = client.with_busy_poll(LONG_WINDOW);
    let closer = client.clone();
    let call = tokio::spawn(async move {
        client
            .call(SVC, "Sleep", sleep_payload(30_000, b""), None)
            .await
    });
    tokio::task::yield_now().await;
    closer.close();
    let err = within(call).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Closed), "{err:?}");
}

#[test]
fn the_window_is_kept_by_clones_and_off_by_default() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, _server) = start();
        assert_eq!(client.busy_poll(), Duration::ZERO);
        let polling = client.with_busy_poll(Duration::from_micros(70));
        assert_eq!(polling.clone().busy_poll(), Duration::from_micros(70));
    });
}
