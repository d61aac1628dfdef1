//! Replays the script: each step is what a runtime does for that request,
//! with the NRI call at the point a real runtime makes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_api::{ContainerAdjustment, ContainerState, ContainerUpdate, LinuxResources, PodSandbox};
use nri_integration::{FailedUpdates, Nri};
use nri_oci::Generator;
use serde_json::Value;

use crate::script::{CreateSpec, PodSpec, Resources, Step};
use crate::spec::{default_spec, new_container, refresh_from_spec};
use crate::store::{Store, StoreError};

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// NRI refused or failed (a plugin error, a conflict, a rejection).
    #[error(transparent)]
    Nri(#[from] nri_integration::Error),
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A wait ran out of time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}

/// The runtime: NRI plus the store.
pub struct Runner {
    nri: Nri,
    store: Arc<Store>,
}

impl Runner {
    /// A runner for a started (or disabled) `nri` whose domain is `store`.
    pub fn new(nri: Nri, store: Arc<Store>) -> Runner {
        Runner { nri, store }
    }

    /// Runs every step, printing one line each; returns how many failed.
    pub async fn run(&self, steps: &[Step]) -> usize {
        let mut failed = 0;
        for step in steps {
            let label = label(step);
            match self.step(step).await {
                Ok(summary) => println!("{label}: {summary}"),
                Err(e) => {
                    failed += 1;
                    println!("{label}: FAILED: {e}");
                }
            }
            self.finish_evictions().await;
        }
        failed
    }

