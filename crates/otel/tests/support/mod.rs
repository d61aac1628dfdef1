//! What the tests share: a runtime with one pod and one container, and a
//! bound on every wait.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;
use tokio::task::JoinHandle;

/// The longest a test waits for anything.
pub const WAIT: Duration = Duration::from_secs(20);

/// A runtime with one pod and one container.
pub struct Runtime;

#[nri_adaptation::async_trait]
impl RuntimeHooks for Runtime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        sync.synchronize(&[pod("pod0")], &[ctr("ctr0")]).await?;
        Ok(())
    }
}

pub fn pod(id: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        ..Default::default()
    }
}

pub fn ctr(id: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "pod0".into(),
        name: id.into(),
        ..Default::default()
    }
}

/// A started runtime with its socket in `dir`, and `plugin` (as
/// `10-NAME`) connected to it and registered.
pub async fn runtime_with_plugin<P: nri_stub::Plugin>(
    dir: &Path,
    plugin: P,
    name: &str,
) -> (Adaptation, JoinHandle<Result<(), nri_stub::Error>>) {
    let socket = dir.join("nri.sock");
    let nri = Adaptation::builder("test-runtime", "v1", Arc::new(Runtime))
        .plugin_path(dir.join("plugins"))
        .plugin_config_path(dir.join("conf.d"))
        .socket_path(&socket)
        .build();
    tokio::time::timeout(WAIT, nri.start())
        .await
        .expect("runtime started in time")
        .expect("runtime started");
    let stub = nri_stub::Stub::builder(plugin)
        .name(name)
        .index("10")
        .socket_path(&socket)
        .build()
        .expect("stub");
    let task = tokio::spawn(async move { stub.run().await });
    tokio::time::timeout(WAIT, async {
        while nri.plugins().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("plugin registered");
    (nri, task)
}
