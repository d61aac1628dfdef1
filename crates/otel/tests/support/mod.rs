//! What the tests share: a runtime with one pod and one container, and a
//! bound on every wait.

#![allow(dead_code)]

use std::time::Duration;

use nri_adaptation::{BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;

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

    async fn update_containers(
        &self,
        _plugin: &str,
        _updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        Ok(Vec::new())
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
