//! A plugin that implements every handler and records what it was called with.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use nri_api::*;
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, Plugin};

use super::FAILING_CONTAINER;

#[derive(Default, Clone)]
pub struct Recorder {
    pub calls: Arc<Mutex<Vec<String>>>,
    pub configured: Arc<Mutex<Option<(String, ConfigureInfo)>>>,
    /// Mask returned from configure.
    pub subscribe: EventMask,
}

impl Recorder {
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

fn res(r: Option<&LinuxResources>) -> String {
    r.and_then(|r| r.cpu.as_ref())
        .and_then(|c| c.shares.as_ref())
        .map(|s| s.value.to_string())
        .unwrap_or_else(|| "-".into())
}

#[nri_stub::plugin]
impl Plugin for Recorder {
    async fn configure(
        &self,
        ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        *self.configured.lock().unwrap() = Some((ctx.name().to_string(), info.clone()));
        Ok(self.subscribe)
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.record(super::synchronize_call(pods, containers));
        Ok(vec![ContainerUpdate::for_container("synced")])
    }

    async fn shutdown(&self, _ctx: &Context) {
        self.record("shutdown".into());
    }

    async fn run_pod_sandbox(&self, _: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.record(format!("run_pod_sandbox {}", pod.id));
        if pod.id == "fail" {
            return Err("pod fail refused".into());
        }
        Ok(())
    }

    async fn update_pod_sandbox(
        &self,
        _: &Context,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!(
            "update_pod_sandbox {} overhead={} resources={}",
            pod.id,
            res(overhead),
            res(resources)
        ));
        Ok(())
    }

    async fn post_update_pod_sandbox(
        &self,
        _: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("post_update_pod_sandbox {}", pod.id));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _: &Context, pod: &PodSandbox) -> nri_stub::HandlerResult<()> {
        self.record(format!("stop_pod_sandbox {}", pod.id));
        Ok(())
    }

    async fn remove_pod_sandbox(
        &self,
        _: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("remove_pod_sandbox {}", pod.id));
        Ok(())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.record(format!("create_container {}/{}", pod.id, ctr.id));
        // An unsolicited update from inside a handler.
        let failed = ctx
            .update_containers(
                vec![
                    ContainerUpdate::for_container("ctr-ok"),
                    ContainerUpdate::for_container(FAILING_CONTAINER),
                ],
                vec![ContainerEviction {
                    container_id: "ctr-evicted".into(),
                    reason: "testing".into(),
                }],
            )
            .await?;
        let failed: Vec<_> = failed.iter().map(|u| u.container_id.as_str()).collect();
        self.record(format!("update_containers failed={}", failed.join(",")));

        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("recorder", ctr.id.clone());
        Ok(CreateContainerResult::adjust(adjust)
            .with_updates([ContainerUpdate::for_container("other")])
            .with_evictions([ContainerEviction {
                container_id: "victim".into(),
                reason: "room".into(),
            }]))
    }

    async fn post_create_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("post_create_container {}/{}", pod.id, ctr.id));
        Ok(())
    }

    async fn start_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("start_container {}/{}", pod.id, ctr.id));
        Ok(())
    }

    async fn post_start_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("post_start_container {}/{}", pod.id, ctr.id));
        Ok(())
    }

    async fn update_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.record(format!(
            "update_container {}/{} resources={}",
            pod.id,
            ctr.id,
            res(resources)
        ));
        Ok(vec![ContainerUpdate::for_container(ctr.id.clone())])
    }

    async fn post_update_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("post_update_container {}/{}", pod.id, ctr.id));
        Ok(())
    }

    async fn stop_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.record(format!("stop_container {}/{}", pod.id, ctr.id));
        Ok(vec![ContainerUpdate::for_container("after-stop")])
    }

    async fn remove_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.record(format!("remove_container {}/{}", pod.id, ctr.id));
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        _: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        let ctr = req.container.as_ref().map(|c| c.id.as_str()).unwrap_or("");
        self.record(format!("validate_container_adjustment {ctr}"));
        if ctr == "forbidden" {
            return Err("containers named forbidden are not allowed".into());
        }
        Ok(())
    }
}
