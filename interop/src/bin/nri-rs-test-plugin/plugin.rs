//! The plugin: every handler logs its event, then answers as configured.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use nri_stub::api::{
    Container, ContainerUpdate, LinuxResources, PodSandbox, ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, EventMask, Plugin};

use crate::config::{Config, Unsolicited};
use crate::eventlog::{Entry, EventLog};
use crate::tap::TapLog;

/// Where the connection tap's log goes once the connection exists.
#[derive(Debug, Clone, Default)]
pub struct TapSlot(Arc<OnceLock<TapLog>>);

impl TapSlot {
    pub fn set(&self, tap: TapLog) {
        let _ = self.0.set(tap);
    }

    fn get(&self) -> Option<&TapLog> {
        self.0.get()
    }
}

pub struct TestPlugin {
    config: RwLock<Arc<Config>>,
    log: Arc<EventLog>,
    tap: TapSlot,
    fired: Mutex<HashSet<usize>>,
    /// Unsolicited calls go out one at a time, in trigger order.
    sending: Arc<tokio::sync::Mutex<()>>,
}

impl TestPlugin {
    pub fn new(config: Config, log: Arc<EventLog>) -> TestPlugin {
        TestPlugin {
            config: RwLock::new(Arc::new(config)),
            log,
            tap: TapSlot::default(),
            fired: Mutex::new(HashSet::new()),
            sending: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub fn tap_slot(&self) -> TapSlot {
        self.tap.clone()
    }

    fn config(&self) -> Arc<Config> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The common part of every handler: log the event, honour `exit` and `delay_ms`,
    /// fire the unsolicited updates bound to the event, panic or return the configured error.
    async fn enter(&self, ctx: &Context, mut entry: Entry) -> nri_stub::HandlerResult<()> {
        entry.plugin = Some(ctx.name().to_string());
        entry.rpc = self.tap.get().and_then(TapLog::last_method);
        let config = self.config();
        if config.trace {
            if let Some(trace) = ctx.trace_context() {
                entry.trace_id = Some(trace.trace_id_hex());
                entry.parent_span_id = Some(trace.span_id_hex());
            }
        }
        self.log.write(&entry);
        let event = entry.event;
        if let Some(code) = config.exit.get(&event) {
            std::process::exit(*code);
        }
        if let Some(ms) = config.delay_ms.get(&event) {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
        }
        self.trigger(ctx, &config, &event);
        if let Some(message) = config.panic.get(&event) {
            panic!("{message}");
        }
        match (config.error.get(&event), config.error_code.get(&event)) {
            (Some(message), Some(code)) => Err(Box::new(nri_stub::Status::new(
                code_named(code),
                message.clone(),
            ))),
            (Some(message), None) => Err(message.clone().into()),
            (None, _) => Ok(()),
        }
    }

    /// Starts the unsolicited updates bound to `event` (each fires once).
    fn trigger(&self, ctx: &Context, config: &Config, event: &str) {
        for (i, unsolicited) in config.unsolicited.iter().enumerate() {
            if unsolicited.after_event != event {
                continue;
            }
            if !self
                .fired
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(i)
            {
                continue;
            }
            let handle = ctx.runtime_handle().clone();
            let log = Arc::clone(&self.log);
            let sending = Arc::clone(&self.sending);
            let Unsolicited {
                after_ms,
                every_ms,
                updates,
                evict,
                ..
            } = unsolicited.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                // As the Go plugin's ticker: the first repeated call one period
                // after the trigger's delay.
                let mut ticks = (every_ms > 0).then(|| {
                    let period = Duration::from_millis(every_ms);
                    let mut t =
                        tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    t
                });
                loop {
                    if let Some(ticks) = ticks.as_mut() {
                        ticks.tick().await;
                    }
                    let result = {
                        let _one_at_a_time = sending.lock().await;
                        handle
                            .update_containers(updates.clone(), evict.clone())
                            .await
                    };
                    let mut entry = Entry::new("UpdateContainers");
                    entry.updates = Some(updates.clone());
                    match result {
                        Ok(failed) => entry.failed = Some(failed),
                        Err(err) => entry.error = Some(err.to_string()),
                    }
                    log.write(&entry);
                    if ticks.is_none() {
                        break;
                    }
                }
            });
        }
    }

    /// The log entry of a pod event; the pod is copied into it only when
    /// the entry is written.
    fn pod_entry(&self, event: &str, pod: &PodSandbox) -> Entry {
        Entry {
            pod: self.log.is_open().then(|| pod.clone()),
            ..Entry::new(event)
        }
    }

