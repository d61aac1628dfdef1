//! `nri-e2e-probe`: the plugin the end-to-end suites attach to a real runtime.
//!
//! It records every event it gets as one JSON line in `--record FILE`
//! (Synchronize with the ids of the pods and containers listed), and once a
//! container started whose pod has the annotation
//! `e2e.nri-rs.dev/cpu-shares.<container name>: N`, it asks the runtime, unsolicited,
//! to set that container's CPU shares to N, and records the outcome. With the
//! annotation `e2e.nri-rs.dev/evict.<container name>: REASON` it asks, the same
//! way, for the container's eviction.
//!
//! ```text
//! nri-e2e-probe --socket PATH --name NAME --idx NN --record FILE [--once]
//!               [--hang-create CONTAINER]
//! ```
//!
//! With `--hang-create`, CreateContainer of a container of that name never
//! returns (a hung plugin); the probe is not a validator either way.
//!
//! It stays connected across runtime restarts unless `--once` is given.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nri_stub::api::{Container, ContainerEviction, ContainerUpdate, PodSandbox};
use nri_stub::{Backoff, Context, CreateContainerResult, Plugin, Stub};
use serde_json::{json, Value};

const CPU_SHARES_ANNOTATION: &str = "e2e.nri-rs.dev/cpu-shares.";
const EVICT_ANNOTATION: &str = "e2e.nri-rs.dev/evict.";

#[derive(Clone)]
struct Probe {
    record: Arc<Mutex<std::fs::File>>,
    hang_create: Option<String>,
}

impl Probe {
    fn write(&self, line: Value) {
        let mut f = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = writeln!(f, "{line}") {
            eprintln!("nri-e2e-probe: write record: {e}");
        }
    }

    fn event(&self, event: &str, pod: &PodSandbox, ctr: Option<&Container>) {
        self.write(json!({
            "event": event,
            "pod": pod.id,
            "container": ctr.map(|c| c.id.clone()),
            "name": ctr.map(|c| c.name.clone()),
        }));
    }
}

#[nri_stub::plugin]
impl Plugin for Probe {
    async fn synchronize(
        &self,
        _ctx: &Context,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        let mut pod_ids: Vec<&str> = pods.iter().map(|p| p.id.as_str()).collect();
        let mut ctr_ids: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        pod_ids.sort_unstable();
        ctr_ids.sort_unstable();
        self.write(json!({"event": "Synchronize", "pods": pod_ids, "containers": ctr_ids}));
        Ok(Vec::new())
    }

    async fn run_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.event("RunPodSandbox", pod, None);
        Ok(())
    }

    async fn stop_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.event("StopPodSandbox", pod, None);
        Ok(())
    }

    async fn remove_pod_sandbox(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        self.event("RemovePodSandbox", pod, None);
        Ok(())
    }

    async fn create_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        self.event("CreateContainer", pod, Some(ctr));
        if self.hang_create.as_deref() == Some(ctr.name.as_str()) {
            std::future::pending::<()>().await;
        }
        Ok(CreateContainerResult::default())
    }

    async fn start_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.event("StartContainer", pod, Some(ctr));
        Ok(())
    }

    async fn post_start_container(
        &self,
        ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.event("PostStartContainer", pod, Some(ctr));
        let key = format!("{CPU_SHARES_ANNOTATION}{}", ctr.name);
        let mut updates = Vec::new();
        let mut shares = None;
        if let Some(value) = pod.annotations.get(&key) {
            let n: u64 = value
                .parse()
                .map_err(|e| format!("annotation {key}: {value:?}: {e}"))?;
            let mut update = ContainerUpdate::for_container(ctr.id.clone());
            update.set_linux_cpu_shares(n);
            updates.push(update);
            shares = Some(n);
        }
        let evictions: Vec<ContainerEviction> = pod
            .annotations
            .get(&format!("{EVICT_ANNOTATION}{}", ctr.name))
            .map(|reason| ContainerEviction {
                container_id: ctr.id.clone(),
                reason: reason.clone(),
            })
            .into_iter()
            .collect();
        if !updates.is_empty() || !evictions.is_empty() {
            let evicted = evictions.len();
            // Unsolicited: sent after the handler returned, as a plugin reacting
            // to something outside the runtime would.
            let handle = ctx.runtime_handle().clone();
            let probe = self.clone();
            let id = ctr.id.clone();
            tokio::spawn(async move {
                let result = handle.update_containers(updates, evictions).await;
                let (failed, error) = match result {
                    Ok(failed) => (failed.len(), String::new()),
                    Err(e) => (1, e.to_string()),
                };
                probe.write(json!({"event": "UpdateContainersResult", "container": id,
                                   "shares": shares, "evicted": evicted,
                                   "failed": failed, "error": error}));
            });
        }
        Ok(())
    }

    async fn stop_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        self.event("StopContainer", pod, Some(ctr));
        Ok(Vec::new())
    }

    async fn remove_container(
        &self,
        _ctx: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<()> {
        self.event("RemoveContainer", pod, Some(ctr));
        Ok(())
    }
}

struct Args {
    socket: Option<PathBuf>,
    name: String,
    idx: String,
    record: PathBuf,
    once: bool,
    hang_create: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        socket: None,
        name: "e2e-probe".into(),
        idx: "50".into(),
        record: PathBuf::from("nri-e2e-probe.jsonl"),
        once: false,
        hang_create: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--socket" => args.socket = Some(PathBuf::from(value("--socket")?)),
            "--name" => args.name = value("--name")?,
            "--idx" => args.idx = value("--idx")?,
            "--record" => args.record = PathBuf::from(value("--record")?),
            "--once" => args.once = true,
            "--hang-create" => args.hang_create = Some(value("--hang-create")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nri-e2e-probe: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let file = match OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.record)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("nri-e2e-probe: open {}: {e}", args.record.display());
            return std::process::ExitCode::from(1);
        }
    };
    let probe = Probe {
        record: Arc::new(Mutex::new(file)),
        hang_create: args.hang_create,
    };
    let mut builder = Stub::builder(probe).name(args.name).index(args.idx);
    if let Some(socket) = args.socket {
        builder = builder.socket_path(socket);
    }
    let stub = match builder.build() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nri-e2e-probe: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let result = if args.once {
        stub.run().await
    } else {
        stub.run_reconnecting(Backoff::default(), |n| {
            eprintln!("nri-e2e-probe: runtime gone, reconnect attempt {n}");
        })
        .await
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nri-e2e-probe: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
