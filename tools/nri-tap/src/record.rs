//! From decoded messages to recording lines: payloads decoded to JSON with
//! the nri-api types, responses matched with their requests (method,
//! elapsed time), the plugin named from its registration, filters, and the
//! writer task.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use nri_api::service::{plugin as pm, runtime as rm};
use nri_mux::ConnId;
use nri_ttrpc::frame::{MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};
use prost::Message;
use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::decode::Item;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the plugin to the runtime.
    ToRuntime,
    /// From the runtime to the plugin.
    ToPlugin,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::ToRuntime => "plugin->runtime",
            Direction::ToPlugin => "runtime->plugin",
        }
    }
}

/// Which records to keep; every given criterion must match. Names match
/// either the id or the name of the pod or container; `plugin` the full
/// name (`10-logger`) or the base name (`logger`).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Plugin names.
    pub plugins: Vec<String>,
    /// Pod ids or names.
    pub pods: Vec<String>,
    /// Container ids or names.
    pub containers: Vec<String>,
    /// ttRPC methods (`CreateContainer`, `Synchronize`, ...).
    pub events: Vec<String>,
}

/// What a request named, kept for its response.
#[derive(Debug, Clone, Default)]
struct Subject {
    method: String,
    service: String,
    pods: Vec<String>,
    containers: Vec<String>,
}

impl Filter {
    /// Whether `plugin` passes the plugin criterion (an unknown plugin
    /// does not, once plugins are asked for).
    fn keeps_plugin(&self, plugin: Option<&str>) -> bool {
        self.plugins.is_empty()
            || plugin.is_some_and(|p| {
                self.plugins
                    .iter()
                    .any(|w| p == w || p.split_once('-').is_some_and(|(_, base)| base == w))
            })
    }

    fn keeps(&self, plugin: Option<&str>, s: &Subject) -> bool {
        let any = |want: &[String], have: &[String]| {
            want.is_empty() || want.iter().any(|w| have.iter().any(|h| h == w))
        };
        self.keeps_plugin(plugin)
            && any(&self.pods, &s.pods)
            && any(&self.containers, &s.containers)
            && (self.events.is_empty() || self.events.contains(&s.method))
    }
}

/// Options of a recording.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Which messages to record.
    pub filter: Filter,
    /// Add each message's raw bytes (hex) to its line.
    pub raw: bool,
}

/// Where recording lines go: a channel to the writer task, so forwarding
/// never waits for the disk. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<String>,
    options: Arc<Options>,
    sessions: Arc<std::sync::atomic::AtomicU64>,
}

/// The writer task of a [`Recorder`]; await it after the last recorder is
/// dropped to have every line written.
pub type WriterTask = tokio::task::JoinHandle<std::io::Result<()>>;

impl Recorder {
    /// A recorder writing to `path` (`-` for standard output).
    pub async fn to_path(path: &Path, options: Options) -> std::io::Result<(Recorder, WriterTask)> {
        let out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = if path == Path::new("-") {
            Box::new(tokio::io::stdout())
        } else {
            Box::new(tokio::fs::File::create(path).await?)
        };
        Ok(Recorder::to_writer(out, options))
    }

    /// A recorder writing to `out`, one JSON document per line.
    pub fn to_writer(
        mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
        options: Options,
    ) -> (Recorder, WriterTask) {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let task = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                out.write_all(line.as_bytes()).await?;
                out.write_all(b"\n").await?;
                if rx.is_empty() {
                    out.flush().await?;
                }
            }
            out.flush().await
        });
        let rec = Recorder {
            tx,
            options: Arc::new(options),
            sessions: Arc::default(),
        };
        (rec, task)
    }

    /// State of one new plugin connection; `plugin` when already known
    /// (`nri-tap wrap` learns it from the environment).
    pub fn session(&self, plugin: Option<String>) -> Session {
        let id = self
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let s = Session {
            rec: self.clone(),
            id,
            state: Arc::new(Mutex::new(State {
                plugin,
                pending: HashMap::new(),
            })),
        };
        s.event("connect", Map::new());
        s
    }
}

struct Pending {
    subject: Subject,
    start: Instant,
}

struct State {
    plugin: Option<String>,
    pending: HashMap<(ConnId, u32), Pending>,
}

/// One plugin connection's recording state, shared by both directions.
#[derive(Clone)]
pub struct Session {
    rec: Recorder,
    id: u64,
    state: Arc<Mutex<State>>,
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a connection-level event (`connect`, `close`, ...).
    pub fn event(&self, kind: &str, mut fields: Map<String, Value>) {
        let plugin = self.lock().plugin.clone();
        if !self.rec.options.filter.plugins.is_empty()
            && !self
                .rec
                .options
                .filter
                .keeps(plugin.as_deref(), &Subject::default())
            && plugin.is_some()
        {
            return;
        }
        fields.insert("type".into(), kind.into());
        self.emit(plugin, fields);
    }

