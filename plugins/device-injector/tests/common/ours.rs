//! Running the plugin binary against our runtime adaptation (`nri-adaptation`),
//! as an external plugin on a socket in a temporary directory.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_stub::api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};

use super::{spawn_env, Killed, TIMEOUT};

/// A runtime with no pods or containers that accepts every update.
struct EmptyRuntime;

#[nri_adaptation::async_trait]
impl RuntimeHooks for EmptyRuntime {
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

/// Our adaptation with the plugin `bin` connected; dropped plugin is killed.
pub struct OurRuntime {
    pub nri: Adaptation,
    pub plugin: Killed,
}

impl OurRuntime {
    /// Starts the adaptation in `dir`, then the plugin with `args(socket)`, and
    /// waits until the plugin is registered and synchronized.
    pub async fn start(
        dir: &Path,
        bin: &Path,
        args: impl FnOnce(&Path) -> Vec<OsString>,
        env: &[(&str, &Path)],
    ) -> OurRuntime {
        let socket = dir.join("our-nri.sock");
        let nri = Adaptation::builder("nri-rs-test", "v0.0.1", Arc::new(EmptyRuntime))
            .plugin_path(dir.join("no-plugins"))
            .plugin_config_path(dir.join("no-conf"))
            .socket_path(&socket)
            .request_timeout(Duration::from_secs(10))
            .build();
        tokio::time::timeout(TIMEOUT, nri.start())
            .await
            .unwrap()
            .unwrap();
        let plugin = spawn_env(bin, &args(&socket), env, dir, "our-plugin");
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while nri.plugins().is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "plugin did not register: {}",
                plugin.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        OurRuntime { nri, plugin }
    }

    /// The registered plugins as `NN-name`.
    pub fn plugin_names(&self) -> Vec<String> {
        self.nri
            .plugins()
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect()
    }

    /// Stops the adaptation and returns the plugin's standard error.
    pub async fn stop(self) -> String {
        tokio::time::timeout(TIMEOUT, self.nri.stop())
            .await
            .unwrap();
        self.plugin.stderr()
    }
}

/// A pod with these annotations.
pub fn pod(id: &str, annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: format!("{id}-name"),
        namespace: "default".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// A container of `pod` named `name`.
pub fn container(pod: &str, name: &str, args: &[&str]) -> Container {
    Container {
        id: name.into(),
        pod_sandbox_id: pod.into(),
        name: name.into(),
        state: 1,
        args: args.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}
