//! The sample plugins of `plugins/`, run in-process by name
//! (`- sample: ulimit-adjuster`).
//!
//! Each sample runs on `nri-stub`, exactly as its program does, but inside
//! the simulator: the stub connects to the simulated runtime's socket as an
//! external plugin. External plugins get no configuration from the runtime,
//! so the scenario's `config` is handed to the plugin's Configure handler by
//! a thin wrapper ([`Configured`]), as if it came from a `.conf` file.
//! Arguments are those of the plugin's program (Go-style flags); `-name`,
//! `-idx` and the socket are set by the simulator.

use std::path::{Path, PathBuf};
#[cfg(feature = "samples")]
use std::sync::{Arc, Mutex};

use nri_plugin_util::{go_args, ShortFlags};
use nri_stub::api::{
    Container, ContainerUpdate, LinuxResources, PodSandbox, ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, EventMask, Plugin, Stub};
use tokio::task::JoinHandle;

/// A sample plugin the simulator knows.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Its name in scenarios (the directory under `plugins/`).
    pub name: &'static str,
    /// What it does.
    pub about: &'static str,
    /// Why it cannot run in the simulator, if it cannot.
    pub unsupported: Option<&'static str>,
    /// Built in only with nri-sim's `samples` feature (every runnable
    /// sample but `ulimit-adjuster`, which the demo runs).
    pub optional: bool,
}

/// Every sample plugin, supported or not.
pub const SAMPLES: &[Sample] = &[
    Sample {
        name: "default-validator",
        about: "NRI's default validator as a plugin (`config`: its YAML settings)",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "device-injector",
        about: "devices, mounts and CDI devices from pod annotations",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "differ",
        about: "registers at several indices (`-indices 0,99`) and logs what plugins between them changed",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "logger",
        about: "logs requests; can add an annotation or environment variable (`config`: addAnnotation, addEnv, ...)",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "network-logger",
        about: "logs the network namespace and IP addresses of pods as they start, stop and are removed",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "rdt",
        about: "RDT classes and monitoring from pod annotations",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "template",
        about: "logs every request, changes nothing (`-events`)",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "ulimit-adjuster",
        about: "rlimits from pod annotations",
        unsupported: None,
        optional: false,
    },
    Sample {
        name: "writable-cgroups",
        about: "read-write /sys/fs/cgroup for annotated containers, if the host cgroup mount has nsdelegate (`-host-mount-file`)",
        unsupported: None,
        optional: true,
    },
    Sample {
        name: "hook-injector",
        about: "OCI hooks from hook files",
        unsupported: Some(
            "it watches hook directories of the host; launch it with `command:` if you need it",
        ),
        optional: false,
    },
    Sample {
        name: "network-device-injector",
        about: "moves host network devices into pods",
        unsupported: Some("it needs real network namespaces"),
        optional: false,
    },
    Sample {
        name: "v010-adapter",
        about: "runs NRI v0.1.0 plugin binaries",
        unsupported: Some("it runs external NRI v0.1.0 plugin binaries"),
        optional: false,
    },
];