    fn emit(&self, plugin: Option<String>, mut fields: Map<String, Value>) {
        let mut line = Map::new();
        line.insert("ts_ms".into(), json!(now_ms()));
        line.insert("session".into(), json!(self.id));
        line.insert("plugin".into(), json!(plugin));
        line.append(&mut fields);
        // A closed writer (the tap is ending) loses the line, nothing more.
        let _ = self.rec.tx.send(Value::Object(line).to_string());
    }

    /// Records what the decoder found in direction `dir`.
    pub fn items(&self, dir: Direction, items: Vec<Item>) {
        for item in items {
            match item {
                Item::Message { conn, header, body } => {
                    self.message(dir, conn, header, &body);
                }
                Item::Oversized { conn, header } => {
                    let mut f = Map::new();
                    f.insert("dir".into(), dir.as_str().into());
                    f.insert("conn".into(), conn.into());
                    f.insert("stream".into(), header.stream_id.into());
                    f.insert("bytes".into(), header.length.into());
                    self.event("oversized", f);
                }
                Item::Malformed { reason, head } => {
                    let mut f = Map::new();
                    f.insert("dir".into(), dir.as_str().into());
                    f.insert("error".into(), reason.into());
                    f.insert("raw".into(), hex(&head).into());
                    self.event("malformed", f);
                }
            }
        }
    }

    fn message(
        &self,
        dir: Direction,
        conn: ConnId,
        header: nri_ttrpc::frame::FrameHeader,
        body: &[u8],
    ) {
        let mut f = Map::new();
        f.insert("dir".into(), dir.as_str().into());
        f.insert("conn".into(), conn.into());
        f.insert("stream".into(), header.stream_id.into());
        f.insert("bytes".into(), body.len().into());
        if self.rec.options.raw {
            f.insert(
                "raw".into(),
                hex(&[&header.encode()[..], body].concat()).into(),
            );
        }
        let (plugin, subject) = match header.kind {
            MESSAGE_TYPE_REQUEST => self.request(conn, header.stream_id, body, &mut f),
            MESSAGE_TYPE_RESPONSE => self.response(conn, header.stream_id, body, &mut f),
            _ => {
                f.insert("type".into(), "data".into());
                (self.lock().plugin.clone(), Subject::default())
            }
        };
        if self.rec.options.filter.keeps(plugin.as_deref(), &subject) {
            self.emit(plugin, f);
        }
    }

    fn request(
        &self,
        conn: ConnId,
        stream: u32,
        body: &[u8],
        f: &mut Map<String, Value>,
    ) -> (Option<String>, Subject) {
        f.insert("type".into(), "request".into());
        let req = match nri_ttrpc::proto::Request::decode(body) {
            Ok(r) => r,
            Err(e) => {
                f.insert("error".into(), format!("bad ttRPC request: {e}").into());
                return (self.lock().plugin.clone(), Subject::default());
            }
        };
        f.insert("service".into(), req.service.clone().into());
        f.insert("method".into(), req.method.clone().into());
        if req.timeout_nano != 0 {
            f.insert("timeout_ns".into(), req.timeout_nano.into());
        }
        if !req.metadata.is_empty() {
            let md: Map<String, Value> = req
                .metadata
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().into()))
                .collect();
            f.insert("metadata".into(), md.into());
        }
        let mut subject = Subject {
            method: req.method.clone(),
            service: req.service.clone(),
            ..Default::default()
        };
        match payload(&req.method, true, &req.payload) {
            Ok(v) => {
                subject.pods = names(&v, "pod", "pods");
                subject.containers = names(&v, "container", "containers");
                if req.method == rm::REGISTER_PLUGIN {
                    let idx = v.get("plugin_idx").and_then(Value::as_str).unwrap_or("");
                    let name = v.get("plugin_name").and_then(Value::as_str).unwrap_or("");
                    let mut st = self.lock();
                    st.plugin.get_or_insert_with(|| format!("{idx}-{name}"));
                }
                f.insert("request".into(), v);
            }
            Err(e) => {
                f.insert("error".into(), e.into());
            }
        }
        let mut st = self.lock();
        st.pending.insert(
            (conn, stream),
            Pending {
                subject: subject.clone(),
                start: Instant::now(),
            },
        );
        (st.plugin.clone(), subject)
    }

    fn response(
        &self,
        conn: ConnId,
        stream: u32,
        body: &[u8],
        f: &mut Map<String, Value>,
    ) -> (Option<String>, Subject) {
        f.insert("type".into(), "response".into());
        let (plugin, pending) = {
            let mut st = self.lock();
            (st.plugin.clone(), st.pending.remove(&(conn, stream)))
        };
        let subject = match &pending {
            Some(p) => {
                f.insert("service".into(), p.subject.service.clone().into());
                f.insert("method".into(), p.subject.method.clone().into());
                let us = u64::try_from(p.start.elapsed().as_micros()).unwrap_or(u64::MAX);
                f.insert("elapsed_us".into(), us.into());
                p.subject.clone()
            }
            None => Subject::default(),
        };
        let resp = match nri_ttrpc::proto::Response::decode(body) {
            Ok(r) => r,
            Err(e) => {
                f.insert("error".into(), format!("bad ttRPC response: {e}").into());
                return (plugin, subject);
            }
        };
        let code = resp.status.as_ref().map_or(0, |s| s.code);
        let mut status = Map::new();
        status.insert("code".into(), code.into());
        if let Some(s) = resp.status.as_ref().filter(|s| !s.message.is_empty()) {
            status.insert("message".into(), s.message.clone().into());
        }
        f.insert("status".into(), status.into());
        if code == 0 && pending.is_some() {
            match payload(&subject.method, false, &resp.payload) {
                Ok(v) => {
                    f.insert("response".into(), v);
                }
                Err(e) => {
                    f.insert("error".into(), e.into());
                }
            }
        }
        (plugin, subject)
    }
}

