//! The template plugin: one handler per NRI request, each logs what it got.

use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, LinuxResources, PodSandbox,
    ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin};
use serde::Deserialize;

use nri_plugin_util::deliverable;

/// Configuration the runtime may pass in Configure (YAML), e.g. `cfgParam1: value`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Config {
    /// An example parameter; replace with your plugin's own.
    #[serde(rename = "cfgParam1")]
    pub cfg_param1: String,
}

/// A configuration text that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("failed to parse configuration: {0}")]
pub struct ConfigError(#[from] serde_norway::Error);

impl Config {
    /// Reads the YAML configuration; an empty text (or `null`) is the default.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let cfg: Option<Config> = serde_norway::from_str(text)?;
        Ok(cfg.unwrap_or_default())
    }
}

/// The template plugin.
#[derive(Debug, Default)]
pub struct Template {
    /// Events to subscribe to; empty means every event the runtime can deliver.
    pub events: EventMask,
}

fn pod_name(pod: &PodSandbox) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}

fn ctr_name(pod: &PodSandbox, ctr: &Container) -> String {
    format!("{}/{}/{}", pod.namespace, pod.name, ctr.name)
}

#[nri_stub::plugin]
impl Plugin for Template {
    async fn configure(&self, ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        tracing::info!(
            "connected to {}/{} as {}",
            info.runtime.name,
            info.runtime.version,
            ctx.name()
        );
        if !info.config.is_empty() {
            let cfg = Config::from_yaml(&info.config)?;
            tracing::info!("got configuration data {cfg:?}");
        }
        if self.events.is_empty() {
            Ok(deliverable(self.implemented_events(), &info.runtime))
        } else {
            Ok(self.events)
        }
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        tracing::info!(
            "synchronized state with the runtime ({} pods, {} containers)",
            pods.len(),
            containers.len()
        );
        Ok(Vec::new())
    }

    async fn shutdown(&self, _ctx: &Context) {
        tracing::info!("runtime shutting down");
    }

    async fn run_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("started pod {}", pod_name(pod));
        Ok(())
    }

    async fn update_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        _overhead: Option<&LinuxResources>,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        tracing::info!("updating pod {}", pod_name(pod));
        Ok(())
    }

    async fn post_update_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("updated pod {}", pod_name(pod));
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("stopped pod {}", pod_name(pod));
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        tracing::info!("removed pod {}", pod_name(pod));
        Ok(())
    }

    async fn create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        tracing::info!("creating container {}", ctr_name(pod, ctr));
        // The widest set of changes is possible here, before the container exists:
        // see the `add_*`/`remove_*`/`set_*` methods of ContainerAdjustment. Updates
        // of other containers go into `CreateContainerResult::with_updates`.
        Ok(ContainerAdjustment::default().into())
    }

    async fn post_create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        tracing::info!("created container {}", ctr_name(pod, ctr));
        Ok(())
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        tracing::info!("starting container {}", ctr_name(pod, ctr));
        Ok(())
    }

    async fn post_start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        tracing::info!("started container {}", ctr_name(pod, ctr));
        Ok(())
    }

    async fn update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        tracing::info!("updating container {}", ctr_name(pod, ctr));
        // An update of this container in the result replaces the requested one;
        // updates of other containers are allowed too.
        Ok(Vec::new())
    }

    async fn post_update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        tracing::info!("updated container {}", ctr_name(pod, ctr));
        Ok(())
    }

    async fn stop_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        tracing::info!("stopped container {}", ctr_name(pod, ctr));
        // The remaining containers may be updated here.
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        tracing::info!("removed container {}", ctr_name(pod, ctr));
        Ok(())
    }

    async fn validate_container_adjustment(
        &self,
        _ctx: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        let pod = req.pod.as_ref();
        tracing::info!(
            "validating adjustment of container {}/{}/{}",
            pod.map_or("", |p| p.namespace.as_str()),
            pod.map_or("", |p| p.name.as_str()),
            req.container.as_ref().map_or("", |c| c.name.as_str())
        );
        // Return an error to reject the adjustment; the container is then not created.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_configuration() {
        let cfg = Config::from_yaml("cfgParam1: hello\nother: ignored\n").unwrap();
        assert_eq!(cfg.cfg_param1, "hello");
        assert_eq!(Config::from_yaml("").unwrap(), Config::default());
        assert_eq!(Config::from_yaml("null").unwrap(), Config::default());
    }

    #[test]
    fn bad_configuration_is_an_error() {
        let err = Config::from_yaml("cfgParam1: [1, 2]").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to parse configuration: "),
            "{err}"
        );
    }

    #[test]
    fn implements_every_event() {
        assert_eq!(
            Template::default().implemented_events(),
            EventMask::VALID_EVENTS
        );
    }
}