    async fn step(&self, step: &Step) -> Result<String, StepError> {
        match step {
            Step::WaitPlugins(n, timeout) => self.wait_plugins(*n, *timeout).await,
            Step::WaitUpdates(n, timeout) => {
                if self.store.wait_updates(*n, *timeout).await {
                    Ok(format!("{n} plugin updates applied"))
                } else {
                    Err(StepError::Timeout(*timeout))
                }
            }
            Step::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Ok("slept".into())
            }
            // Lifecycle events: plugins that connect meanwhile synchronize
            // either before or after the whole step, never in the middle.
            other => {
                let _block = self.nri.block_plugin_sync().await;
                self.lifecycle(other).await
            }
        }
    }

    async fn lifecycle(&self, step: &Step) -> Result<String, StepError> {
        match step {
            Step::Pod(p) => self.run_pod(p).await,
            Step::Create(c) => self.create(c).await,
            Step::Start(id) => {
                let (pod, _) = self.store.container(id)?;
                let ctr = self.store.set_state(id, ContainerState::ContainerRunning)?;
                self.nri.start_container(&pod, &ctr).await?;
                self.nri.post_start_container(&pod, &ctr).await?;
                Ok("running".into())
            }
            Step::Update(id, res) => self.update(id, res).await,
            Step::Stop(id) => {
                let (pod, _) = self.store.container(id)?;
                let ctr = self.store.set_state(id, ContainerState::ContainerStopped)?;
                let failed = self.nri.stop_container(&pod, &ctr).await?;
                Ok(format!("stopped{}", failures(&failed)))
            }
            Step::Exit(id) => {
                let (pod, _) = self.store.container(id)?;
                let ctr = self.store.set_state(id, ContainerState::ContainerStopped)?;
                self.nri.notify_container_exit(pod, ctr);
                Ok("exited (plugins are told in the background)".into())
            }
            Step::Remove(id) => {
                let (pod, ctr) = self.store.container(id)?;
                self.nri.remove_container(&pod, &ctr).await?;
                self.store.remove_container(id)?;
                Ok("removed".into())
            }
            Step::StopPod(id) => {
                let pod = self.store.pod(id)?;
                self.nri.stop_pod_sandbox(&pod).await?;
                Ok("stopped".into())
            }
            Step::RemovePod(id) => {
                let pod = self.store.remove_pod(id)?;
                self.nri.remove_pod_sandbox(&pod).await?;
                Ok("removed".into())
            }
            Step::WaitPlugins(..) | Step::WaitUpdates(..) | Step::Sleep(_) => {
                Ok("not a lifecycle step".into())
            }
        }
    }

    async fn wait_plugins(&self, n: usize, timeout: Duration) -> Result<String, StepError> {
        let start = Instant::now();
        loop {
            let plugins = self.nri.plugins();
            if plugins.len() >= n {
                let names: Vec<String> = plugins
                    .iter()
                    .map(|p| format!("{}-{}", p.index, p.name))
                    .collect();
                return Ok(format!("plugins {}", names.join(", ")));
            }
            if start.elapsed() >= timeout {
                return Err(StepError::Timeout(timeout));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn run_pod(&self, p: &PodSpec) -> Result<String, StepError> {
        let pod = PodSandbox {
            id: p.id.clone(),
            name: p.id.clone(),
            uid: format!("uid-{}", p.id),
            namespace: "default".into(),
            labels: p.labels.clone(),
            annotations: p.annotations.clone(),
            ..PodSandbox::default()
        };
        if self.store.pod(&p.id).is_ok() {
            return Err(StoreError::Exists(p.id.clone()).into());
        }
        self.nri.run_pod_sandbox(&pod).await?;
        self.store.add_pod(pod)?;
        Ok("running".into())
    }

    /// CreateContainer: plugins adjust the new container; the adjustment
    /// is applied to its spec with nri-oci and the spec written. If that
    /// fails, plugins are told the container is gone again.
    async fn create(&self, c: &CreateSpec) -> Result<String, StepError> {
        let pod = self.store.pod(&c.pod)?;
        if self.store.has_container_id(&c.id) {
            return Err(StoreError::Exists(c.id.clone()).into());
        }
        let mut spec = default_spec(c);
        let mut ctr = new_container(c, &spec);
        let result = async {
            let created = self.nri.create_container(&pod, &ctr).await?;
            let adjust = created.adjust.unwrap_or_default();
            Generator::new(&mut spec)
                .adjust(&adjust)
                .map_err(|source| StoreError::Adjust {
                    id: c.id.clone(),
                    source,
                })?;
            refresh_from_spec(&mut ctr, &spec);
            let path = self.store.add_container(ctr.clone(), spec)?;
            Ok::<_, StepError>(format!(
                "created, adjusted {}{} -> {}",
                describe(&adjust),
                failures(&created.failed),
                path.display()
            ))
        }
        .await;
        match result {
            Ok(summary) => {
                self.nri.post_create_container(&pod, &ctr).await?;
                Ok(summary)
            }
            Err(e) => {
                if let Err(undo) = self.nri.undo_create_container(&pod, &ctr).await {
                    tracing::warn!(container = %c.id, error = %undo, "undoing the creation failed");
                }
                Err(e)
            }
        }
    }

    /// UpdateContainer: plugins may change the requested resources; the
    /// result is merged into the spec.
    async fn update(&self, id: &str, res: &Resources) -> Result<String, StepError> {
        let (pod, ctr) = self.store.container(id)?;
        let requested = linux_resources(id, res);
        let outcome = self
            .nri
            .update_container(&pod, &ctr, Some(&requested))
            .await?;
        let resources = outcome.resources.unwrap_or(requested);
        let path = self.store.update_resources(id, &resources)?;
        self.nri.post_update_container(&pod, &ctr).await?;
        let by = if outcome.adjusted {
            "as plugins adjusted them"
        } else {
            "as requested"
        };
        Ok(format!(
            "resources updated {by}{} -> {}",
            failures(&outcome.failed),
            path.display()
        ))
    }

    /// Tells NRI about containers plugins evicted (their stop and removal)
    /// and deletes their state.
    async fn finish_evictions(&self) {
        for e in self.store.take_evicted() {
            let id = &e.ctr.id;
            if let Err(err) = self.nri.remove_container(&e.pod, &e.ctr).await {
                tracing::warn!(container = %id, error = %err, "NRI removal of an evicted container failed");
            }
            if let Err(err) = self.store.remove_state(id) {
                tracing::warn!(container = %id, error = %err, "cannot remove the state of an evicted container");
            }
            println!("evict {id}: stopped and removed");
        }
    }
}

/// The step as printed: command and its first operand.
fn label(step: &Step) -> String {
    match step {
        Step::WaitPlugins(n, _) => format!("wait-plugins {n}"),
        Step::WaitUpdates(n, _) => format!("wait-updates {n}"),
        Step::Sleep(d) => format!("sleep {}", d.as_millis()),
        Step::Pod(p) => format!("pod {}", p.id),
        Step::Create(c) => format!("create {}", c.id),
        Step::Start(id) => format!("start {id}"),
        Step::Update(id, _) => format!("update {id}"),
        Step::Stop(id) => format!("stop {id}"),
        Step::Exit(id) => format!("exit {id}"),
        Step::Remove(id) => format!("remove {id}"),
        Step::StopPod(id) => format!("stop-pod {id}"),
        Step::RemovePod(id) => format!("remove-pod {id}"),
    }
}

fn linux_resources(id: &str, r: &Resources) -> LinuxResources {
    let mut u = ContainerUpdate::for_container(id);
    if let Some(v) = r.cpu_shares {
        u.set_linux_cpu_shares(v);
    }
    if let Some(v) = r.cpu_quota {
        u.set_linux_cpu_quota(v);
    }
    if let Some(v) = r.cpu_period {
        u.set_linux_cpu_period(v);
    }
    if let Some(v) = r.memory_limit {
        u.set_linux_memory_limit(v);
    }
    if let Some(v) = r.pids_limit {
        u.set_linux_pid_limits(v);
    }
    u.linux_resources_mut().clone()
}

/// What an adjustment touches, e.g. `annotations=2 env=1 linux mounts=1`:
/// its non-empty members (the merged adjustment may hold empty parts),
/// lists and the annotation map with their length.
fn describe(a: &ContainerAdjustment) -> String {
    let mut json = serde_json::to_value(a).unwrap_or_default();
    prune(&mut json);
    let mut parts: Vec<String> = match &json {
        Value::Object(members) => members
            .iter()
            .map(|(name, v)| match v {
                Value::Array(items) => format!("{name}={}", items.len()),
                Value::Object(map) if name == "annotations" => format!("{name}={}", map.len()),
                _ => name.clone(),
            })
            .collect(),
        _ => Vec::new(),
    };
    parts.sort();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(" ")
    }
}

/// Drops nulls, empty objects and empty lists, depth first; true if `v`
/// itself is empty then.
fn prune(v: &mut Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(map) => {
            map.retain(|_, child| !prune(child));
            map.is_empty()
        }
        Value::Array(items) => {
            items.retain_mut(|child| !prune(child));
            items.is_empty()
        }
        _ => false,
    }
}