    /// The log entry of a container event; pod and container are copied
    /// into it only when the entry is written.
    fn container_entry(&self, event: &str, pod: &PodSandbox, ctr: &Container) -> Entry {
        let logged = self.log.is_open();
        Entry {
            pod: logged.then(|| pod.clone()),
            container: logged.then(|| ctr.clone()),
            ..Entry::new(event)
        }
    }
}

#[nri_stub::plugin]
impl Plugin for TestPlugin {
    async fn configure(
        &self,
        ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        // A JSON object from the runtime (the drop-in file of a launched plugin)
        // replaces the command-line configuration.
        if info.config.trim_start().starts_with('{') {
            let config = Config::parse("from runtime", info.config.as_bytes())?;
            if let Some(path) = &config.log {
                self.log.open(path)?;
            }
            *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
        }
        let runtime = ctx.runtime();
        let entry = Entry {
            config: Some(info.config.clone()),
            runtime: Some(runtime.name.clone()),
            version: Some(runtime.version.clone()),
            nri_version: runtime.nri_version.clone(),
            nri_version_inferred: Some(runtime.nri_version_inferred),
            registration_timeout_ms: Some(runtime.registration_timeout.as_millis()),
            request_timeout_ms: Some(runtime.request_timeout.as_millis()),
            ..Entry::new("Configure")
        };
        self.enter(ctx, entry).await?;
        let config = self.config();
        self.trigger(ctx, &config, "");
        if config.events.is_empty() {
            return Ok(EventMask::default());
        }
        Ok(EventMask::parse(&config.events)?)
    }

    async fn synchronize(
        &self,
        ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let entry = Entry {
            pods: Some(pods.to_vec()),
            containers: Some(containers.to_vec()),
            sync_requests: self.tap.get().map(TapLog::take_sync_parts),
            ..Entry::new("Synchronize")
        };
        self.enter(ctx, entry).await?;
        Ok(self.config().updates("Synchronize"))
    }

    async fn shutdown(&self, ctx: &Context) {
        let _ = self.enter(ctx, Entry::new("Shutdown")).await;
    }

    async fn run_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.pod_entry("RunPodSandbox", pod)).await
    }

    async fn update_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<()> {
        let entry = Entry {
            overhead_resources: overhead.cloned(),
            resources: resources.cloned(),
            ..self.pod_entry("UpdatePodSandbox", pod)
        };
        self.enter(ctx, entry).await
    }

    async fn post_update_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.pod_entry("PostUpdatePodSandbox", pod))
            .await
    }

    async fn stop_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.pod_entry("StopPodSandbox", pod)).await
    }

    async fn remove_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.pod_entry("RemovePodSandbox", pod))
            .await
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.enter(ctx, self.container_entry("CreateContainer", pod, ctr))
            .await?;
        let config = self.config();
        Ok(CreateContainerResult {
            adjust: config.adjust.clone(),
            updates: config.updates("CreateContainer"),
            evictions: config
                .evict
                .get("CreateContainer")
                .cloned()
                .unwrap_or_default(),
        })
    }

    async fn post_create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.container_entry("PostCreateContainer", pod, ctr))
            .await
    }

    async fn start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.container_entry("StartContainer", pod, ctr))
            .await
    }

    async fn post_start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.container_entry("PostStartContainer", pod, ctr))
            .await
    }

    async fn update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let entry = Entry {
            resources: resources.cloned(),
            ..self.container_entry("UpdateContainer", pod, ctr)
        };
        self.enter(ctx, entry).await?;
        Ok(self.config().updates("UpdateContainer"))
    }

    async fn post_update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.container_entry("PostUpdateContainer", pod, ctr))
            .await
    }

    async fn stop_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.enter(ctx, self.container_entry("StopContainer", pod, ctr))
            .await?;
        Ok(self.config().updates("StopContainer"))
    }

    async fn remove_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.enter(ctx, self.container_entry("RemoveContainer", pod, ctr))
            .await
    }

    async fn validate_container_adjustment(
        &self,
        ctx: &Context,
        request: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        let entry = Entry {
            validate: Some(request.clone()),
            ..Entry::new("ValidateContainerAdjustment")
        };
        self.enter(ctx, entry).await?;
        let config = self.config();
        if config.reject {
            return Err(config.reason.clone().into());
        }
        Ok(())
    }
}

/// The status code named `name` (`Unknown` if there is none of that name).
fn code_named(name: &str) -> nri_stub::Code {
    (0..=16)
        .map(nri_stub::Code::from)
        .find(|c| c.to_string() == name)
        .unwrap_or(nri_stub::Code::Unknown)
}
