//! Reload with nri-stub plugins that reconnect: prepare, then swap; a
//! configuration that cannot be prepared keeps the old instance; one that
//! fails to start brings the old configuration back.

mod support;

use std::time::Duration;

use nri_api::ContainerState::ContainerRunning;
use nri_integration::{Config, Error, Nri};
use support::*;

#[tokio::test]
async fn reload_swaps_to_a_new_instance_and_plugins_reconnect() {
    let env = Env::new();
    let domain = TestDomain::new("ns").with("pod0", &[("ctr0", ContainerRunning)]);
    let nri = env.start(&[domain]).await;
    let log = Log::default();
    let _p = run_reconnecting(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    assert_eq!(log.take(), ["Synchronize pods=[pod0] containers=[ctr0]"]);

    let new = Config {
        request_timeout: Duration::from_secs(7),
        ..env.config()
    };
    bounded(nri.reload(new.clone())).await.unwrap();
    assert_eq!(nri.config(), new);
    assert!(nri.is_running());
    // The old instance shut its plugins down; they reconnect to the new one
    // and synchronize again.
    eventually("plugin synchronized with the new instance", || {
        log.has("Synchronize pods=[pod0] containers=[ctr0]")
    })
    .await;
    wait_plugins(&nri, &["10-recorder"]).await;
    assert_eq!(log.get()[0], "Shutdown");

    // Lifecycle calls reach the plugin through the new instance, and the
    // state learnt from the new synchronization still holds.
    let p0 = pod("pod0");
    bounded(nri.remove_container(&p0, &container("ctr0", "pod0")))
        .await
        .unwrap();
    assert!(log.has("StopContainer ctr0"));
    assert!(log.has("RemoveContainer ctr0"));
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn a_configuration_that_cannot_be_prepared_keeps_the_old_instance() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let _p = run_reconnecting(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;
    log.take();

    let file = env.dir.path().join("not-a-directory");
    std::fs::write(&file, b"x").unwrap();
    let old = nri.config();
    for bad in [
        Config {
            plugin_path: file.clone(),
            ..env.config()
        },
        Config {
            socket_path: env.dir.path().join("s".repeat(200)),
            ..env.config()
        },
    ] {
        let err = bounded(nri.reload(bad)).await.unwrap_err();
        assert!(matches!(err, Error::ReloadPrepare(_)), "{err}");
    }
    assert_eq!(nri.config(), old);
    assert!(nri.is_running());
    // The plugin was never disconnected and still receives events.
    bounded(nri.run_pod_sandbox(&pod("pod0"))).await.unwrap();
    assert_eq!(log.get(), ["RunPodSandbox pod0"]);
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn a_configuration_that_fails_to_start_restores_the_old_one() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let _p = run_reconnecting(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;

    // The socket's parent is a file: only binding the socket finds out.
    let file = env.dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let old = nri.config();
    let err = bounded(nri.reload(Config {
        socket_path: file.join("nri.sock"),
        ..env.config()
    }))
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::ReloadStart { restored: true, .. }),
        "{err}"
    );
    assert_eq!(nri.config(), old);
    assert!(nri.is_running());
    eventually("plugin back on the restored instance", || {
        log.count("Synchronize pods=[] containers=[]") >= 2
    })
    .await;
    wait_plugins(&nri, &["10-recorder"]).await;
    bounded(nri.run_pod_sandbox(&pod("pod0"))).await.unwrap();
    assert!(log.has("RunPodSandbox pod0"));
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn reload_disables_and_enables_nri() {
    let env = Env::new();
    let nri = env.start(&[TestDomain::new("ns")]).await;
    let log = Log::default();
    let _p = run_reconnecting(Recorder::new(&log), "recorder", "10", &env.socket());
    wait_plugins(&nri, &["10-recorder"]).await;

    bounded(nri.reload(Config {
        enable: false,
        ..env.config()
    }))
    .await
    .unwrap();
    assert!(!nri.is_enabled() && !nri.is_running());
    assert!(!env.socket().exists());
    bounded(nri.run_pod_sandbox(&pod("ignored"))).await.unwrap();

    bounded(nri.reload(env.config())).await.unwrap();
    assert!(nri.is_running());
    wait_plugins(&nri, &["10-recorder"]).await;
    bounded(nri.run_pod_sandbox(&pod("pod1"))).await.unwrap();
    assert!(log.has("RunPodSandbox pod1"));
    assert!(!log.has("RunPodSandbox ignored"));
    bounded(nri.stop()).await;
}

#[tokio::test]
async fn reload_before_start_only_changes_the_configuration() {
    let env = Env::new();
    let nri = Nri::new(Config::disabled());
    bounded(nri.reload(env.config())).await.unwrap();
    assert!(nri.is_enabled());
    assert!(!nri.is_running());
    assert!(!env.socket().exists());
    bounded(nri.start()).await.unwrap();
    assert!(nri.is_running());
    assert!(env.socket().exists());
    bounded(nri.stop()).await;
    assert!(!nri.is_running());
}
