//! Replaying a scenario on nri-adaptation: the runtime hooks (table,
//! recorder) and the step semantics of `nri-ref-runtime`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nri_adaptation::{Adaptation, BoxError, CreateResult, PluginKind, RuntimeHooks, Synchronizer};
use nri_api::gofmt::quote;
use nri_api::*;
use serde::Serialize;
use serde_json::{json, Value};

use crate::record::{Output, Recorder, StepResult, SyncRecord, UpdateCall};
use crate::scenario::{Scenario, Step};
use crate::strip;
use crate::table::Table;

/// Where the adaptation looks for plugins and listens.
#[derive(Debug, Default, Clone)]
pub struct Paths {
    pub socket: Option<PathBuf>,
    pub plugin_dir: Option<PathBuf>,
    pub config_dir: Option<PathBuf>,
}

/// The runtime's side: the table and the recorder.
struct Hooks {
    table: Arc<Table>,
    rec: Arc<Recorder>,
    fail: Arc<BTreeSet<String>>,
    /// Number of synchronization calls so far; the first is start-up's.
    calls: AtomicUsize,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Hooks {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let startup = self.calls.fetch_add(1, Ordering::SeqCst) == 0;
        let (pods, ctrs) = self.table.snapshot();
        let result = sync.synchronize(&pods, &ctrs).await;
        let mut rec = SyncRecord {
            pods: pods.len(),
            containers: ctrs.len(),
            updates: Vec::new(),
            failed: Vec::new(),
            error: String::new(),
        };
        match result {
            Ok(updates) => {
                rec.failed = self.table.apply_updates(&updates, &self.fail);
                rec.updates = updates;
                self.rec.add_sync(rec);
                // Start-up's plugins are counted once `start` returns.
                if !startup {
                    self.rec.synchronized(1);
                }
                Ok(())
            }
            Err(e) => {
                rec.error = e.to_string();
                self.rec.add_sync(rec);
                Err(e.into())
            }
        }
    }

    async fn update_containers(
        &self,
        _plugin: &str,
        updates: Vec<ContainerUpdate>,
        evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        let failed = self.table.apply_updates(&updates, &self.fail);
        self.rec.add_update_call(UpdateCall {
            updates,
            failed: failed.clone(),
            evict: evictions,
        });
        Ok(failed)
    }
}

struct Runner {
    table: Arc<Table>,
    fail: Arc<BTreeSet<String>>,
    rec: Arc<Recorder>,
    nri: Adaptation,
    strip: bool,
}

