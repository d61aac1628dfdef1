//! Runs a scenario: sets up the simulated runtime (integration layer on the
//! adaptation, the scenario's plugins, the world of pods and containers),
//! executes the steps and builds the [`Report`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{BuiltinPlugin, CreateResult, PluginKind};
use nri_api::{CreateContainerRequest, CreateContainerResponse, Event, Field};
use nri_integration::{Config, Nri};
use tokio::time::Instant;

use crate::checks;
use crate::observe::{Call, LogCapture, Recorder};
use crate::plugins::launch::{self, LaunchError, PluginDirs};
use crate::plugins::scripted::ScriptedPlugin;
use crate::plugins::DEFAULT_INDEX;
use crate::report::*;
use crate::samples::{self, SampleRun};
use crate::scenario::{Action, Scenario, Step};
use crate::world::{Ctr, CtrState, Pod, PodState, World};

/// Why the simulated runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The scenario cannot be set up (bad spec file, bad plugin).
    #[error("{0}")]
    Scenario(String),
    /// A plugin program cannot be prepared.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// NRI did not start.
    #[error("{0}")]
    Start(String),
    /// A plugin did not start.
    #[error("plugin {plugin} failed to start: {error}{}", stderr_block(.stderr))]
    PluginStart {
        /// `NN-name`.
        plugin: String,
        /// Why.
        error: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// A sample plugin did not start or register.
    #[error(transparent)]
    Sample(#[from] samples::SampleError),
    /// External plugins did not connect.
    #[error("external plugin(s) {plugins} did not connect to {} within {timeout:?}", .socket.display())]
    ExternalTimeout {
        /// Their names.
        plugins: String,
        /// The socket.
        socket: PathBuf,
        /// How long we waited.
        timeout: Duration,
    },
}

/// How many lines of a launched plugin's standard error reports show.
const STDERR_LINES: usize = 20;

/// The states in which a container can be updated, stopped or exit.
const LIVE: &[CtrState] = &[CtrState::Created, CtrState::Running];

fn stderr_block(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        "\n  (the plugin wrote nothing to stderr)".into()
    } else {
        let indented: Vec<String> = stderr.lines().map(|l| format!("  | {l}")).collect();
        format!("\n  plugin stderr:\n{}", indented.join("\n"))
    }
}

/// A running simulation.
pub struct Sim {
    scenario: Scenario,
    nri: Nri,
    world: Arc<World>,
    recorder: Arc<Recorder>,
    logs: LogCapture,
    dirs: PluginDirs,
    /// Socket for external plugins, if enabled.
    pub socket: Option<PathBuf>,
    _socket_dir: Option<tempfile::TempDir>,
    request_timeout: Duration,
    step_timeout: Duration,
    consumed: usize,
    steps: Vec<StepReport>,
    /// Sample plugins to run in-process.
    samples: Vec<SampleRun>,
    /// The running sample plugins.
    sample_tasks: Vec<samples::Running>,
    /// Full names of the sample plugins.
    sample_names: BTreeSet<String>,
    /// The socket the runtime listens on (external and sample plugins).
    listen: PathBuf,
    /// Launched plugins already reported gone.
    gone: BTreeSet<String>,
    /// Evicted containers (ids) the runtime already stopped.
    evict_stopped: BTreeSet<String>,
    registration_timeout: Duration,
    /// The plugins after start-up.
    started: Vec<PluginReport>,
}

/// How the simulator announces progress (plugins starting, waiting).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

impl Sim {
    /// Prepares everything; nothing runs yet.
    pub fn new(scenario: Scenario, logs: LogCapture) -> Result<Sim, SetupError> {
        Sim::with_metrics(scenario, logs, None)
    }

