//! Sample plugins connect again when the runtime goes away, unless told not to.

use std::process::ExitCode;
use std::time::Duration;

use nri_plugin_util::{try_parse_args_from, CommonArgs, PluginArgs, PluginInfo};
use nri_stub::api::PodSandbox;
use nri_stub::{Context, Plugin, Stub};
use tokio::net::UnixListener;

const WAIT: Duration = Duration::from_secs(10);

const INFO: PluginInfo = PluginInfo {
    program: "nri-test",
    about: "Tests reconnecting",
    name: "tester",
    index: "42",
    annotations: &[],
};

struct Quiet;

#[nri_stub::plugin]
impl Plugin for Quiet {
    async fn run_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
}

fn common(socket: &std::path::Path, extra: &[&str]) -> CommonArgs {
    let socket = socket.to_str().expect("temporary path is UTF-8");
    let argv = ["nri-test", "-socket-path", socket]
        .into_iter()
        .chain(extra.iter().copied());
    try_parse_args_from::<PluginArgs, _, _>(&INFO, argv)
        .expect("valid flags")
        .common
}

/// Accepts one connection and closes it at once: a runtime that goes away.
async fn accept_and_drop(listener: &UnixListener) {
    let (conn, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the plugin did not connect in time")
        .expect("accept");
    drop(conn);
}

#[tokio::test]
async fn by_default_the_plugin_connects_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let args = common(&path, &[]);
    let served = tokio::spawn(async move { args.serve(Stub::builder(Quiet), &INFO).await });
    for _ in 0..3 {
        accept_and_drop(&listener).await;
    }
    assert!(!served.is_finished(), "the plugin gave up");
    served.abort();
}

#[tokio::test]
async fn no_reconnect_and_reconnect_false_end_the_plugin() {
    for flag in ["-no-reconnect", "-reconnect=false"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nri.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let args = common(&path, &[flag]);
        let served = tokio::spawn(async move { args.serve(Stub::builder(Quiet), &INFO).await });
        accept_and_drop(&listener).await;
        let code = tokio::time::timeout(WAIT, served)
            .await
            .expect("the plugin did not exit")
            .unwrap();
        assert_eq!(code, ExitCode::FAILURE, "{flag}");
    }
}