/// The names of the samples that run in the simulator, comma-separated.
pub fn available() -> String {
    SAMPLES
        .iter()
        .filter(|s| s.unsupported.is_none())
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `name` is a sample this build of the simulator can run
/// (those other than `ulimit-adjuster` need the `samples` feature).
///
/// ```
/// assert!(nri_sim::samples::check("ulimit-adjuster").is_ok());
/// let err = nri_sim::samples::check("ulimit").unwrap_err();
/// assert!(err.contains("available: default-validator"), "{err}");
/// ```
pub fn check(name: &str) -> Result<(), String> {
    match SAMPLES.iter().find(|s| s.name == name) {
        Some(Sample {
            unsupported: None,
            optional: true,
            ..
        }) if !crate::features::enabled("samples") => Err(crate::features::not_built_in(
            "samples",
            &format!("sample plugin `{name}`"),
        )),
        Some(Sample {
            unsupported: None, ..
        }) => Ok(()),
        Some(Sample {
            unsupported: Some(why),
            ..
        }) => Err(format!(
            "sample plugin `{name}` cannot run in the simulator: {why} (available: {})",
            available()
        )),
        None => Err(format!(
            "unknown sample plugin `{name}` (available: {})",
            available()
        )),
    }
}

/// How to run one sample.
#[derive(Debug, Clone)]
pub struct SampleRun {
    /// Which sample.
    pub sample: String,
    /// Base name it registers with.
    pub name: String,
    /// Index it registers with.
    pub index: String,
    /// Configuration handed to Configure.
    pub config: String,
    /// Where `config` was written as a YAML mapping (`plugins[0] of
    /// scenario.yaml`): it reaches the plugin re-serialized, so positions in
    /// the plugin's errors about it are not the scenario's.
    pub config_from: Option<String>,
    /// Its program's arguments (without the program name).
    pub args: Vec<String>,
}

/// Why a sample did not start.
#[derive(Debug, thiserror::Error)]
#[error("sample plugin {sample} ({name}): {message}")]
pub struct SampleError {
    /// The sample.
    pub sample: String,
    /// Its base name.
    pub name: String,
    /// What went wrong.
    pub message: String,
}

/// The running stubs of one sample (one per index for the differ).
pub struct Running {
    /// The sample.
    pub sample: String,
    /// The full names (`NN-name`) it registers as.
    pub full_names: Vec<String>,
    /// [`SampleRun::config_from`].
    pub config_from: Option<String>,
    tasks: Vec<JoinHandle<Result<(), String>>>,
}

impl Running {
    /// Why the plugin stopped, if one of its connections ended. An error
    /// about a configuration written as a YAML mapping says so, without the
    /// parser's line and column (they count in the re-serialized text).
    pub async fn ended(&mut self) -> Option<String> {
        let i = self.tasks.iter().position(JoinHandle::is_finished)?;
        let task = self.tasks.remove(i);
        Some(match task.await {
            Ok(Ok(())) => "it stopped".into(),
            Ok(Err(e)) => match &self.config_from {
                Some(from) if e.contains("configur") => {
                    format!("{} (its `config:` mapping, {from})", without_positions(&e))
                }
                _ => e,
            },
            Err(e) => format!("its task failed: {e}"),
        })
    }

    /// Stops the plugin's connections.
    pub fn abort(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.abort();
    }
}

/// `text` without the YAML parser's ` at line N column M` positions.
fn without_positions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" at line ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + " at line ".len()..];
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let n = digits(after);
        let position = (n > 0)
            .then(|| after[n..].strip_prefix(" column "))
            .flatten()
            .map(|col| (col, digits(col)))
            .filter(|(_, m)| *m > 0);
        match position {
            Some((col, m)) => rest = &col[m..],
            None => {
                out.push_str(" at line ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn single(run: &SampleRun, task: JoinHandle<Result<(), String>>) -> Result<Running, String> {
    Ok(Running {
        sample: run.sample.clone(),
        full_names: vec![format!("{}-{}", run.index, run.name)],
        config_from: run.config_from.clone(),
        tasks: vec![task],
    })
}

fn parse_args<A: clap::Parser>(program: &str, run: &SampleRun) -> Result<A, String> {
    let argv = std::iter::once(program.to_string()).chain(run.args.iter().cloned());
    A::try_parse_from(go_args(argv, ShortFlags::Keep)).map_err(|e| {
        format!(
            "bad arguments {:?}: {}",
            run.args,
            e.render().to_string().trim()
        )
    })
}

#[cfg(feature = "samples")]
fn no_args(run: &SampleRun) -> Result<(), String> {
    if run.args.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "takes no arguments in the simulator (got {:?})",
            run.args
        ))
    }
}

/// Starts `run` in-process, connecting to the runtime at `socket`.
pub fn start(run: &SampleRun, socket: &Path) -> Result<Running, SampleError> {
    start_inner(run, socket).map_err(|message| SampleError {
        sample: run.sample.clone(),
        name: run.name.clone(),
        message,
    })
}

