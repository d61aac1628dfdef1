//! The logger plugin: every handler dumps its request as YAML to the log.

use std::sync::{Mutex, MutexGuard};

use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, LinuxResources, PodSandbox,
    ValidateContainerAdjustmentRequest,
};
use nri_stub::{
    Adjustment, ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin,
    RuntimeCapabilities,
};
use serde::Serialize;

use crate::config::Config;
use crate::log_sink::LogSink;
use nri_plugin_util::{deliverable, report_unapplied};

/// Logs the requests and events it is subscribed to.
pub struct Logger {
    cfg: Mutex<Config>,
    sink: LogSink,
    pid: u32,
}

/// Configure failed: bad events or an unusable log file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    /// The event list does not parse.
    #[error("failed to parse events in configuration: {0}")]
    Events(#[from] nri_stub::api::ParseEventError),
    /// The log file cannot be opened.
    #[error("failed to open log file {path:?}: {source}")]
    LogFile {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Logger {
    /// A logger with the configuration from the flags, logging to `sink`.
    pub fn new(cfg: Config, sink: LogSink) -> Logger {
        Logger {
            cfg: Mutex::new(cfg),
            sink,
            pid: std::process::id(),
        }
    }

    fn cfg(&self) -> MutexGuard<'_, Config> {
        self.cfg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The adjustment of a new container: the configured annotation and environment
    /// variable, with the value `logger-pid-<pid>`.
    pub fn adjustment(&self) -> ContainerAdjustment {
        let cfg = self.cfg().clone();
        let value = format!("logger-pid-{}", self.pid);
        let mut adjust = ContainerAdjustment::default();
        if !cfg.add_annotation.is_empty() {
            adjust.add_annotation(cfg.add_annotation.clone(), value.clone());
        }
        if !cfg.set_annotation.is_empty() {
            adjust
                .remove_annotation(&cfg.set_annotation)
                .add_annotation(cfg.set_annotation.clone(), value.clone());
        }
        if !cfg.add_env.is_empty() {
            adjust.add_env(cfg.add_env.clone(), value.clone());
        }
        if !cfg.set_env.is_empty() {
            adjust
                .remove_env(&cfg.set_env)
                .add_env(cfg.set_env.clone(), value);
        }
        adjust
    }

    /// [`Logger::adjustment`] without what the runtime does not apply: under Docker's
    /// own NRI no annotation (an environment variable set replaces the old value).
    pub fn adjustment_for(&self, runtime: &RuntimeCapabilities) -> ContainerAdjustment {
        let mut adjust = self.adjustment();
        runtime.retain(&mut adjust);
        adjust
    }

    /// The parts of an adjustment the configuration asks for.
    fn adjusts(cfg: &Config) -> Vec<Adjustment> {
        let mut parts = Vec::new();
        if !cfg.add_annotation.is_empty() || !cfg.set_annotation.is_empty() {
            parts.push(Adjustment::Annotations);
        }
        if !cfg.add_env.is_empty() || !cfg.set_env.is_empty() {
            parts.push(Adjustment::Env);
        }
        parts
    }
}

/// One object to dump, serialized to YAML.
pub fn yaml<T: Serialize + ?Sized>(obj: &T) -> Result<String, serde_norway::Error> {
    serde_norway::to_string(obj)
}

/// Logs tagged objects under `prefix`, one log line per YAML line.
pub fn dump(prefix: &str, objects: &[(&str, Result<String, serde_norway::Error>)]) {
    for (tag, text) in objects {
        match text {
            Ok(text) => {
                tracing::info!("{prefix}: {tag}:");
                for line in text.trim().lines() {
                    tracing::info!("{prefix}:    {line}");
                }
            }
            Err(err) => tracing::info!("{prefix}: {tag}: failed to dump object: {err}"),
        }
    }
}

/// Logs a container event's pod and container under `prefix`.
fn dump_container(prefix: &str, pod: &PodSandbox, ctr: &Container) {
    dump(prefix, &[("pod", yaml(pod)), ("container", yaml(ctr))]);
}

#[nri_stub::plugin]
impl Plugin for Logger {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        tracing::info!(
            "got configuration data: {:?} from runtime {} {}",
            info.config,
            info.runtime.name,
            info.runtime.version
        );
        let old = self.cfg().clone();
        let new = old.merged_with_yaml(&info.config)?;
        let requested = EventMask::parse(&new.events).map_err(ConfigureError::from)?;
        if new.log_file != old.log_file && !new.log_file.is_empty() {
            if let Err(source) = self.sink.open_file(new.log_file.as_ref()) {
                let err = ConfigureError::LogFile {
                    path: new.log_file.clone(),
                    source,
                };
                tracing::error!("{err}");
                return Err(err.into());
            }
        }
        report_unapplied("logger", &info.runtime, &Self::adjusts(&new));
        *self.cfg() = new;
        if requested.is_empty() {
            Ok(deliverable(self.implemented_events(), &info.runtime))
        } else {
            Ok(requested)
        }
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump(
            "Synchronize",
            &[("pods", yaml(pods)), ("containers", yaml(containers))],
        );
        Ok(Vec::new())
    }

    async fn shutdown(&self, _ctx: &Context) {
        tracing::info!("Shutdown");
    }

    async fn run_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        dump("RunPodSandbox", &[("pod", yaml(pod))]);
        Ok(())
    }

    async fn update_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        dump(
            "UpdatePodSandbox",
            &[
                ("pod", yaml(pod)),
                ("overHeadResources", yaml(&overhead)),
                ("resources", yaml(&resources)),
            ],
        );
        Ok(())
    }

    async fn post_update_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        dump("PostUpdatePodSandbox", &[("pod", yaml(pod))]);
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        dump("StopPodSandbox", &[("pod", yaml(pod))]);
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        dump("RemovePodSandbox", &[("pod", yaml(pod))]);
        Ok(())
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        dump_container("CreateContainer", pod, ctr);
        Ok(self.adjustment_for(&ctx.runtime().capabilities()).into())
    }

    async fn post_create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        dump_container("PostCreateContainer", pod, ctr);
        Ok(())
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        dump_container("StartContainer", pod, ctr);
        Ok(())
    }

    async fn post_start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        dump_container("PostStartContainer", pod, ctr);
        Ok(())
    }

    async fn update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump(
            "UpdateContainer",
            &[
                ("pod", yaml(pod)),
                ("container", yaml(ctr)),
                ("resources", yaml(&resources)),
            ],
        );
        Ok(Vec::new())
    }

    async fn post_update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        dump_container("PostUpdateContainer", pod, ctr);
        Ok(())
    }

    async fn stop_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        dump_container("StopContainer", pod, ctr);
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        dump_container("RemoveContainer", pod, ctr);
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        dump("ValidateContainerAdjustment", &[("request", yaml(req))]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_stub::api::markers::mark_for_removal;

    #[test]
    fn adjustment_injects_what_is_configured() {
        let logger = Logger::new(Config::default(), LogSink::default());
        assert_eq!(logger.adjustment(), ContainerAdjustment::default());

        let cfg = Config {
            add_annotation: "a.example.com/add".into(),
            set_annotation: "a.example.com/set".into(),
            add_env: "ADD".into(),
            set_env: "SET".into(),
            ..Default::default()
        };
        let logger = Logger::new(cfg, LogSink::default());
        let adjust = logger.adjustment();
        let value = format!("logger-pid-{}", std::process::id());
        assert_eq!(adjust.annotations["a.example.com/add"], value);
        assert_eq!(adjust.annotations["a.example.com/set"], value);
        assert_eq!(
            adjust.annotations[&mark_for_removal("a.example.com/set")],
            ""
        );
        let env: Vec<_> = adjust
            .env
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        let removed = mark_for_removal("SET");
        assert_eq!(
            env,
            [
                ("ADD", value.as_str()),
                (removed.as_str(), ""),
                ("SET", value.as_str())
            ]
        );
    }

    #[test]
    fn under_docker_the_annotations_are_left_out() {
        let cfg = Config {
            add_annotation: "a.example.com/add".into(),
            set_annotation: "a.example.com/set".into(),
            add_env: "ADD".into(),
            set_env: "SET".into(),
            ..Default::default()
        };
        assert_eq!(
            Logger::adjusts(&cfg),
            [Adjustment::Annotations, Adjustment::Env]
        );
        let logger = Logger::new(cfg, LogSink::default());
        let docker = RuntimeCapabilities::for_runtime("docker", "29.2.0");
        let adjust = logger.adjustment_for(&docker);
        let value = format!("logger-pid-{}", std::process::id());
        assert!(adjust.annotations.is_empty(), "{adjust:?}");
        let env: Vec<_> = adjust
            .env
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        assert_eq!(env, [("ADD", value.as_str()), ("SET", value.as_str())]);
        assert!(docker.refused(&adjust).is_empty());
        let containerd = RuntimeCapabilities::for_runtime("containerd", "v2.1.0");
        assert_eq!(logger.adjustment_for(&containerd), logger.adjustment());
    }

    #[test]
    fn objects_dump_as_yaml_without_empty_fields() {
        let pod = PodSandbox {
            name: "web".into(),
            namespace: "prod".into(),
            ..Default::default()
        };
        assert_eq!(yaml(&pod).unwrap(), "name: web\nnamespace: prod\n");
        assert_eq!(yaml(&None::<&LinuxResources>).unwrap().trim(), "null");
    }
}
