//! A plugin launched by the runtime: socket, name and index come from the environment.
//! Alone in its test binary because it sets process environment variables.

mod support;

use std::os::fd::IntoRawFd;

use nri_api::*;
use nri_stub::{Context, Plugin, Stub};
use support::*;

struct Launched;

/// The name the plugin's `configure` saw in its context.
static SEEN_NAME: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

#[nri_stub::plugin]
impl Plugin for Launched {
    async fn configure(
        &self,
        ctx: &Context,
        _: &nri_stub::ConfigureInfo,
    ) -> nri_stub::HandlerResult<nri_stub::EventMask> {
        *SEEN_NAME.lock().unwrap() = ctx.name().to_string();
        Ok(nri_stub::EventMask::EMPTY)
    }

    async fn run_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
}

#[tokio::test]
async fn socket_name_and_index_from_environment() {
    let (plugin_end, runtime_end) = std::os::unix::net::UnixStream::pair().unwrap();
    let fd = plugin_end.into_raw_fd();
    std::env::set_var("NRI_PLUGIN_SOCKET", fd.to_string());
    std::env::set_var("NRI_PLUGIN_NAME", "launched");
    std::env::set_var("NRI_PLUGIN_IDX", "33");

    runtime_end.set_nonblocking(true).unwrap();
    let runtime_end = tokio::net::UnixStream::from_std(runtime_end).unwrap();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);

    // What the runtime that launched the plugin says wins over the plugin's own
    // choice, so that the plugin and the runtime agree on its name.
    let stub = Stub::builder(Launched)
        .name("mine")
        .index("10")
        .build()
        .unwrap();
    assert_eq!(stub.name(), "33-launched");
    let stub = std::sync::Arc::new(stub);
    let run = tokio::spawn({
        let stub = stub.clone();
        async move { stub.run().await }
    });
    let reg = rt.registration().await;
    assert_eq!(
        (reg.plugin_idx.as_str(), reg.plugin_name.as_str()),
        ("33", "launched")
    );
    assert_eq!(rt.configure().await.unwrap().events, 0x1);
    assert_eq!(*SEEN_NAME.lock().unwrap(), "33-launched");
    rt.disappear();
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    assert!(matches!(outcome, Err(nri_stub::Error::Disconnected)));

    // The handed-over socket is not taken twice (its number may be reused by now).
    assert!(matches!(
        stub.run().await,
        Err(nri_stub::Error::ConnectionUsed)
    ));

    // Without the runtime's word, the builder's options are used.
    std::env::remove_var("NRI_PLUGIN_NAME");
    std::env::remove_var("NRI_PLUGIN_IDX");
    let stub = Stub::builder(Launched)
        .name("mine")
        .index("10")
        .build()
        .unwrap();
    assert_eq!(stub.name(), "10-mine");
}
