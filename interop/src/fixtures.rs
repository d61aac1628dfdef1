//! Test fixtures shared by the integration tests of several crates: a
//! shared string log, minimal pods and containers, nri-stub plugins on a
//! socket, a plugin that records the trace context of its events, and an
//! in-memory tracing subscriber.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nri_api::{
    Container, ContainerUpdate, EventMask, PodSandbox, ValidateContainerAdjustmentRequest,
};
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, HandlerResult, Plugin, Stub};

/// A shared list of strings plugins append to.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<String>>>);

impl Log {
    /// Appends `s`.
    pub fn push(&self, s: impl Into<String>) {
        self.lock().push(s.into());
    }

    /// Everything so far, leaving the log empty.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lock())
    }

    /// Everything so far.
    pub fn get(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// How many times `entry` was appended.
    pub fn count(&self, entry: &str) -> usize {
        self.lock().iter().filter(|e| *e == entry).count()
    }

    /// Whether `entry` was appended.
    pub fn has(&self, entry: &str) -> bool {
        self.count(entry) > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pod `id` named `<id>-name`.
pub fn pod(id: &str) -> PodSandbox {
    PodSandbox {
        id: id.into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

/// A container `id` of pod `pod`, named `<id>-name`.
pub fn container(id: &str, pod: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: pod.into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

/// A stub for `plugin`, `<idx>-<name>`, that connects to `socket`.
///
/// # Panics
/// If the stub cannot be built from these options.
pub fn stub_on<P: Plugin>(plugin: P, name: &str, idx: &str, socket: &Path) -> Stub {
    Stub::builder(plugin)
        .name(name)
        .index(idx)
        .socket_path(socket)
        .build()
        .expect("stub options")
}

/// Event name and trace context, per event a [`Traced`] plugin received.
pub type Seen = Vec<(String, Option<nri_stub::TraceContext>)>;

/// A plugin that records the trace context of the events it subscribes to,
/// among CreateContainer, StartContainer, StopContainer, RemoveContainer and
/// ValidateContainerAdjustment.
#[derive(Clone)]
pub struct Traced {
    seen: Arc<Mutex<Seen>>,
    events: EventMask,
}

impl Traced {
    /// A plugin subscribed to `events`.
    pub fn new(events: EventMask) -> Self {
        Traced {
            seen: Arc::default(),
            events,
        }
    }

    /// What it recorded so far, leaving the record empty.
    pub fn take(&self) -> Seen {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, event: &str, ctx: &Context) {
        let trace = ctx.trace_context().cloned();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.push((event.to_string(), trace));
    }
}

#[nri_stub::plugin]
impl Plugin for Traced {
    async fn configure(&self, _ctx: &Context, _info: &ConfigureInfo) -> HandlerResult<EventMask> {
        Ok(self.events)
    }
    async fn create_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        self.push("CreateContainer", ctx);
        Ok(CreateContainerResult::default())
    }
    async fn start_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<()> {
        self.push("StartContainer", ctx);
        Ok(())
    }
    async fn stop_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.push("StopContainer", ctx);
        Ok(Vec::new())
    }
    async fn remove_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<()> {
        self.push("RemoveContainer", ctx);
        Ok(())
    }
    async fn validate_container_adjustment(
        &self,
        ctx: &Context,
        _req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        self.push("ValidateContainerAdjustment", ctx);
        Ok(())
    }
}

/// What a tracing subscriber wrote, kept in memory.
#[derive(Clone, Default)]
pub struct CapturedLines(Arc<Mutex<Vec<u8>>>);

impl CapturedLines {
    /// A plain-text subscriber (no colours, a line for each closed span)
    /// writing here.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .finish()
    }

    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for CapturedLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