    /// Like [`Sim::new`], with `metrics` receiving every measurement of
    /// plugin calls too (besides the simulator's own recorder).
    pub fn with_metrics(
        scenario: Scenario,
        logs: LogCapture,
        metrics: Option<Arc<dyn nri_adaptation::Metrics>>,
    ) -> Result<Sim, SetupError> {
        let world = Arc::new(World::default());
        let mut ids = BTreeMap::new();
        let mut pod_uids = BTreeMap::new();
        for p in &scenario.pods {
            let pod = crate::spec::pod(p);
            pod_uids.insert(p.name.clone(), (pod.id.clone(), pod.uid.clone()));
            world.add_pod(Pod {
                pod,
                state: if p.existing {
                    PodState::Ready
                } else {
                    PodState::Defined
                },
            });
        }
        for c in &scenario.containers {
            let pod_name = c
                .pod
                .clone()
                .or_else(|| scenario.pods.first().map(|p| p.name.clone()))
                .unwrap_or_default();
            let (pod_id, uid) = pod_uids.get(&pod_name).cloned().unwrap_or_default();
            let base = crate::spec::base_spec(c, &uid, &scenario.base_dir)
                .map_err(SetupError::Scenario)?;
            let id = c.id.clone().unwrap_or_else(|| c.name.clone());
            ids.insert(c.name.clone(), id.clone());
            world.add_ctr(Ctr {
                name: c.name.clone(),
                id,
                pod_id,
                labels: c.labels.clone(),
                spec: base.clone(),
                base,
                state: if c.existing {
                    CtrState::Running
                } else {
                    CtrState::Defined
                },
                exit_code: 0,
                evicted: None,
            });
        }

        let mut builtin: Vec<Arc<dyn BuiltinPlugin>> = Vec::new();
        for p in &scenario.plugins {
            if let Some(b) = &p.builtin {
                let idx = p.index.as_deref().unwrap_or(DEFAULT_INDEX);
                let plugin = ScriptedPlugin::new(&p.name, idx, b.clone(), ids.clone())
                    .map_err(|e| SetupError::Scenario(format!("plugin {idx}-{}: {e}", p.name)))?;
                builtin.push(Arc::new(plugin));
            }
        }
        let dirs = launch::prepare(&scenario)?;
        let mut sample_runs = Vec::new();
        for (i, p) in scenario.plugins.iter().enumerate() {
            if let Some(sample) = &p.sample {
                let index = p.index.clone().unwrap_or_else(|| DEFAULT_INDEX.into());
                let bad = |message: String| samples::SampleError {
                    sample: sample.0.clone(),
                    name: p.name.clone(),
                    message,
                };
                let args = p
                    .args
                    .iter()
                    .map(|a| launch::expand(a))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(bad)?;
                sample_runs.push(SampleRun {
                    sample: sample.0.clone(),
                    name: p.name.clone(),
                    index,
                    config: match &p.config {
                        None => String::new(),
                        Some(serde_json::Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                    },
                    config_from: p
                        .config
                        .as_ref()
                        .filter(|c| !c.is_string())
                        .map(|_| format!("plugins[{i}] of {}", scenario.origin)),
                    args,
                });
            }
        }

        let (socket, socket_dir) = match &scenario.socket {
            Some(s) => (Some(scenario.base_dir.join(s)), None),
            None => {
                let d = tempfile::Builder::new()
                    .prefix("nri-sim-sock-")
                    .tempdir()
                    .map_err(|e| {
                        SetupError::Start(format!("cannot create a temporary directory: {e}"))
                    })?;
                (None, Some(d))
            }
        };
        let t = &scenario.timeouts;
        let request_timeout = t
            .request
            .unwrap_or(nri_api::plugin::DEFAULT_REQUEST_TIMEOUT);
        let registration_timeout = t
            .registration
            .unwrap_or(nri_api::plugin::DEFAULT_REGISTRATION_TIMEOUT);
        let plugin_count = scenario.plugins.len() + dirs.launched.len() + 2;
        let step_timeout = t.step.unwrap_or_else(|| {
            request_timeout * u32::try_from(plugin_count).unwrap_or(64).min(64)
                + Duration::from_secs(5)
        });
        let config = Config {
            enable: true,
            plugin_path: dirs.plugin_dir.clone(),
            plugin_config_path: dirs.config_dir.clone(),
            socket_path: socket.clone().unwrap_or_else(|| {
                socket_dir
                    .as_ref()
                    .map(|d| d.path().join("nri.sock"))
                    .unwrap_or_default()
            }),
            disable_connections: socket.is_none() && sample_runs.is_empty(),
            registration_timeout,
            request_timeout,
            busy_poll: None,
            default_validator: scenario.default_validator.clone(),
            policy_validator: None,
            // The socket's mode and allow-lists: nri-integration's defaults.
            ..Config::default()
        };
        let listen = config.socket_path.clone();
        let recorder = Arc::new(Recorder::default());
        let nri = Nri::builder(config)
            .runtime(
                scenario.runtime.name.clone(),
                scenario.runtime.version.clone(),
            )
            .builtin_plugins(builtin)
            .metrics(recorder.clone());
        let nri = match metrics {
            Some(m) => nri.metrics(m),
            None => nri,
        }
        .build();
        nri.register_domain(world.clone())
            .map_err(|e| SetupError::Start(e.to_string()))?;
        Ok(Sim {
            scenario,
            nri,
            world,
            recorder,
            logs,
            dirs,
            socket,
            _socket_dir: socket_dir,
            request_timeout,
            step_timeout,
            consumed: 0,
            steps: Vec::new(),
            started: Vec::new(),
            samples: sample_runs,
            sample_tasks: Vec::new(),
            sample_names: BTreeSet::new(),
            listen,
            gone: BTreeSet::new(),
            evict_stopped: BTreeSet::new(),
            registration_timeout,
        })
    }

    /// Starts NRI and waits for every declared plugin.
    pub async fn start(&mut self, say: &Say) -> Result<(), SetupError> {
        let launched: Vec<String> = self.dirs.launched.keys().cloned().collect();
        let builtin = self
            .scenario
            .plugins
            .iter()
            .filter(|p| p.builtin.is_some())
            .count();
        say(&format!(
            "starting NRI: {builtin} builtin plugin(s), {} launched plugin(s), {} sample plugin(s){}",
            launched.len(),
            self.samples.len(),
            if self
                .scenario
                .default_validator
                .as_ref()
                .is_some_and(|v| v.enable)
            {
                ", default validator"
            } else {
                ""
            }
        ));
        self.nri
            .start()
            .await
            .map_err(|e| SetupError::Start(e.to_string()))?;
        let running = self.running();
        for name in &launched {
            if !running.contains(name) {
                let error = self
                    .logs
                    .last_error(name)
                    .unwrap_or_else(|| "it did not register".into());
                let error = if error.contains("timed out") {
                    format!("{error} (it did not register within the registration timeout)")
                } else {
                    error
                };
                return Err(SetupError::PluginStart {
                    plugin: name.clone(),
                    error,
                    stderr: self.dirs.stderr_tail(name, STDERR_LINES),
                });
            }
        }
        if !self.samples.is_empty() {
            for run in &self.samples {
                let running = samples::start(run, &self.listen)?;
                self.sample_names.extend(running.full_names.iter().cloned());
                self.sample_tasks.push(running);
            }
            let deadline = Instant::now() + self.registration_timeout;
            loop {
                let now = self.running();
                let late = Instant::now() >= deadline;
                for running in &mut self.sample_tasks {
                    let missing = running.full_names.iter().find(|n| !now.contains(n));
                    let Some(name) = missing.cloned() else {
                        continue;
                    };
                    let why = match running.ended().await {
                        Some(e) => Some(format!("it stopped before registering: {e}")),
                        None if late => Some(format!(
                            "it did not register within {:?}",
                            self.registration_timeout
                        )),
                        None => None,
                    };
                    if let Some(message) = why {
                        return Err(SetupError::Sample(samples::SampleError {
                            sample: running.sample.clone(),
                            name,
                            message,
                        }));
                    }
                }
                if self.sample_names.iter().all(|n| now.contains(n)) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            drop(self.nri.block_plugin_sync().await);
        }
        let external: Vec<String> = self
            .scenario
            .plugins
            .iter()
            .filter(|p| p.external)
            .map(|p| p.name.clone())
            .collect();
        if let (false, Some(socket)) = (external.is_empty(), &self.socket) {
            let timeout = self
                .scenario
                .timeouts
                .external
                .unwrap_or(Duration::from_secs(30));
            say(&format!(
                "waiting up to {timeout:?} for external plugin(s) {} on {}",
                external.join(", "),
                socket.display()
            ));
            let deadline = Instant::now() + timeout;
            loop {
                let missing: Vec<&String> = external
                    .iter()
                    .filter(|n| {
                        !self
                            .nri
                            .plugins()
                            .iter()
                            .any(|p| &p.name == *n && p.kind == PluginKind::External)
                    })
                    .collect();
                if missing.is_empty() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(SetupError::ExternalTimeout {
                        plugins: missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        socket: socket.clone(),
                        timeout,
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // Let a plugin that is still synchronizing finish.
            drop(self.nri.block_plugin_sync().await);
        }
        self.started = self.plugins();
        let names: Vec<String> = self.started.iter().map(|p| p.name.clone()).collect();
        say(&if names.is_empty() {
            "no plugins yet".to_string()
        } else {
            format!("plugins ready: {}", names.join(", "))
        });
        Ok(())
    }

    /// The running plugins.
    pub fn plugins(&self) -> Vec<PluginReport> {
        self.nri
            .plugins()
            .into_iter()
            .map(|p| PluginReport {
                name: format!("{}-{}", p.index, p.name),
                kind: if self
                    .sample_names
                    .contains(&format!("{}-{}", p.index, p.name))
                {
                    "sample"
                } else if self
                    .dirs
                    .launched
                    .get(&format!("{}-{}", p.index, p.name))
                    .is_some_and(launch::Launched::is_wasm)
                {
                    "wasm"
                } else {
                    match p.kind {
                        PluginKind::Builtin => "builtin",
                        PluginKind::External => "external",
                        PluginKind::Launched => "launched",
                    }
                }
                .into(),
                events: p.events.events().map(|e| e.pretty_name()).collect(),
                disconnected: false,
            })
            .collect()
    }

    /// Runs every step of the scenario.
    pub async fn run_all(&mut self, say: &Say) {
        let steps = self.scenario.steps.clone();
        for (i, step) in steps.iter().enumerate() {
            say(&format!("step {}: {}", i + 1, step.action));
            let report = self.run_step(i + 1, step).await;
            self.steps.push(report);
        }
    }

    /// Runs one step and records its report.
    pub async fn step(&mut self, step: &Step) -> StepReport {
        let report = self.run_step(self.steps.len() + 1, step).await;
        self.steps.push(report.clone());
        report
    }

    /// Defines a container on the fly (interactive use), with the default
    /// spec, in pod `pod` (defined on the fly too).
    pub fn ensure_container(&self, name: &str, pod: &str) {
        if self.world.pod(pod).is_none() {
            let spec = crate::scenario::PodSpec {
                name: pod.into(),
                ..Default::default()
            };
            self.world.add_pod(Pod {
                pod: crate::spec::pod(&spec),
                state: PodState::Defined,
            });
        }
        if self.world.ctr(name).is_none() {
            let p = self.world.pod(pod).map(|p| p.pod).unwrap_or_default();
            let base = crate::spec::default_spec(name, &p.uid);
            self.world.add_ctr(Ctr {
                name: name.into(),
                id: name.into(),
                pod_id: p.id,
                labels: BTreeMap::new(),
                spec: base.clone(),
                base,
                state: CtrState::Defined,
                exit_code: 0,
                evicted: None,
            });
        }
    }

    /// Defines a pod on the fly (interactive use).
    pub fn ensure_pod(&self, name: &str) {
        if self.world.pod(name).is_none() {
            let spec = crate::scenario::PodSpec {
                name: name.into(),
                ..Default::default()
            };
            self.world.add_pod(Pod {
                pod: crate::spec::pod(&spec),
                state: PodState::Defined,
            });
        }
    }

    /// The report of container `name` now.
    pub fn container_report(&self, name: &str) -> Option<ContainerReport> {
        self.world.ctr(name).map(|c| self.ctr_report(&c))
    }

    fn ctr_report(&self, c: &Ctr) -> ContainerReport {
        ContainerReport {
            name: c.name.clone(),
            id: c.id.clone(),
            pod: self
                .world
                .pod_by_id(&c.pod_id)
                .map_or_else(|| c.pod_id.clone(), |p| p.pod.name),
            state: c.state.as_str().into(),
            evicted: c.evicted.clone(),
            diff: crate::diff::diff(&c.base, &c.spec),
            base_spec: c.base.clone(),
            spec: c.spec.clone(),
        }
    }

    /// Stops NRI and builds the report.
    pub async fn finish(mut self) -> Report {
        // Evictions that came after the last step: stop those containers too.
        let mut end = StepReport::default();
        let _ = tokio::time::timeout(self.step_timeout, self.stop_evicted(&mut end)).await;
        let now: Vec<String> = self.plugins().into_iter().map(|p| p.name).collect();
        let mut plugins = self.started.clone();
        for p in &mut plugins {
            p.disconnected = !now.contains(&p.name);
        }
        for p in self.plugins() {
            if !plugins.iter().any(|q| q.name == p.name) {
                plugins.push(p);
            }
        }
        let gone_at_end: Vec<String> = self
            .started
            .iter()
            .filter(|p| p.kind == "launched" && !now.contains(&p.name))
            .filter(|p| !self.gone.contains(&p.name))
            .map(|p| p.name.clone())
            .collect();
        self.nri.stop().await;
        for t in &self.sample_tasks {
            t.abort();
        }
        let mut failures = Vec::new();
        for name in &gone_at_end {
            failures.push(format!(
                "plugin {name} was found gone at the end of the run: its process exited or closed the connection{}",
                stderr_block(&self.dirs.stderr_tail(name, STDERR_LINES))
            ));
        }
        for s in &self.steps {
            if let (Some(e), false) = (&s.error, s.passed) {
                // A plugin's failure that is the step's error is listed once,
                // as the plugin's failure below (which names the plugin).
                let a_plugin_failure = s
                    .plugin_failures
                    .iter()
                    .any(|f| !f.expected && !f.error.is_empty() && e.contains(&f.error));
                if !a_plugin_failure
                    && !s
                        .checks
                        .iter()
                        .any(|c| c.check.contains("fails with an error"))
                {
                    failures.push(format!(
                        "step {} ({} {}): unexpected error: {e}",
                        s.index,
                        s.action,
                        s.target.as_deref().unwrap_or("")
                    ));
                }
            }
            for f in s.plugin_failures.iter().filter(|f| !f.expected) {
                failures.push(format!(
                    "step {} ({} {}): {}{}",
                    s.index,
                    s.action,
                    s.target.as_deref().unwrap_or(""),
                    describe_failure(f, self.request_timeout),
                    f.stderr.as_deref().map(stderr_block).unwrap_or_default()
                ));
            }
            for c in s.checks.iter().filter(|c| !c.ok) {
                failures.push(format!(
                    "step {} ({} {}): expected {}, found {}",
                    s.index,
                    s.action,
                    s.target.as_deref().unwrap_or(""),
                    c.check,
                    c.found.as_deref().unwrap_or("?")
                ));
            }
        }
        let mut checks = Vec::new();
        for (name, e) in &self.scenario.expect {
            if let Some(c) = self.world.ctr(name) {
                checks.extend(checks::spec_checks(e, name, &c.spec, c.state.as_str()));
            }
        }
        for c in checks.iter().filter(|c| !c.ok) {
            failures.push(format!(
                "final state: expected {}, found {}",
                c.check,
                c.found.as_deref().unwrap_or("?")
            ));
        }
        let containers = self
            .world
            .ctrs()
            .iter()
            .map(|c| self.ctr_report(c))
            .collect();
        let unsolicited = self
            .world
            .unsolicited()
            .iter()
            .map(|a| self.applied(a))
            .collect();
        Report {
            schema: SCHEMA,
            scenario: self.scenario.origin.clone(),
            description: self.scenario.description.clone(),
            runtime: RuntimeInfo {
                name: self.scenario.runtime.name.clone(),
                version: self.scenario.runtime.version.clone(),
            },
            plugins,
            steps: std::mem::take(&mut self.steps),
            unsolicited,
            containers,
            checks,
            passed: failures.is_empty(),
            failures,
        }
    }

    /// The full names (`index-name`) of the registered plugins.
    fn running(&self) -> Vec<String> {
        self.nri
            .plugins()
            .iter()
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect()
    }

    /// Plugins subscribed to `event`.
    fn subscribed(&self, event: Event) -> Vec<String> {
        self.nri
            .plugins()
            .iter()
            .filter(|p| p.events.is_set(event))
            .map(|p| format!("{}-{}", p.index, p.name))
            .collect()
    }

    async fn run_step(&mut self, index: usize, step: &Step) -> StepReport {
        let mut r = StepReport {
            index,
            action: step.action.keyword().into(),
            target: step.action.target().map(String::from),
            ok: true,
            ..Default::default()
        };
        let call_mark = self.recorder.len();
        let applied_mark = self.world.applied_len();
        let lifecycle = !matches!(step.action, Action::WaitUpdate { .. } | Action::Sleep(_));
        self.world.set_in_step(lifecycle);
        let timeout = step.timeout.unwrap_or(self.step_timeout);
        let mut create_req = None;
        let outcome = tokio::time::timeout(timeout, self.act(step, &mut r, &mut create_req)).await;
        // Containers plugins evicted (in this step or on their own before
        // it) are stopped by the runtime: StopContainer reaches the plugins.
        if tokio::time::timeout(timeout, self.stop_evicted(&mut r))
            .await
            .is_err()
        {
            r.notes.push(format!(
                "stopping evicted containers timed out after {timeout:?}"
            ));
        }
        self.world.set_in_step(false);
        let calls = self.recorder.since(call_mark);
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err((kind, msg))) => {
                r.ok = false;
                r.error = Some(msg);
                r.error_kind = Some(kind.into());
            }
            Err(_) => {
                let event = step_event(&step.action);
                let pending: Vec<String> = event
                    .map(|e| self.subscribed(e))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !calls.iter().any(|c| &c.plugin == p))
                    .collect();
                r.ok = false;
                r.error_kind = Some("timeout".into());
                r.error = Some(format!(
                    "step {index} ({}) timed out after {timeout:?}{}",
                    step.action,
                    if pending.is_empty() {
                        String::new()
                    } else {
                        format!(", waiting for plugin(s) {}", pending.join(", "))
                    }
                ));
            }
        }

        let running = self.running();
        let expect = step.expect.clone().unwrap_or_default();
        for c in calls.iter().filter(|c| c.error.is_some()) {
            let error = c.error.clone().unwrap_or_default();
            let caused_step_error = r.error.as_deref().is_some_and(|e| e.contains(&error));
            r.plugin_failures.push(PluginFailure {
                plugin: c.plugin.clone(),
                event: c.event.clone(),
                timed_out: error.contains("deadline exceeded") || error.contains("timed out"),
                disconnected: !running.contains(&c.plugin),
                expected: expect
                    .plugin_failures
                    .iter()
                    .any(|p| checks::plugin_matches(&c.plugin, p))
                    || (caused_step_error && expect.error.is_some()),
                error,
                stderr: None,
            });
        }
        // Launched plugins that are gone: show the end of their stderr.
        let gone: Vec<String> = self
            .started
            .iter()
            .filter(|p| p.kind == "launched" && !running.contains(&p.name))
            .filter(|p| !self.gone.contains(&p.name))
            .map(|p| p.name.clone())
            .collect();
        for name in gone {
            self.gone.insert(name.clone());
            let stderr = Some(self.dirs.stderr_tail(&name, STDERR_LINES));
            if let Some(f) = r.plugin_failures.iter_mut().find(|f| f.plugin == name) {
                f.stderr = stderr;
                f.disconnected = true;
            } else {
                r.plugin_failures.push(PluginFailure {
                    plugin: name.clone(),
                    event: "(gone)".into(),
                    error: format!(
                        "was found gone at step {index} ({}): its process exited or closed the connection",
                        step.action
                    ),
                    timed_out: false,
                    disconnected: true,
                    expected: expect
                        .plugin_failures
                        .iter()
                        .any(|p| checks::plugin_matches(&name, p)),
                    stderr,
                });
            }
        }
        r.calls = calls
            .iter()
            .map(|c| CallReport {
                plugin: c.plugin.clone(),
                event: c.event.clone(),
                error: c.error.clone(),
                updates: c.updates,
                evictions: c.evictions,
            })
            .collect();
        if let Some(req) = create_req {
            r.changes = ownership(req, &calls);
            let validators: Vec<String> = calls
                .iter()
                .filter(|c| c.event == "ValidateContainerAdjustment")
                .map(|c| c.plugin.clone())
                .collect();
            if !validators.is_empty() || r.error_kind.as_deref() == Some("validation") {
                let rejected = r.error_kind.as_deref() == Some("validation");
                r.validation = Some(ValidationReport {
                    validators,
                    verdict: if rejected { "rejected" } else { "accepted" }.into(),
                    rejected_by: if rejected {
                        r.error.as_deref().and_then(rejected_by)
                    } else {
                        None
                    },
                    reason: if rejected { r.error.clone() } else { None },
                });
            }
        }
        r.updates = self
            .world
            .applied_since(applied_mark)
            .iter()
            .filter(|a| !a.unsolicited || !lifecycle)
            .map(|a| self.applied(a))
            .collect();

        r.checks = checks::step_checks(&expect, &r);
        if let Some(name) = step
            .action
            .is_container()
            .then(|| step.action.target())
            .flatten()
        {
            if let Some(c) = self.world.ctr(name) {
                r.checks.extend(checks::spec_checks(
                    &expect,
                    name,
                    &c.spec,
                    c.state.as_str(),
                ));
            }
        }
        let error_ok = r.error.is_none() || expect.error.is_some();
        r.passed = error_ok
            && r.checks.iter().all(|c| c.ok)
            && r.plugin_failures.iter().all(|f| f.expected);
        r
    }

    /// Performs the step's action. Errors are `(kind, message)`.
    async fn act(
        &mut self,
        step: &Step,
        r: &mut StepReport,
        create_req: &mut Option<CreateContainerRequest>,
    ) -> Result<(), (&'static str, String)> {
        let runtime = |m: String| ("runtime", m);
        match &step.action {
            Action::RunPod(name) => {
                let pod = self.pod(name)?;
                if pod.state == PodState::Ready {
                    return Err(runtime(format!("pod {name} is already running")));
                }
                self.world.set_pod_state(name, PodState::Ready);
                self.nri.run_pod_sandbox(&pod.pod).await.map_err(classify)?;
            }
            Action::StopPod(name) => {
                let pod = self.running_pod(name)?;
                self.world.set_pod_state(name, PodState::Stopped);
                self.nri
                    .stop_pod_sandbox(&pod.pod)
                    .await
                    .map_err(classify)?;
            }
            Action::RemovePod(name) => {
                let pod = self.pod(name)?;
                if matches!(pod.state, PodState::Defined | PodState::Removed) {
                    return Err(runtime(format!("pod {name} does not exist (run it first)")));
                }
                self.world.set_pod_state(name, PodState::Removed);
                self.nri
                    .remove_pod_sandbox(&pod.pod)
                    .await
                    .map_err(classify)?;
            }
            Action::UpdatePod(name) => {
                let pod = self.running_pod(name)?;
                let res = step.resources.as_ref().map(crate::adjust::resources);
                let overhead = step.overhead.as_ref().map(crate::adjust::resources);
                r.resources = res.as_ref().and_then(|x| serde_json::to_value(x).ok());
                if let Some(o) = &overhead {
                    r.notes.push(format!(
                        "overhead: {}",
                        serde_json::to_value(o).map_or_else(|_| "?".into(), |v| v.to_string())
                    ));
                }
                self.nri
                    .update_pod_sandbox(&pod.pod, overhead.as_ref(), res.as_ref())
                    .await
                    .map_err(classify)?;
                self.nri
                    .post_update_pod_sandbox(&pod.pod)
                    .await
                    .map_err(classify)?;
            }
            Action::Create(name) => {
                let (pod, ctr) = self.ctr(name)?;
                if pod.state != PodState::Ready {
                    return Err(runtime(format!(
                        "pod {} is not running: add `- run_pod: {}` before creating {name}",
                        pod.pod.name, pod.pod.name
                    )));
                }
                if !matches!(ctr.state, CtrState::Defined | CtrState::Removed) {
                    return Err(runtime(format!(
                        "container {name} already exists ({})",
                        ctr.state.as_str()
                    )));
                }
                self.evict_stopped.remove(&ctr.id);
                self.world.with_ctr(name, |c| {
                    c.spec = c.base.clone();
                    c.state = CtrState::Created;
                    c.exit_code = 0;
                    c.evicted = None;
                });
                let nri_ctr = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                *create_req = Some(CreateContainerRequest {
                    pod: Some(pod.pod.clone()),
                    container: Some(nri_ctr.clone()),
                });
                let result = self.nri.create_container(&pod.pod, &nri_ctr).await;
                let failed = match result {
                    Err(e) => {
                        let err = classify(e);
                        let _ = self.nri.undo_create_container(&pod.pod, &nri_ctr).await;
                        r.notes.push("the runtime did not create the container and sent StopContainer/RemoveContainer to undo the creation".into());
                        self.world.with_ctr(name, |c| c.state = CtrState::Defined);
                        return Err(err);
                    }
                    Ok(adj) => {
                        if let Some(a) = &adj.adjust {
                            r.adjustment = serde_json::to_value(a).ok();
                            let mut spec = ctr.base.clone();
                            if let Err(e) = nri_oci::Generator::new(&mut spec)
                                .without_mount_propagation_check()
                                .adjust(a)
                            {
                                let _ = self.nri.undo_create_container(&pod.pod, &nri_ctr).await;
                                self.world.with_ctr(name, |c| c.state = CtrState::Defined);
                                return Err(runtime(format!(
                                    "the runtime could not apply the merged adjustment to the OCI spec: {e}"
                                )));
                            }
                            self.world.with_ctr(name, |c| c.spec = spec);
                        }
                        adj.failed
                    }
                };
                self.note_failed(r, &failed);
                let adjusted = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                self.nri
                    .post_create_container(&pod.pod, &adjusted)
                    .await
                    .map_err(classify)?;
            }
            Action::Start(name) => {
                let (pod, _) = self.ctr_in(name, &[CtrState::Created], "start")?;
                self.world.with_ctr(name, |c| c.state = CtrState::Running);
                let c = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                self.nri
                    .start_container(&pod.pod, &c)
                    .await
                    .map_err(classify)?;
                self.nri
                    .post_start_container(&pod.pod, &c)
                    .await
                    .map_err(classify)?;
            }
            Action::Update(name) => {
                let (pod, ctr) = self.ctr_in(name, LIVE, "be updated")?;
                let res = crate::adjust::resources(&step.resources.clone().unwrap_or_default());
                let c = ctr.nri();
                let ru = self
                    .nri
                    .update_container(&pod.pod, &c, Some(&res))
                    .await
                    .map_err(classify)?;
                if ru.adjusted {
                    r.notes
                        .push("plugins changed the requested resources".into());
                }
                if let Some(res) = &ru.resources {
                    r.resources = serde_json::to_value(res).ok();
                    let mut spec = ctr.spec.clone();
                    nri_oci::Generator::new(&mut spec)
                        .apply_resources(res)
                        .map_err(|e| {
                            runtime(format!("the runtime could not apply the resources: {e}"))
                        })?;
                    self.world.with_ctr(name, |c| c.spec = spec);
                }
                self.note_failed(r, &ru.failed);
                let c = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                self.nri
                    .post_update_container(&pod.pod, &c)
                    .await
                    .map_err(classify)?;
            }
            Action::Stop(name) => {
                let (pod, _) = self.ctr_in(name, LIVE, "be stopped")?;
                self.world.with_ctr(name, |c| c.state = CtrState::Stopped);
                let c = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                let failed = self
                    .nri
                    .stop_container(&pod.pod, &c)
                    .await
                    .map_err(classify)?;
                self.note_failed(r, &failed);
            }
            Action::Exit(name) => {
                let (pod, _) = self.ctr_in(name, LIVE, "exit")?;
                let code = step.exit_code;
                self.world.with_ctr(name, |c| {
                    c.state = CtrState::Stopped;
                    c.exit_code = code;
                });
                let c = self.world.ctr(name).map(|c| c.nri()).unwrap_or_default();
                let mark = self.recorder.len();
                let expected = self.subscribed(Event::StopContainer).len();
                self.nri.notify_container_exit(pod.pod.clone(), c);
                // Delivery is in the background: wait until every
                // subscribed plugin got its StopContainer.
                loop {
                    let stops = self
                        .recorder
                        .since(mark)
                        .iter()
                        .filter(|c| c.event == "StopContainer")
                        .count();
                    if self.nri.pending_exits() == 0 && stops >= expected {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                r.notes.push(format!(
                    "exit code {code}; plugins were told through StopContainer"
                ));
            }
            Action::Remove(name) => {
                let (pod, ctr) = self.ctr(name)?;
                if matches!(ctr.state, CtrState::Defined | CtrState::Removed) {
                    return Err(runtime(format!(
                        "container {name} does not exist (create it first)"
                    )));
                }
                self.world.with_ctr(name, |c| c.state = CtrState::Removed);
                let c = ctr.nri();
                self.nri
                    .remove_container(&pod.pod, &c)
                    .await
                    .map_err(classify)?;
            }
            Action::WaitUpdate { count } => {
                let timeout = step.timeout.unwrap_or(Duration::from_secs(10));
                let target = self.consumed + count;
                let got = self
                    .world
                    .wait_unsolicited(target, Instant::now() + timeout)
                    .await;
                let all = self.world.unsolicited();
                r.updates = all
                    .get(self.consumed..got.min(target).min(all.len()))
                    .unwrap_or_default()
                    .iter()
                    .map(|a| self.applied(a))
                    .collect();
                let before = self.consumed;
                self.consumed = got.min(target);
                if got < target {
                    return Err((
                        "timeout",
                        format!(
                            "no plugin-initiated update within {timeout:?}: got {} of {count}",
                            got - before
                        ),
                    ));
                }
            }
            Action::Sleep(d) => tokio::time::sleep(*d).await,
        }
        Ok(())
    }

    fn applied(&self, a: &crate::world::Applied) -> AppliedReport {
        let stopped =
            a.evicted.is_some() && a.error.is_none() && self.evict_stopped.contains(&a.container);
        applied_report(&self.world, a, stopped)
    }

    /// Stops the containers plugins evicted that the runtime did not stop
    /// yet: StopContainer reaches the plugins (their answers may evict more).
    async fn stop_evicted(&mut self, r: &mut StepReport) {
        loop {
            let pending: Vec<Ctr> = self
                .world
                .ctrs()
                .into_iter()
                .filter(|c| c.state == CtrState::Evicted && !self.evict_stopped.contains(&c.id))
                .collect();
            if pending.is_empty() {
                return;
            }
            for c in pending {
                self.evict_stopped.insert(c.id.clone());
                let Some(pod) = self.world.pod_by_id(&c.pod_id) else {
                    continue;
                };
                match self.nri.stop_container(&pod.pod, &c.nri()).await {
                    Ok(failed) => {
                        r.notes.push(format!(
                            "container {} was evicted ({}): the runtime stopped it (StopContainer)",
                            c.name,
                            c.evicted.as_deref().unwrap_or("")
                        ));
                        self.note_failed(r, &failed);
                    }
                    Err(e) => r.notes.push(format!(
                        "container {} was evicted; stopping it failed: {e}",
                        c.name
                    )),
                }
            }
        }
    }

    fn note_failed(&self, r: &mut StepReport, failed: &nri_integration::FailedUpdates) {
        for u in &failed.updates {
            r.notes.push(format!(
                "update of container {} failed",
                self.world.name_of(&u.container_id)
            ));
        }
        for e in &failed.evictions {
            r.notes.push(format!(
                "eviction of container {} failed",
                self.world.name_of(&e.container_id)
            ));
        }
    }

    fn pod(&self, name: &str) -> Result<Pod, (&'static str, String)> {
        self.world
            .pod(name)
            .ok_or_else(|| ("runtime", format!("unknown pod {name:?}")))
    }

    /// [`pod`](Self::pod), refused unless it is running.
    fn running_pod(&self, name: &str) -> Result<Pod, (&'static str, String)> {
        let pod = self.pod(name)?;
        if pod.state != PodState::Ready {
            return Err(("runtime", format!("pod {name} is not running")));
        }
        Ok(pod)
    }

    /// [`ctr`](Self::ctr), refused unless the container is in one of
    /// `states`: "container NAME cannot VERB: it is STATE".
    fn ctr_in(
        &self,
        name: &str,
        states: &[CtrState],
        verb: &str,
    ) -> Result<(Pod, Ctr), (&'static str, String)> {
        let (pod, ctr) = self.ctr(name)?;
        if !states.contains(&ctr.state) {
            return Err((
                "runtime",
                format!(
                    "container {name} cannot {verb}: it is {}",
                    ctr.state.as_str()
                ),
            ));
        }
        Ok((pod, ctr))
    }

    fn ctr(&self, name: &str) -> Result<(Pod, Ctr), (&'static str, String)> {
        let ctr = self
            .world
            .ctr(name)
            .ok_or_else(|| ("runtime", format!("unknown container {name:?}")))?;
        let pod = self
            .world
            .pod_by_id(&ctr.pod_id)
            .ok_or_else(|| ("runtime", format!("container {name:?} has no pod")))?;
        Ok((pod, ctr))
    }
}

fn step_event(a: &Action) -> Option<Event> {
    Some(match a {
        Action::RunPod(_) => Event::RunPodSandbox,
        Action::StopPod(_) => Event::StopPodSandbox,
        Action::RemovePod(_) => Event::RemovePodSandbox,
        Action::UpdatePod(_) => Event::UpdatePodSandbox,
        Action::Create(_) => Event::CreateContainer,
        Action::Start(_) => Event::StartContainer,
        Action::Update(_) => Event::UpdateContainer,
        Action::Stop(_) | Action::Exit(_) => Event::StopContainer,
        Action::Remove(_) => Event::RemoveContainer,
        Action::WaitUpdate { .. } | Action::Sleep(_) => return None,
    })
}

/// The kind and text of a lifecycle error.
fn classify(e: nri_integration::Error) -> (&'static str, String) {
    use nri_adaptation::Error as A;
    match &e {
        nri_integration::Error::Adaptation(a) => match a {
            A::Merge(_) => ("conflict", e.to_string()),
            A::ValidationRejected { .. } | A::ValidatorFailed { .. } => {
                ("validation", e.to_string())
            }
            A::Plugin { plugin, source } => {
                let kind = if source.is_fatal() {
                    "timeout"
                } else {
                    "plugin"
                };
                (kind, format!("plugin {plugin} failed: {source}"))
            }
            _ => ("runtime", e.to_string()),
        },
        _ => ("runtime", e.to_string()),
    }
}

fn rejected_by(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("validator \"")?;
    rest.split_once('"').map(|(p, _)| p.to_string())
}

fn applied_report(world: &World, a: &crate::world::Applied, stopped: bool) -> AppliedReport {
    AppliedReport {
        container: world.name_of(&a.container),
        kind: if a.update.is_some() {
            "update"
        } else {
            "eviction"
        }
        .into(),
        resources: a
            .update
            .as_ref()
            .and_then(|u| u.linux.as_ref())
            .and_then(|l| l.resources.as_ref())
            .and_then(|r| serde_json::to_value(r).ok()),
        reason: a.evicted.clone(),
        error: a.error.clone(),
        stopped,
    }
}

/// Who set which field: the merge replayed with the adjustments the
/// plugins answered (in call order).
fn ownership(req: CreateContainerRequest, calls: &[Call]) -> Vec<ChangeReport> {
    let id = req
        .container
        .as_ref()
        .map(|c| c.id.clone())
        .unwrap_or_default();
    let mut result = CreateResult::new(req);
    for c in calls
        .iter()
        .filter(|c| c.event == "CreateContainer" && c.error.is_none())
    {
        let reply = CreateContainerResponse {
            adjust: c.adjust.clone(),
            ..Default::default()
        };
        if result.apply(&c.plugin, reply).is_err() {
            break;
        }
    }
    let owners = result.owners().as_proto().clone();
    let Some(fo) = owners.owners.get(&id) else {
        return Vec::new();
    };
    let field_name = |f: i32| {
        Field::try_from(f).map_or_else(|_| format!("Field{f}"), |f| f.as_str_name().to_string())
    };
    let mut out: Vec<ChangeReport> = fo
        .simple
        .iter()
        .map(|(f, p)| ChangeReport {
            plugin: p.clone(),
            field: field_name(*f),
            key: None,
        })
        .collect();
    for (f, compound) in &fo.compound {
        for (k, p) in &compound.owners {
            out.push(ChangeReport {
                plugin: p.clone(),
                field: field_name(*f),
                key: Some(k.clone()),
            });
        }
    }
    out
}

/// A readable sentence about a failed plugin call.
pub fn describe_failure(f: &PluginFailure, request_timeout: Duration) -> String {
    if f.event == "(gone)" {
        format!("plugin {} {}", f.plugin, f.error)
    } else if f.timed_out {
        format!(
            "plugin {} did not answer {} within the request timeout ({request_timeout:?}){}",
            f.plugin,
            f.event,
            if f.disconnected {
                "; it was disconnected and the runtime went on without it"
            } else {
                ""
            }
        )
    } else {
        format!(
            "plugin {} failed {}: {}{}",
            f.plugin,
            f.event,
            f.error,
            if f.disconnected {
                " (disconnected)"
            } else {
                ""
            }
        )
    }
}
