//! The plugin binary on our runtime adaptation (`nri-adaptation`), with hook
//! directories watched for changes: a hook file added while the plugin runs is
//! injected into the next container.

mod common;

use std::path::Path;
use std::time::Duration;

use common::args;
use common::ours::{container, pod, OurRuntime};
use nri_stub::api::{CreateContainerRequest, Hook, Hooks};

const BIN: &str = env!("CARGO_BIN_EXE_nri-hook-injector");

#[tokio::test(flavor = "current_thread")]
async fn hooks_on_our_adaptation_follow_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    // Created by the plugin, as watching is on.
    let hooks_dir = dir.path().join("hooks.d");
    let rt = OurRuntime::start(
        dir.path(),
        Path::new(BIN),
        |socket| {
            args(
                socket,
                &[&"-hooks-dir", &hooks_dir, &"-watch-interval", &"50ms"],
            )
        },
        &[],
    )
    .await;
    assert_eq!(rt.plugin_names(), ["30-hook-injector"]);
    assert!(hooks_dir.is_dir());

    let pod = pod("pod0", &[]);
    let create = || CreateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container("pod0", "bb", &["busybox", "sh"])),
    };
    let before = rt.nri.create_container(create()).await.unwrap();
    let before = before.adjust.and_then(|a| a.hooks).unwrap_or_default();
    assert_eq!(before, Hooks::default(), "no hooks yet");

    std::fs::write(
        hooks_dir.join("busybox.json"),
        r#"{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["sh", "-c", "true"]},
            "when": {"commands": ["busybox"]}, "stages": ["prestart"]}"#,
    )
    .unwrap();
    let expected = Hook {
        path: "/bin/sh".into(),
        args: vec!["sh".into(), "-c".into(), "true".into()],
        ..Default::default()
    };
    // The plugin reloads within a poll period; wait for it, bounded.
    let mut hooks = None;
    for _ in 0..500 {
        let reply = rt.nri.create_container(create()).await.unwrap();
        hooks = reply
            .adjust
            .and_then(|a| a.hooks)
            .filter(|h| *h != Hooks::default());
        if hooks.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hooks = hooks.expect("the new hook file was not picked up");
    assert_eq!(hooks.create_runtime, [expected]);
    assert!(hooks.poststop.is_empty());
    rt.stop().await;
}
