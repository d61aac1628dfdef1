//! The differ at one index: compares each pod and container with what the
//! previous index saw, and logs the difference.

use std::sync::{Arc, Mutex, MutexGuard};

use nri_stub::api::{Container, ContainerUpdate, LinuxResources, PodSandbox};
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, EventMask, HandlerResult, Plugin};
use serde::{Deserialize, Serialize};

use crate::chain::{Chain, Snapshot, Step};
use crate::diff::{changes, line_diff};

/// How the differences are shown; shared by all the indices of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// 0: changes only; 1: also what the first index saw; 2: also the objects
    /// before and after each difference; 3: also Synchronize.
    pub verbose_level: u8,
    /// Show the differences as line diffs of the YAML forms.
    pub yaml: bool,
}

/// The YAML configuration a runtime may send (keys left out keep their value).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OptionsPatch {
    #[serde(rename = "verboseLevel")]
    verbose_level: Option<u8>,
    yaml: Option<bool>,
}

/// The configuration text is not a differ configuration.
#[derive(Debug, thiserror::Error)]
#[error("failed to parse provided configuration: {0}")]
pub struct ConfigError(#[from] serde_norway::Error);

impl Options {
    /// These options with the keys present in the YAML `text` replaced.
    pub fn merged_with_yaml(self, text: &str) -> Result<Options, ConfigError> {
        if text.trim().is_empty() {
            return Ok(self);
        }
        let patch: Option<OptionsPatch> = serde_norway::from_str(text)?;
        let patch = patch.unwrap_or_default();
        Ok(Options {
            verbose_level: patch.verbose_level.unwrap_or(self.verbose_level),
            yaml: patch.yaml.unwrap_or(self.yaml),
        })
    }
}

/// The differ registered at one index.
pub struct Differ {
    idx: u8,
    chain: Arc<Chain>,
    options: Arc<Mutex<Options>>,
}

impl Differ {
    /// The differ at `idx` of `chain`.
    pub fn new(idx: u8, chain: Arc<Chain>, options: Arc<Mutex<Options>>) -> Differ {
        Differ {
            idx,
            chain,
            options,
        }
    }

    fn options(&self) -> MutexGuard<'_, Options> {
        self.options.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lines logged for the event `event` seeing `pod` and `ctr`.
    pub fn observe(&self, event: &str, pod: &PodSandbox, ctr: Option<&Container>) -> Vec<String> {
        let opts = *self.options();
        let now = Snapshot {
            pod: Some(pod.clone()),
            container: ctr.cloned(),
        };
        let mut lines = Vec::new();
        match self.chain.observe(self.idx, now) {
            Step::First => {
                if opts.verbose_level > 0 {
                    self.dump(&mut lines, event, "pod", pod);
                    if let Some(ctr) = ctr {
                        self.dump(&mut lines, event, "container", ctr);
                    }
                }
            }
            Step::Missing => tracing::debug!(
                "[{:02}] {event}: nothing to compare with, the previous index has not seen it",
                self.idx
            ),
            Step::Compare(before) => {
                if let Some(old) = &before.pod {
                    self.compare(&mut lines, opts, event, "pod", old, pod);
                }
                if let (Some(old), Some(new)) = (&before.container, ctr) {
                    self.compare(&mut lines, opts, event, "container", old, new);
                }
            }
        }
        for line in &lines {
            tracing::info!("{line}");
        }
        lines
    }

    fn compare<T: Serialize>(
        &self,
        out: &mut Vec<String>,
        opts: Options,
        event: &str,
        what: &str,
        old: &T,
        new: &T,
    ) {
        let prefix = format!("[{:02}] {event}: {what}:", self.idx);
        if opts.verbose_level > 1 {
            out.push(format!("[{:02}] Original values for {what}", self.idx));
            self.dump(out, event, what, old);
        }
        let found = if opts.yaml {
            match (serde_norway::to_string(old), serde_norway::to_string(new)) {
                (Ok(a), Ok(b)) => line_diff(&a, &b).unwrap_or_default(),
                (Err(err), _) | (_, Err(err)) => {
                    out.push(format!("{prefix} failed to serialize: {err}"));
                    return;
                }
            }
        } else {
            match (serde_json::to_value(old), serde_json::to_value(new)) {
                (Ok(a), Ok(b)) => changes(&a, &b).iter().map(|c| c.to_string()).collect(),
                (Err(err), _) | (_, Err(err)) => {
                    out.push(format!("{prefix} failed to serialize: {err}"));
                    return;
                }
            }
        };
        if found.is_empty() {
            out.push(format!("{prefix} <no changes>"));
            return;
        }
        out.extend(found.into_iter().map(|line| format!("{prefix} {line}")));
        if opts.verbose_level > 1 {
            out.push(format!("[{:02}] Values after changes for {what}", self.idx));
            self.dump(out, event, what, new);
        }
    }

    fn dump<T: Serialize + ?Sized>(&self, out: &mut Vec<String>, event: &str, tag: &str, obj: &T) {
        let prefix = format!("[{:02}] {event}:", self.idx);
        match serde_norway::to_string(obj) {
            Ok(text) => {
                out.push(format!("{prefix} {tag}:"));
                out.extend(text.trim().lines().map(|l| format!("{prefix}    {l}")));
            }
            Err(err) => out.push(format!("{prefix} {tag}: failed to dump object: {err}")),
        }
    }
}

#[nri_stub::plugin]
impl Plugin for Differ {
    async fn configure(&self, _ctx: &Context, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        tracing::info!(
            "[{:02}] got configuration data: {:?}",
            self.idx,
            info.config
        );
        let new = self.options().merged_with_yaml(&info.config)?;
        *self.options() = new;
        Ok(EventMask::default())
    }

    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        if self.options().verbose_level > 2 {
            let mut lines = Vec::new();
            self.dump(&mut lines, "Synchronize", "pods", pods);
            self.dump(&mut lines, "Synchronize", "containers", containers);
            for line in lines {
                tracing::info!("{line}");
            }
        }
        Ok(Vec::new())
    }

    async fn shutdown(&self, _ctx: &Context) {
        tracing::info!("[{:02}] Shutdown", self.idx);
    }

    async fn run_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        self.observe("RunPodSandbox", pod, None);
        Ok(())
    }

    async fn stop_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        self.observe("StopPodSandbox", pod, None);
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _ctx: &Context, pod: &PodSandbox) -> HandlerResult<()> {
        self.observe("RemovePodSandbox", pod, None);
        Ok(())
    }

    async fn create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        self.observe("CreateContainer", pod, Some(ctr));
        Ok(CreateContainerResult::default())
    }

    async fn post_create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.observe("PostCreateContainer", pod, Some(ctr));
        Ok(())
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.observe("StartContainer", pod, Some(ctr));
        Ok(())
    }

    async fn post_start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.observe("PostStartContainer", pod, Some(ctr));
        Ok(())
    }

    async fn update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
        _resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.observe("UpdateContainer", pod, Some(ctr));
        Ok(Vec::new())
    }

    async fn post_update_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.observe("PostUpdateContainer", pod, Some(ctr));
        Ok(())
    }

    async fn stop_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.observe("StopContainer", pod, Some(ctr));
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<()> {
        self.observe("RemoveContainer", pod, Some(ctr));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(opts: Options) -> (Differ, Differ) {
        let chain = Arc::new(Chain::new(&[5, 15]));
        let opts = Arc::new(Mutex::new(opts));
        (
            Differ::new(5, chain.clone(), opts.clone()),
            Differ::new(15, chain, opts),
        )
    }

    fn fixtures() -> (PodSandbox, Container, Container) {
        let pod = PodSandbox {
            id: "pod0".into(),
            name: "web".into(),
            ..Default::default()
        };
        let ctr = Container {
            id: "ctr0".into(),
            name: "server".into(),
            env: vec!["A=1".into()],
            ..Default::default()
        };
        let mut changed = ctr.clone();
        changed.env.push("B=2".into());
        changed
            .annotations
            .insert("example.com/x".into(), "y".into());
        (pod, ctr, changed)
    }

    #[test]
    fn shows_what_changed_between_two_indices() {
        let (first, second) = pair(Options::default());
        let (pod, ctr, changed) = fixtures();
        assert_eq!(
            first.observe("CreateContainer", &pod, Some(&ctr)),
            Vec::<String>::new()
        );
        assert_eq!(
            second.observe("CreateContainer", &pod, Some(&changed)),
            [
                "[15] CreateContainer: pod: <no changes>",
                "[15] CreateContainer: container: create: [annotations example.com/x]: From: <nil> -> To: y",
                "[15] CreateContainer: container: create: [env 1]: From: <nil> -> To: B=2",
            ]
        );
        // Nothing left to compare with.
        assert_eq!(
            second.observe("CreateContainer", &pod, Some(&ctr)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn yaml_mode_shows_a_line_diff() {
        let (first, second) = pair(Options {
            verbose_level: 0,
            yaml: true,
        });
        let (pod, ctr, changed) = fixtures();
        first.observe("StartContainer", &pod, Some(&ctr));
        let lines = second.observe("StartContainer", &pod, Some(&changed));
        assert_eq!(lines[0], "[15] StartContainer: pod: <no changes>");
        assert!(
            lines.contains(&"[15] StartContainer: container: + - B=2".to_string()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"[15] StartContainer: container:   name: server".to_string()),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("+   example.com/x: y")),
            "{lines:#?}"
        );
    }

    #[test]
    fn verbose_levels_add_the_objects() {
        let (first, second) = pair(Options {
            verbose_level: 2,
            yaml: false,
        });
        let (pod, ctr, changed) = fixtures();
        let lines = first.observe("CreateContainer", &pod, Some(&ctr));
        assert!(
            lines.contains(&"[05] CreateContainer:    name: server".to_string()),
            "{lines:#?}"
        );
        let lines = second.observe("CreateContainer", &pod, Some(&changed));
        assert!(
            lines.contains(&"[15] Original values for container".to_string()),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"[15] Values after changes for container".to_string()),
            "{lines:#?}"
        );
    }

    #[test]
    fn configuration_sets_options() {
        let base = Options::default();
        assert_eq!(base.merged_with_yaml("").unwrap(), base);
        assert_eq!(
            base.merged_with_yaml("verboseLevel: 2\nyaml: true\nindices: 0,99\n")
                .unwrap(),
            Options {
                verbose_level: 2,
                yaml: true
            }
        );
        for bad in ["yaml: maybe", "verboseLevel: -1", "[1]"] {
            let err = base.merged_with_yaml(bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("failed to parse provided configuration"),
                "{err}"
            );
        }
    }
}