fn start_inner(run: &SampleRun, socket: &Path) -> Result<Running, String> {
    check(&run.sample)?;
    let socket = socket.to_path_buf();
    match run.sample.as_str() {
        "ulimit-adjuster" => {
            parse_args::<nri_plugin_ulimit_adjuster::cli::Args>("nri-ulimit-adjuster", run)?;
            single(
                run,
                spawn(
                    nri_plugin_ulimit_adjuster::plugin::UlimitAdjuster,
                    run,
                    &run.index,
                    socket,
                )?,
            )
        }
        #[cfg(feature = "samples")]
        "device-injector" => {
            no_args(run)?;
            single(
                run,
                spawn(
                    nri_plugin_device_injector::DeviceInjector,
                    run,
                    &run.index,
                    socket,
                )?,
            )
        }
        #[cfg(feature = "samples")]
        "network-logger" => {
            no_args(run)?;
            single(
                run,
                spawn(
                    nri_plugin_network_logger::plugin::NetworkLogger,
                    run,
                    &run.index,
                    socket,
                )?,
            )
        }
        #[cfg(feature = "samples")]
        "rdt" => {
            no_args(run)?;
            single(run, spawn(nri_plugin_rdt::Rdt, run, &run.index, socket)?)
        }
        #[cfg(feature = "samples")]
        "template" => {
            let a = parse_args::<nri_plugin_template::cli::Args>("nri-template", run)?;
            let events = match a.events.as_deref().filter(|e| !e.is_empty()) {
                None => EventMask::default(),
                Some(list) => {
                    EventMask::parse(&[list]).map_err(|e| format!("bad -events {list:?}: {e}"))?
                }
            };
            single(
                run,
                spawn(
                    nri_plugin_template::plugin::Template { events },
                    run,
                    &run.index,
                    socket,
                )?,
            )
        }
        #[cfg(feature = "samples")]
        "logger" => {
            use nri_plugin_logger::{config::Config, log_sink::LogSink, plugin::Logger};
            let a = parse_args::<nri_plugin_logger::cli::Args>("nri-logger", run)?;
            let sink = LogSink::default();
            if !a.log_file.is_empty() {
                sink.open_file(Path::new(&a.log_file))
                    .map_err(|e| format!("cannot open log file {:?}: {e}", a.log_file))?;
            }
            let events: Vec<String> = if a.events.is_empty() {
                Vec::new()
            } else {
                vec![a.events.clone()]
            };
            EventMask::parse(&events).map_err(|e| format!("bad -events: {e}"))?;
            let cfg = Config {
                log_file: a.log_file,
                events,
                add_annotation: a.add_annotation,
                set_annotation: a.set_annotation,
                add_env: a.add_env,
                set_env: a.set_env,
            };
            single(run, spawn(Logger::new(cfg, sink), run, &run.index, socket)?)
        }
        #[cfg(feature = "samples")]
        "writable-cgroups" => {
            let a =
                parse_args::<nri_plugin_writable_cgroups::cli::Args>("nri-writable-cgroups", run)?;
            let host_ns_delegate = nri_plugin_writable_cgroups::mountinfo::host_has_nsdelegate(
                Path::new(&a.host_mount_file),
            )
            .unwrap_or(false);
            single(
                run,
                spawn(
                    nri_plugin_writable_cgroups::plugin::WritableCgroups { host_ns_delegate },
                    run,
                    &run.index,
                    socket,
                )?,
            )
        }
        #[cfg(feature = "samples")]
        "default-validator" => {
            use nri_plugin_default_validator::{config::ValidatorSettings, plugin::Validator};
            let a = parse_args::<nri_plugin_default_validator::cli::Args>(
                "nri-default-validator",
                run,
            )?;
            let settings = match a.common.config.as_deref() {
                None => ValidatorSettings::default(),
                Some(path) => ValidatorSettings::from_file(path).map_err(|e| e.to_string())?,
            };
            single(
                run,
                spawn(Validator::new(settings), run, &run.index, socket)?,
            )
        }
        #[cfg(feature = "samples")]
        "differ" => {
            use nri_plugin_differ::{chain, plugin};
            let a = parse_args::<nri_plugin_differ::cli::Args>("nri-differ", run)?;
            let indices = chain::parse_indices(&a.indices).map_err(|e| e.to_string())?;
            let chain = Arc::new(chain::Chain::new(&indices));
            let options = Arc::new(Mutex::new(plugin::Options {
                verbose_level: a.verbose_level,
                yaml: a.yaml,
            }));
            let mut running = Running {
                sample: run.sample.clone(),
                full_names: Vec::new(),
                config_from: run.config_from.clone(),
                tasks: Vec::new(),
            };
            for idx in indices {
                let index = format!("{idx:02}");
                let p = plugin::Differ::new(idx, chain.clone(), options.clone());
                running.tasks.push(spawn(p, run, &index, socket.clone())?);
                running.full_names.push(format!("{index}-{}", run.name));
            }
            Ok(running)
        }
        other => Err(format!("unknown sample plugin `{other}`")),
    }
}

fn spawn<P: Plugin>(
    plugin: P,
    run: &SampleRun,
    index: &str,
    socket: PathBuf,
) -> Result<JoinHandle<Result<(), String>>, String> {
    let stub = Stub::builder(Configured {
        inner: plugin,
        config: run.config.clone(),
    })
    .name(run.name.clone())
    .index(index.to_string())
    .socket_path(socket)
    .build()
    .map_err(|e| e.to_string())?;
    let full = format!("{index}-{}", run.name);
    Ok(tokio::spawn(async move {
        stub.run().await.map_err(|e| {
            tracing::debug!(plugin = %full, error = %e, "sample plugin stopped");
            e.to_string()
        })
    }))
}