fn failures(f: &FailedUpdates) -> String {
    if f.is_empty() {
        String::new()
    } else {
        format!(
            " ({} plugin updates and {} evictions failed)",
            f.updates.len(),
            f.evictions.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{Hooks, LinuxContainerAdjustment, Mount};

    #[test]
    fn describes_adjustments() {
        assert_eq!(describe(&ContainerAdjustment::default()), "nothing");
        let mut empty_parts = ContainerAdjustment {
            hooks: Some(Hooks::default()),
            linux: Some(LinuxContainerAdjustment::default()),
            ..ContainerAdjustment::default()
        };
        empty_parts.linux_resources_mut().cpu = Some(Default::default());
        assert_eq!(describe(&empty_parts), "nothing");
        let mut a = ContainerAdjustment::default();
        a.add_annotation("a", "b")
            .add_env("X", "1")
            .set_linux_memory_limit(1 << 20);
        a.add_mount(Mount {
            destination: "/data".into(),
            ..Mount::default()
        });
        assert_eq!(describe(&a), "annotations=1 env=1 linux mounts=1");
    }

    #[test]
    fn converts_requested_resources() {
        let r = linux_resources(
            "c0",
            &Resources {
                cpu_shares: Some(512),
                pids_limit: Some(10),
                ..Resources::default()
            },
        );
        let cpu = r.cpu.unwrap();
        assert_eq!(cpu.shares.map(|s| s.value), Some(512));
        assert!(cpu.quota.is_none());
        assert!(r.memory.is_none());
        assert_eq!(r.pids.unwrap().limit, 10);
    }
}
