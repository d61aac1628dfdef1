//! Connection handling: registration failures, the runtime going away, running again,
//! and dialling the runtime's socket.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nri_api::service::plugin as method;
use nri_api::*;
use nri_stub::{Context, Error, Plugin, Stub};
use support::*;

/// create_container never returns; counts its calls.
#[derive(Default, Clone)]
struct Stuck {
    calls: Arc<AtomicUsize>,
}

#[nri_stub::plugin]
impl Plugin for Stuck {
    async fn create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<nri_stub::CreateContainerResult> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// A `Stuck` stub, `07-stuck`, on the given connection.
fn stuck_on(plugin_end: tokio::net::UnixStream) -> Stub {
    Stub::builder(Stuck::default())
        .name("stuck")
        .index("07")
        .connection(plugin_end)
        .build()
        .unwrap()
}

#[tokio::test]
async fn runtime_disappearing_mid_call_ends_run_with_disconnected() {
    let plugin = Stuck::default();
    let closes = Arc::new(AtomicUsize::new(0));
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = Stub::builder(plugin.clone())
        .name("stuck")
        .index("07")
        .connection(plugin_end)
        .on_close({
            let closes = Arc::clone(&closes);
            move || {
                closes.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let run = tokio::spawn(async move { stub.run().await });
    rt.registration().await;
    rt.configure().await.unwrap();

    let rt = Arc::new(rt);
    let call = tokio::spawn({
        let rt = Arc::clone(&rt);
        async move {
            rt.call::<_, CreateContainerResponse>(
                method::CREATE_CONTAINER,
                &CreateContainerRequest {
                    pod: Some(pod("p")),
                    container: Some(container("c", "p")),
                },
            )
            .await
        }
    });
    // Wait until the handler is running, then drop the connection.
    while plugin.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    rt.disappear();

    let outcome = tokio::time::timeout(WAIT, run)
        .await
        .expect("run did not end")
        .unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected)), "{outcome:?}");
    assert_eq!(
        outcome.unwrap_err().to_string(),
        "connection to the runtime was lost (it stopped, restarted or dropped the plugin)"
    );
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    assert!(call.await.unwrap().is_err());
}

#[tokio::test]
async fn runtime_disappearing_before_configure_is_disconnected() {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = stuck_on(plugin_end);
    let run = tokio::spawn(async move { stub.run().await });
    rt.registration().await;
    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected)), "{outcome:?}");
}

#[tokio::test]
async fn refused_registration_fails_the_run() {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Refuse);
    let stub = stuck_on(plugin_end);
    let run = tokio::spawn(async move { stub.run().await });
    rt.registration().await;
    let err = tokio::time::timeout(WAIT, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Register(_)));
    assert_eq!(
        err.to_string(),
        "failed to register with NRI/Runtime: rpc error: code = InvalidArgument desc = invalid \
         plugin name: nope (the runtime refused the plugin's name or index, or did not answer \
         within the registration timeout)"
    );
}

#[tokio::test]
async fn given_connection_serves_one_run_only() {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = Arc::new(stuck_on(plugin_end));
    let run = tokio::spawn({
        let stub = Arc::clone(&stub);
        async move { stub.run().await }
    });
    rt.registration().await;
    // A second, concurrent run is refused.
    assert!(matches!(stub.run().await, Err(Error::AlreadyRunning)));
    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected)));
    // The given connection is gone; the stub says so instead of dialling.
    assert!(matches!(stub.run().await, Err(Error::ConnectionUsed)));
}

#[tokio::test]
async fn reconnecting_run_on_a_given_connection_ends_when_it_is_lost() {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = stuck_on(plugin_end);
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    let run = tokio::spawn(async move {
        stub.run_reconnecting(nri_stub::Backoff::default(), move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .await
    });
    rt.registration().await;
    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(matches!(outcome, Err(Error::Disconnected)), "{outcome:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reconnects_through_the_socket_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nri.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let stub = Arc::new(
        Stub::builder(Stuck::default())
            .name("stuck")
            .index("07")
            .socket_path(&path)
            .build()
            .unwrap(),
    );

    for round in 0..2 {
        let run = tokio::spawn({
            let stub = Arc::clone(&stub);
            async move { stub.run().await }
        });
        let (conn, _) = tokio::time::timeout(WAIT, listener.accept())
            .await
            .unwrap()
            .unwrap();
        let mut rt = FakeRuntime::new(conn, Registration::Accept);
        let reg = rt.registration().await;
        assert_eq!(
            (reg.plugin_idx.as_str(), reg.plugin_name.as_str()),
            ("07", "stuck"),
            "round {round}"
        );
        assert_eq!(rt.configure().await.unwrap().events, 0x8, "round {round}");
        rt.disappear();
        let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
        assert!(
            matches!(outcome, Err(Error::Disconnected)),
            "round {round}: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn missing_socket_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let stub = Stub::builder(Stuck::default())
        .name("stuck")
        .index("07")
        .socket_path(dir.path().join("absent.sock"))
        .build()
        .unwrap();
    let err = stub.run().await.unwrap_err();
    let socket = dir.path().join("absent.sock");
    assert!(matches!(&err, Error::Connect { socket: s, .. } if *s == socket));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot connect to the NRI socket {}: ",
            socket.display()
        )),
        "{text}"
    );
    // What a `main` returning this error prints is as readable.
    assert_eq!(format!("{err:?}"), text);
    assert!(format!("{err:#?}").starts_with("Connect {"));
}