/// A plugin whose Configure handler receives `config` when the runtime
/// sends none (as for every plugin that connects on its own).
pub struct Configured<P> {
    /// The plugin.
    pub inner: P,
    /// Its configuration text.
    pub config: String,
}

/// Hand-written, to forward `implemented_events` and every handler.
impl<P: Plugin> nri_stub::__private::PluginAttribute for Configured<P> {}

#[nri_stub::async_trait]
impl<P: Plugin> Plugin for Configured<P> {
    fn implemented_events(&self) -> EventMask {
        self.inner.implemented_events()
    }

    async fn configure(
        &self,
        ctx: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        if info.config.is_empty() && !self.config.is_empty() {
            let mut info = info.clone();
            info.config.clone_from(&self.config);
            self.inner.configure(ctx, &info).await
        } else {
            self.inner.configure(ctx, info).await
        }
    }

    async fn synchronize(
        &self,
        ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.inner.synchronize(ctx, pods, containers).await
    }

    async fn shutdown(&self, ctx: &Context) {
        self.inner.shutdown(ctx).await
    }

    async fn run_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.run_pod_sandbox(ctx, pod).await
    }

    async fn update_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<()> {
        self.inner
            .update_pod_sandbox(ctx, pod, overhead, resources)
            .await
    }

    async fn post_update_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.post_update_pod_sandbox(ctx, pod).await
    }

    async fn stop_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.stop_pod_sandbox(ctx, pod).await
    }

    async fn remove_pod_sandbox(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.remove_pod_sandbox(ctx, pod).await
    }

    async fn create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.inner.create_container(ctx, pod, container).await
    }

    async fn post_create_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.post_create_container(ctx, pod, container).await
    }

    async fn start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.start_container(ctx, pod, container).await
    }

    async fn post_start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.post_start_container(ctx, pod, container).await
    }

    async fn update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
        resources: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.inner
            .update_container(ctx, pod, container, resources)
            .await
    }

    async fn post_update_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.post_update_container(ctx, pod, container).await
    }

    async fn stop_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.inner.stop_container(ctx, pod, container).await
    }

    async fn remove_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        container: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.remove_container(ctx, pod, container).await
    }

    async fn validate_container_adjustment(
        &self,
        ctx: &Context,
        request: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        self.inner.validate_container_adjustment(ctx, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_taken_out_of_a_message() {
        assert_eq!(
            without_positions("logFile: invalid type: sequence at line 1 column 39, or so"),
            "logFile: invalid type: sequence, or so"
        );
        assert_eq!(without_positions("at line 3"), "at line 3");
        assert_eq!(
            without_positions("a at line x column 2 b at line 2 column 3"),
            "a at line x column 2 b"
        );
    }

    #[test]
    fn unsupported_and_unknown_samples_are_explained() {
        let err = check("network-device-injector").unwrap_err();
        assert!(err.contains("network namespaces"), "{err}");
        assert!(err.contains("ulimit-adjuster"), "{err}");
        let err = check("nope").unwrap_err();
        assert!(err.starts_with("unknown sample plugin `nope`"), "{err}");
        assert!(!available().contains("v010-adapter"));
    }

    #[test]
    fn samples_not_built_in_name_the_feature() {
        let err = check("differ");
        if cfg!(feature = "samples") {
            assert!(err.is_ok(), "{err:?}");
        } else {
            let err = err.unwrap_err();
            assert!(
                err.starts_with("sample plugin `differ` needs nri-sim's `samples` feature"),
                "{err}"
            );
            assert!(err.contains("--features samples"), "{err}");
        }
        assert!(check("ulimit-adjuster").is_ok());
    }

    #[cfg(feature = "samples")]
    #[test]
    fn sample_arguments_are_checked() {
        let run = SampleRun {
            sample: "template".into(),
            name: "template".into(),
            index: "50".into(),
            config: String::new(),
            config_from: None,
            args: vec!["-bogus".into()],
        };
        let err = parse_args::<nri_plugin_template::cli::Args>("nri-template", &run).unwrap_err();
        assert!(err.contains("bad arguments"), "{err}");
        let run = SampleRun {
            sample: "rdt".into(),
            args: vec!["-x".into()],
            ..run
        };
        assert!(no_args(&run).unwrap_err().contains("no arguments"));
    }
}