/// Runs the scenario and returns the output document.
pub async fn run(sc: &Scenario, paths: &Paths, strip: bool, rec: Arc<Recorder>) -> Output {
    let mut out = Output::default();
    let table = Arc::new(Table::new(sc));
    let fail: Arc<BTreeSet<String>> = Arc::new(sc.fail_updates.iter().cloned().collect());

    let tmp = if paths.plugin_dir.is_none() || paths.config_dir.is_none() {
        match tempfile::Builder::new()
            .prefix("nri-rs-ref-runtime-")
            .tempdir()
        {
            Ok(t) => Some(t),
            Err(e) => {
                out.error = e.to_string();
                return out;
            }
        }
    } else {
        None
    };
    let tmp_path = tmp.as_ref().map(|t| t.path().to_path_buf());
    let dir = |p: &Option<PathBuf>| -> PathBuf {
        p.clone()
            .or_else(|| tmp_path.clone())
            .unwrap_or_else(|| Path::new(".").to_path_buf())
    };

    let hooks = Arc::new(Hooks {
        table: table.clone(),
        rec: rec.clone(),
        fail: fail.clone(),
        calls: AtomicUsize::new(0),
    });
    let mut builder = Adaptation::builder(&sc.runtime.name, &sc.runtime.version, hooks)
        .plugin_path(dir(&paths.plugin_dir))
        .plugin_config_path(dir(&paths.config_dir));
    builder = match &paths.socket {
        Some(s) => builder.socket_path(s),
        None => builder.disable_external_connections(),
    };
    if sc.registration_timeout_ms > 0 {
        builder = builder.registration_timeout(ms(sc.registration_timeout_ms));
    }
    if sc.request_timeout_ms > 0 {
        builder = builder.request_timeout(ms(sc.request_timeout_ms));
    }
    let nri = builder.build();
    if let Err(e) = nri.start().await {
        out.error = format!("start: {e}");
        rec.fill(&mut out);
        return out;
    }
    // Pre-installed plugins were synchronized by start-up.
    let preinstalled = nri
        .plugins()
        .iter()
        .filter(|p| p.kind != PluginKind::External)
        .count();
    rec.synchronized(preinstalled);

    let runner = Runner {
        table,
        fail,
        rec: rec.clone(),
        nri,
        strip,
    };
    let mut stopped = false;
    for st in &sc.steps {
        if st.op == "stop" {
            stopped = true;
        }
        let (executed, trace_id, span_id) = if sc.trace {
            let parent = nri_adaptation::TraceContext::generate();
            let (trace_id, span_id) = (parent.trace_id_hex(), parent.span_id_hex());
            let executed = nri_adaptation::with_trace_parent(parent, runner.exec(st)).await;
            (executed, trace_id, span_id)
        } else {
            (runner.exec(st).await, String::new(), String::new())
        };
        let (result, error) = match executed {
            Ok(v) => (v, String::new()),
            Err(e) => (Value::Null, e),
        };
        out.steps.push(StepResult {
            op: st.op.clone(),
            pod: st.pod.clone(),
            container: st.container.clone(),
            trace_id,
            span_id,
            error,
            result,
        });
    }
    if !stopped {
        runner.nri.stop().await;
    }
    rec.fill(&mut out);
    drop(tmp);
    out
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

fn value<T: Serialize>(v: &T) -> Result<Value, String> {
    serde_json::to_value(v).map_err(|e| format!("encode result: {e}"))
}

impl Runner {
    /// The container of a step and its pod (the step's pod wins).
    fn container(&self, st: &Step) -> (PodSandbox, Container) {
        let (pod, ctr) = self.table.container(&st.container);
        if st.pod.is_empty() {
            (pod, ctr)
        } else {
            (self.table.pod(&st.pod), ctr)
        }
    }

    async fn exec(&self, st: &Step) -> Result<Value, String> {
        let nri = &self.nri;
        let err = |e: nri_adaptation::Error| e.to_string();
        match st.op.as_str() {
            "wait_plugins" => {
                self.rec
                    .wait_plugins(st.count, ms(st.timeout(10000)))
                    .await?;
                // The barrier: plugins synchronized so far are in the list.
                nri.block_plugin_sync().await.unblock();
                Ok(json!({ "synchronized": self.rec.synchronized_count() }))
            }
            "wait_updates" => {
                let n = self
                    .rec
                    .wait_updates(st.count, ms(st.timeout(5000)))
                    .await?;
                Ok(json!({ "update_calls": n }))
            }
            "sleep" => {
                if st.ms > 0 {
                    tokio::time::sleep(ms(st.ms)).await;
                }
                Ok(Value::Null)
            }
            "stop" => {
                nri.stop().await;
                Ok(Value::Null)
            }

            "RunPodSandbox" => {
                let pod = self.table.pod(&st.pod);
                nri.run_pod_sandbox(RunPodSandboxRequest {
                    pod: Some(pod.clone()),
                })
                .await
                .map_err(err)?;
                self.table.add_pod(pod);
                Ok(Value::Null)
            }
            "UpdatePodSandbox" => {
                let rpl = nri
                    .update_pod_sandbox(UpdatePodSandboxRequest {
                        pod: Some(self.table.pod(&st.pod)),
                        overhead_linux_resources: st.overhead_linux_resources.clone(),
                        linux_resources: st.linux_resources.clone(),
                    })
                    .await
                    .map_err(err)?;
                value(&rpl)
            }
            "PostUpdatePodSandbox" => {
                let pod = Some(self.table.pod(&st.pod));
                nri.post_update_pod_sandbox(PostUpdatePodSandboxRequest { pod })
                    .await
                    .map_err(err)?;
                Ok(Value::Null)
            }
            "StopPodSandbox" => {
                let pod = Some(self.table.pod(&st.pod));
                nri.stop_pod_sandbox(StopPodSandboxRequest { pod })
                    .await
                    .map_err(err)?;
                Ok(Value::Null)
            }
            "RemovePodSandbox" => {
                let pod = Some(self.table.pod(&st.pod));
                let res = nri
                    .remove_pod_sandbox(RemovePodSandboxRequest { pod })
                    .await;
                self.table.remove_pod(&st.pod);
                res.map_err(err)?;
                Ok(Value::Null)
            }

            "CreateContainer" => {
                let (pod, ctr) = self.container(st);
                let mut rpl = nri
                    .create_container(CreateContainerRequest {
                        pod: Some(pod.clone()),
                        container: Some(ctr.clone()),
                    })
                    .await
                    .map_err(err)?;
                let mut stored = adjusted(pod, ctr, rpl.adjust.clone());
                stored.state = ContainerState::ContainerCreated as i32;
                self.table.add_container(stored);
                self.table.apply_updates(&rpl.update, &self.fail);
                if self.strip {
                    rpl.adjust = strip::adjustment(rpl.adjust);
                    rpl.update = strip::updates(rpl.update);
                }
                value(&rpl)
            }
            "PostCreateContainer" => {
                let (pod, ctr) = self.container(st);
                nri.post_create_container(PostCreateContainerRequest {
                    pod: Some(pod),
                    container: Some(ctr),
                })
                .await
                .map_err(err)?;
                Ok(Value::Null)
            }
            "StartContainer" => {
                let (pod, ctr) = self.container(st);
                let id = ctr.id.clone();
                nri.start_container(StartContainerRequest {
                    pod: Some(pod),
                    container: Some(ctr),
                })
                .await
                .map_err(err)?;
                self.table.set_state(&id, ContainerState::ContainerRunning);
                Ok(Value::Null)
            }
            "PostStartContainer" => {
                let (pod, ctr) = self.container(st);
                nri.post_start_container(PostStartContainerRequest {
                    pod: Some(pod),
                    container: Some(ctr),
                })
                .await
                .map_err(err)?;
                Ok(Value::Null)
            }
            "UpdateContainer" => {
                let (pod, ctr) = self.container(st);
                let id = ctr.id.clone();
                let mut rpl = nri
                    .update_container(UpdateContainerRequest {
                        pod: Some(pod),
                        container: Some(ctr),
                        linux_resources: st.linux_resources.clone(),
                    })
                    .await
                    .map_err(err)?;
                // The Go adaptation fills in empty memory and CPU parts of the
                // request's resources in place, and the reference runner stores
                // that object; ours normalizes its own copy the same way.
                let stored = st.linux_resources.clone().map(|mut r| {
                    r.memory.get_or_insert_with(Default::default);
                    r.cpu.get_or_insert_with(Default::default);
                    r
                });
                self.table.set_resources(&id, stored.as_ref());
                self.table.apply_updates(&rpl.update, &self.fail);
                if self.strip {
                    rpl.update = strip::updates(rpl.update);
                }
                value(&rpl)
            }
            "PostUpdateContainer" => {
                let (pod, ctr) = self.container(st);
                nri.post_update_container(PostUpdateContainerRequest {
                    pod: Some(pod),
                    container: Some(ctr),
                })
                .await
                .map_err(err)?;
                Ok(Value::Null)
            }
            "StopContainer" => {
                let (pod, ctr) = self.container(st);
                let id = ctr.id.clone();
                let mut rpl = nri
                    .stop_container(StopContainerRequest {
                        pod: Some(pod),
                        container: Some(ctr),
                    })
                    .await
                    .map_err(err)?;
                self.table.set_state(&id, ContainerState::ContainerStopped);
                self.table.apply_updates(&rpl.update, &self.fail);
                if self.strip {
                    rpl.update = strip::updates(rpl.update);
                }
                value(&rpl)
            }
            "RemoveContainer" => {
                let (pod, ctr) = self.container(st);
                let id = ctr.id.clone();
                let res = nri
                    .remove_container(RemoveContainerRequest {
                        pod: Some(pod),
                        container: Some(ctr),
                    })
                    .await;
                self.table.remove_container(&id);
                res.map_err(err)?;
                Ok(Value::Null)
            }
            op => Err(format!("unknown op {}", quote(op))),
        }
    }
}

/// The container as the runtime stores it after creation: the request
/// container with the merged adjustment applied (the reference runner gets
/// the same from the Go adaptation, which adjusts its request in place).
fn adjusted(pod: PodSandbox, ctr: Container, adjust: Option<ContainerAdjustment>) -> Container {
    let mut result = CreateResult::new(CreateContainerRequest {
        pod: Some(pod),
        container: Some(ctr.clone()),
    });
    let reply = CreateContainerResponse {
        adjust,
        ..Default::default()
    };
    match result.apply("runtime", reply) {
        Ok(()) => result.request().container.clone().unwrap_or(ctr),
        Err(e) => {
            tracing::warn!(container = %ctr.id, error = %e,
                "cannot apply the merged adjustment to the stored container");
            ctr
        }
    }
}