/// Ids and names of the pod(s) or container(s) a message is about.
fn names(v: &Value, one: &str, many: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |o: &Value| {
        for k in ["id", "name"] {
            if let Some(s) = o.get(k).and_then(Value::as_str) {
                out.push(s.to_string());
            }
        }
    };
    if let Some(o) = v.get(one) {
        add(o);
    }
    if let Some(Value::Array(a)) = v.get(many) {
        a.iter().for_each(&mut add);
    }
    out
}

macro_rules! decode_as {
    ($bytes:expr, $t:ty) => {
        <$t>::decode($bytes)
            .map_err(|e| format!("cannot decode {}: {e}", stringify!($t)))
            .and_then(|m| serde_json::to_value(&m).map_err(|e| e.to_string()))
    };
}

/// Decodes the payload of `method` (a request when `request`) to JSON.
///
/// ```
/// use prost::Message;
/// let req = nri_api::RegisterPluginRequest {
///     plugin_name: "logger".into(),
///     plugin_idx: "10".into(),
///     ..Default::default()
/// };
/// let v = nri_tap::record::payload("RegisterPlugin", true, &req.encode_to_vec()).unwrap();
/// assert_eq!(v["plugin_name"], "logger");
/// ```
pub fn payload(method: &str, request: bool, bytes: &[u8]) -> Result<Value, String> {
    use nri_api::*;
    macro_rules! pair {
        ($req:ty, $resp:ty) => {
            if request {
                decode_as!(bytes, $req)
            } else {
                decode_as!(bytes, $resp)
            }
        };
    }
    match method {
        pm::CONFIGURE => pair!(ConfigureRequest, ConfigureResponse),
        pm::SYNCHRONIZE => pair!(SynchronizeRequest, SynchronizeResponse),
        pm::SHUTDOWN => pair!(Empty, Empty),
        pm::RUN_POD_SANDBOX => pair!(RunPodSandboxRequest, RunPodSandboxResponse),
        pm::UPDATE_POD_SANDBOX => pair!(UpdatePodSandboxRequest, UpdatePodSandboxResponse),
        pm::POST_UPDATE_POD_SANDBOX => {
            pair!(PostUpdatePodSandboxRequest, PostUpdatePodSandboxResponse)
        }
        pm::STOP_POD_SANDBOX => pair!(StopPodSandboxRequest, StopPodSandboxResponse),
        pm::REMOVE_POD_SANDBOX => pair!(RemovePodSandboxRequest, RemovePodSandboxResponse),
        pm::CREATE_CONTAINER => pair!(CreateContainerRequest, CreateContainerResponse),
        pm::POST_CREATE_CONTAINER => {
            pair!(PostCreateContainerRequest, PostCreateContainerResponse)
        }
        pm::START_CONTAINER => pair!(StartContainerRequest, StartContainerResponse),
        pm::POST_START_CONTAINER => pair!(PostStartContainerRequest, PostStartContainerResponse),
        pm::UPDATE_CONTAINER => pair!(UpdateContainerRequest, UpdateContainerResponse),
        pm::POST_UPDATE_CONTAINER => {
            pair!(PostUpdateContainerRequest, PostUpdateContainerResponse)
        }
        pm::STOP_CONTAINER => pair!(StopContainerRequest, StopContainerResponse),
        pm::REMOVE_CONTAINER => pair!(RemoveContainerRequest, RemoveContainerResponse),
        pm::STATE_CHANGE => pair!(StateChangeEvent, Empty),
        pm::VALIDATE_CONTAINER_ADJUSTMENT => pair!(
            ValidateContainerAdjustmentRequest,
            ValidateContainerAdjustmentResponse
        ),
        rm::REGISTER_PLUGIN => pair!(RegisterPluginRequest, Empty),
        rm::UPDATE_CONTAINERS => pair!(UpdateContainersRequest, UpdateContainersResponse),
        other => Err(format!("unknown method {other:?}")),
    }
}
