//! Runs the plugin binary as an external plugin of our runtime side (`nri-adaptation`),
//! listening on a socket in a temporary directory.
#![allow(dead_code)] // each test file uses a different subset

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_stub::api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};

use super::PluginProcess;

/// A runtime with no pods or containers that accepts every update.
struct NoState;

#[nri_adaptation::async_trait]
impl RuntimeHooks for NoState {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        sync.synchronize(&[], &[]).await?;
        Ok(())
    }

    async fn update_containers(
        &self,
        _plugin: &str,
        _updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(Vec::new())
    }
}

/// Starts our adaptation on `dir/nri.sock`.
pub async fn start_adaptation(dir: &Path) -> Adaptation {
    let nri = Adaptation::builder("nri-rs-test", "v0.1.0", Arc::new(NoState))
        .plugin_path(dir.join("plugins"))
        .plugin_config_path(dir.join("conf.d"))
        .socket_path(dir.join("nri.sock"))
        .build();
    tokio::time::timeout(super::TIMEOUT, nri.start())
        .await
        .expect("adaptation start timed out")
        .expect("adaptation start");
    nri
}

/// Waits until the adaptation lists the plugins `names` (`NN-name`, in order).
pub async fn wait_plugins(nri: &Adaptation, names: &[&str], plugin: &PluginProcess) {
    let start = std::time::Instant::now();
    loop {
        let have: Vec<String> = nri
            .plugins()
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect();
        if have == names {
            return;
        }
        assert!(
            start.elapsed() < super::TIMEOUT,
            "plugins {have:?}, expected {names:?}; plugin log:\n{}",
            plugin.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts our adaptation in `dir` and the plugin `bin` (with `-socket` added to
/// `args`), and waits until it registered as `full_name`.
pub async fn run_with_our_runtime(
    dir: &Path,
    bin: &str,
    args: &[&str],
    full_name: &str,
) -> (Adaptation, PluginProcess) {
    let nri = start_adaptation(dir).await;
    let socket = dir.join("nri.sock");
    let mut all_args = vec!["-socket", socket.to_str().unwrap()];
    all_args.extend_from_slice(args);
    let plugin = PluginProcess::spawn(bin, &all_args, dir, "plugin");
    wait_plugins(&nri, &[full_name], &plugin).await;
    (nri, plugin)
}

/// A pod with these annotations.
pub fn pod(id: &str, name: &str, annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: name.into(),
        uid: format!("uid-{id}"),
        namespace: "default".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// A container of `pod`.
pub fn container(id: &str, pod: &PodSandbox) -> Container {
    Container {
        id: id.into(),
        name: id.into(),
        pod_sandbox_id: pod.id.clone(),
        ..Default::default()
    }
}
