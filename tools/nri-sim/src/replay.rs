//! `nri-sim replay`: re-drives one plugin with the runtime→plugin requests
//! of an `nri-tap` recording, in their recorded order and exactly as
//! recorded (Configure with the recorded config, every Synchronize
//! message, every event, Shutdown), and compares its answers, and the
//! requests it sends on its own (RegisterPlugin, UpdateContainers), with
//! the recorded ones.
//!
//! The simulator plays the runtime end of one plugin connection itself
//! (`nri-mux` and `nri-ttrpc`, no adaptation in between): nothing is merged,
//! filtered or generated, so the plugin sees the recorded bytes' content
//! again and its raw answers are compared field by field with
//! [`crate::diff`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nri_api::service::{plugin as pm, runtime as rm, PLUGIN_SERVICE, RUNTIME_SERVICE};
use nri_api::{Empty, RegisterPluginRequest, UpdateContainersRequest, UpdateContainersResponse};
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::{Client, Code, Server, Status};
use prost::Message;
use serde::Serialize;
use serde_json::Value;
use tokio::net::UnixStream;
use tokio::sync::Notify;

use crate::diff::{diff, Change};
use crate::recording::{Answer, Exchange, Recording, Session};
use crate::report::SCHEMA;

/// Deadline of a replayed request whose recording has none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How the plugin under test is reached.
#[derive(Debug, Clone)]
pub enum Target {
    /// Launched as a pre-installed plugin (socket on fd 3,
    /// `NRI_PLUGIN_NAME`, `NRI_PLUGIN_IDX`, `NRI_PLUGIN_SOCKET=3`).
    Launch(Vec<String>),
    /// An external plugin that connects to this socket.
    Socket(PathBuf),
    /// A sample plugin of `plugins/`, run in-process (see
    /// [`crate::samples`]); `config` is used when the recorded Configure
    /// carries none.
    Sample {
        /// The sample's name.
        name: String,
        /// Its configuration.
        config: String,
    },
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Launch(cmd) => format!("launched: {}", cmd.join(" ")),
            Target::Socket(p) => format!("external: {}", p.display()),
            Target::Sample { name, .. } => format!("sample: {name}"),
        }
    }
}

/// What to replay against what.
#[derive(Debug, Clone)]
pub struct Options {
    /// The recording.
    pub recording: PathBuf,
    /// The plugin of the recording (full or base name).
    pub plugin: Option<String>,
    /// Its session (connection) number, when it connected several times.
    pub session: Option<u64>,
    /// The plugin under test.
    pub target: Target,
    /// How long to wait for the plugin to connect and register.
    pub wait_timeout: Duration,
    /// How long to wait, after the last request, for plugin requests the
    /// recording has and the replay has not seen yet.
    pub settle: Duration,
    /// JSON pointers (as shown in the report: `/response/...`,
    /// `/status/message`, `/request/...`) left out of every comparison.
    pub ignore: Vec<String>,
}

/// Why a replay could not be done (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The recording is unusable.
    #[error(transparent)]
    Recording(#[from] crate::recording::RecordingError),
    /// The plugin could not be started or did not connect or register.
    #[error("{0}")]
    Plugin(String),
}

/// The JSON report of `replay` (schema [`SCHEMA`], `"type": "replay"`).
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Always `replay`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The recording's path.
    pub recording: String,
    /// The replayed plugin's full name.
    pub plugin: String,
    /// The replayed session.
    pub session: u64,
    /// The plugin under test (`launched: CMD`, `external: SOCKET`,
    /// `sample: NAME`).
    pub target: String,
    /// Every runtime→plugin request, in order.
    pub messages: Vec<MessageReport>,
    /// Requests the plugin sent (RegisterPlugin, UpdateContainers),
    /// recorded and seen, paired in order per method.
    pub plugin_requests: Vec<PluginRequestReport>,
    /// The `--ignore` pointers.
    pub ignored: Vec<String>,
    /// Answers and plugin requests that differ.
    pub differences: usize,
    /// No differences.
    pub passed: bool,
}

/// One replayed request.
#[derive(Debug, Clone, Serialize)]
pub struct MessageReport {
    /// One-based position among the replayed requests.
    pub index: usize,
    /// Line of the request in the recording.
    pub line: usize,
    /// ttRPC method.
    pub method: String,
    /// The pod or container it is about (name), if any.
    pub subject: Option<String>,
    /// The new answer equals the recorded one (ignoring `ignored`).
    pub same: bool,
    /// The recorded answer `{"status": {"code", "message"}, "response"}`
    /// (only when different; `null` also when the recording has none).
    pub recorded: Option<Value>,
    /// The new answer, in the same form (only when different).
    pub new: Option<Value>,
    /// Field-level differences, from recorded to new (empty when the
    /// recording has no answer).
    pub diff: Vec<Change>,
}

/// One plugin-initiated request.
#[derive(Debug, Clone, Serialize)]
pub struct PluginRequestReport {
    /// ttRPC method.
    pub method: String,
    /// Line of the recorded request, if recorded.
    pub line: Option<usize>,
    /// Recorded and seen, and equal.
    pub same: bool,
    /// The recorded request `{"request": ...}` (only when different).
    pub recorded: Option<Value>,
    /// The request seen now (only when different).
    pub new: Option<Value>,
    /// Field-level differences.
    pub diff: Vec<Change>,
}

macro_rules! codec {
    ($method:expr, $( $name:path => $req:ty, $resp:ty; )*) => {{
        match $method {
            $( $name => Some((
                |v: &Value| -> Result<Vec<u8>, String> {
                    serde_json::from_value::<$req>(v.clone())
                        .map(|m| m.encode_to_vec())
                        .map_err(|e| e.to_string())
                } as fn(&Value) -> Result<Vec<u8>, String>,
                |b: &[u8]| -> Result<Value, String> {
                    <$resp>::decode(b)
                        .map_err(|e| e.to_string())
                        .and_then(|m| serde_json::to_value(&m).map_err(|e| e.to_string()))
                } as fn(&[u8]) -> Result<Value, String>,
            )), )*
            _ => None,
        }
    }};
}

type Encode = fn(&Value) -> Result<Vec<u8>, String>;
type Decode = fn(&[u8]) -> Result<Value, String>;

/// The request encoder and response decoder of a Plugin-service method.
fn plugin_codec(method: &str) -> Option<(Encode, Decode)> {
    use nri_api::*;
    codec!(method,
        pm::CONFIGURE => ConfigureRequest, ConfigureResponse;
        pm::SYNCHRONIZE => SynchronizeRequest, SynchronizeResponse;
        pm::SHUTDOWN => Empty, Empty;
        pm::RUN_POD_SANDBOX => RunPodSandboxRequest, RunPodSandboxResponse;
        pm::UPDATE_POD_SANDBOX => UpdatePodSandboxRequest, UpdatePodSandboxResponse;
        pm::POST_UPDATE_POD_SANDBOX => PostUpdatePodSandboxRequest, PostUpdatePodSandboxResponse;
        pm::STOP_POD_SANDBOX => StopPodSandboxRequest, StopPodSandboxResponse;
        pm::REMOVE_POD_SANDBOX => RemovePodSandboxRequest, RemovePodSandboxResponse;
        pm::CREATE_CONTAINER => CreateContainerRequest, CreateContainerResponse;
        pm::POST_CREATE_CONTAINER => PostCreateContainerRequest, PostCreateContainerResponse;
        pm::START_CONTAINER => StartContainerRequest, StartContainerResponse;
        pm::POST_START_CONTAINER => PostStartContainerRequest, PostStartContainerResponse;
        pm::UPDATE_CONTAINER => UpdateContainerRequest, UpdateContainerResponse;
        pm::POST_UPDATE_CONTAINER => PostUpdateContainerRequest, PostUpdateContainerResponse;
        pm::STOP_CONTAINER => StopContainerRequest, StopContainerResponse;
        pm::REMOVE_CONTAINER => RemoveContainerRequest, RemoveContainerResponse;
        pm::STATE_CHANGE => StateChangeEvent, Empty;
        pm::VALIDATE_CONTAINER_ADJUSTMENT =>
            ValidateContainerAdjustmentRequest, ValidateContainerAdjustmentResponse;
    )
}

/// Removes the member at JSON `pointer`, if present.
fn remove_pointer(v: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(&key);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = key.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
        _ => {}
    }
}

fn compare(old: &Value, new: &Value, ignore: &[String]) -> Vec<Change> {
    let (mut a, mut b) = (old.clone(), new.clone());
    for p in ignore {
        remove_pointer(&mut a, p);
        remove_pointer(&mut b, p);
    }
    named_events(&mut a);
    named_events(&mut b);
    diff(&a, &b)
}

/// A Configure answer's event mask by the events' names
/// (`RunPodSandbox,CreateContainer`), not as the number on the wire.
fn named_events(answer: &mut Value) {
    let Some(events) = answer.pointer_mut("/response/events") else {
        return;
    };
    if let Some(mask) = events.as_i64().and_then(|m| i32::try_from(m).ok()) {
        *events = Value::String(nri_api::EventMask::from(mask).pretty_string());
    }
}

/// The pod or container a request is about, by name.
fn subject(request: &Value) -> Option<String> {
    ["container", "pod"].iter().find_map(|k| {
        let o = request.get(*k)?;
        o.get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| o.get("id").and_then(Value::as_str))
            .map(String::from)
    })
}

/// What the runtime side saw from the plugin.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(String, Value)>>,
    notify: Notify,
}

impl Seen {
    fn push(&self, method: &str, v: Value) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((method.to_string(), v));
        self.notify.notify_waiters();
    }
    fn count(&self, method: &str) -> usize {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(m, _)| m == method)
            .count()
    }
    fn all(&self) -> Vec<(String, Value)> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The runtime service: records RegisterPlugin and UpdateContainers and
/// answers the n-th UpdateContainers as the recording did.
fn runtime_service(seen: Arc<Seen>, recorded_updates: Vec<Option<Answer>>) -> Server {
    let mut server = Server::new();
    let s = seen.clone();
    server.register_msg(
        RUNTIME_SERVICE,
        rm::REGISTER_PLUGIN,
        move |_ctx, req: RegisterPluginRequest| {
            let s = s.clone();
            async move {
                s.push(
                    rm::REGISTER_PLUGIN,
                    serde_json::to_value(&req).unwrap_or(Value::Null),
                );
                Ok(Empty {})
            }
        },
    );
    let recorded = Arc::new(recorded_updates);
    server.register_msg(
        RUNTIME_SERVICE,
        rm::UPDATE_CONTAINERS,
        move |_ctx, req: UpdateContainersRequest| {
            let seen = seen.clone();
            let recorded = recorded.clone();
            async move {
                let n = seen.count(rm::UPDATE_CONTAINERS);
                seen.push(
                    rm::UPDATE_CONTAINERS,
                    serde_json::to_value(&req).unwrap_or(Value::Null),
                );
                match recorded.get(n).cloned().flatten() {
                    Some(a) if a.code != 0 => Err(Status::new(
                        Code::from(i32::try_from(a.code).unwrap_or(2)),
                        a.message,
                    )),
                    Some(a) => Ok(a
                        .response
                        .and_then(|r| serde_json::from_value::<UpdateContainersResponse>(r).ok())
                        .unwrap_or_default()),
                    None => Ok(UpdateContainersResponse::default()),
                }
            }
        },
    );
    server
}

/// The plugin under test, running.
struct Running {
    child: Option<tokio::process::Child>,
    stderr: Option<tempfile::NamedTempFile>,
    _sample: Option<crate::samples::Running>,
    _dir: Option<tempfile::TempDir>,
}

impl Running {
    fn stderr_tail(&self) -> String {
        let Some(f) = &self.stderr else {
            return String::new();
        };
        let text = std::fs::read(f.path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    async fn stop(&mut self, grace: Duration) {
        if let Some(child) = &mut self.child {
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
    }
}

/// Launches `command` as plugin `idx-base`: its end of a socket pair on
/// fd 3 (moved there from standard input by `/bin/sh`), the NRI variables,
/// standard error to a file.
fn launch(command: &[String], idx: &str, base: &str) -> Result<(UnixStream, Running), String> {
    let Some((program, args)) = command.split_first() else {
        return Err("no plugin command".into());
    };
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let program = crate::plugins::launch::resolve(program, &cwd)?;
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| format!("socket pair: {e}"))?;
    let stderr = tempfile::NamedTempFile::new().map_err(|e| format!("stderr file: {e}"))?;
    let err_file = stderr.reopen().map_err(|e| format!("stderr file: {e}"))?;
    let child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("exec 3<&0 0</dev/null; exec \"$@\"")
        .arg("nri-plugin")
        .arg(&program)
        .args(args)
        .env(nri_api::plugin::PLUGIN_NAME_ENV, base)
        .env(nri_api::plugin::PLUGIN_IDX_ENV, idx)
        .env(
            nri_api::plugin::PLUGIN_SOCKET_ENV,
            nri_api::plugin::PLUGIN_SOCKET_FD.to_string(),
        )
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::from(err_file))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    ours.set_nonblocking(true)
        .map_err(|e| format!("socket pair: {e}"))?;
    let ours = UnixStream::from_std(ours).map_err(|e| format!("socket pair: {e}"))?;
    Ok((
        ours,
        Running {
            child: Some(child),
            stderr: Some(stderr),
            _sample: None,
            _dir: None,
        },
    ))
}

async fn accept(
    listener: &tokio::net::UnixListener,
    path: &Path,
    wait: Duration,
) -> Result<UnixStream, String> {
    match tokio::time::timeout(wait, listener.accept()).await {
        Ok(Ok((s, _))) => Ok(s),
        Ok(Err(e)) => Err(format!("accepting on {}: {e}", path.display())),
        Err(_) => Err(format!(
            "no plugin connected to {} within {wait:?}",
            path.display()
        )),
    }
}

fn listen(path: &Path) -> Result<tokio::net::UnixListener, String> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot replace {}: {e}", path.display())),
    }
    tokio::net::UnixListener::bind(path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))
}

async fn connect(
    opts: &Options,
    plugin: &str,
    say: &crate::runner::Say,
) -> Result<(UnixStream, Running), String> {
    let (idx, base) = nri_api::plugin::parse_plugin_name(plugin)
        .map(|(i, b)| (i.to_string(), b.to_string()))
        .map_err(|e| format!("recorded plugin name {plugin:?}: {e}"))?;
    match &opts.target {
        Target::Launch(cmd) => {
            say(&format!("launching {} as {plugin}", cmd.join(" ")));
            launch(cmd, &idx, &base)
        }
        Target::Socket(path) => {
            let listener = listen(path)?;
            say(&format!(
                "waiting for {plugin} to connect to {}",
                path.display()
            ));
            let s = accept(&listener, path, opts.wait_timeout).await?;
            Ok((
                s,
                Running {
                    child: None,
                    stderr: None,
                    _sample: None,
                    _dir: None,
                },
            ))
        }
        Target::Sample { name, config } => {
            let dir = tempfile::Builder::new()
                .prefix("nri-sim-replay-")
                .tempdir()
                .map_err(|e| format!("temporary directory: {e}"))?;
            let path = dir.path().join("nri.sock");
            let listener = listen(&path)?;
            let sample = crate::samples::start(
                &crate::samples::SampleRun {
                    sample: name.clone(),
                    name: base,
                    index: idx,
                    config: config.clone(),
                    config_from: None,
                    args: Vec::new(),
                },
                &path,
            )
            .map_err(|e| e.to_string())?;
            say(&format!("started sample {name} as {plugin}"));
            let s = accept(&listener, &path, opts.wait_timeout).await?;
            Ok((
                s,
                Running {
                    child: None,
                    stderr: None,
                    _sample: Some(sample),
                    _dir: Some(dir),
                },
            ))
        }
    }
}

/// Replays `opts.recording` against `opts.target`. `say` receives
/// progress lines.
pub async fn replay(opts: &Options, say: &crate::runner::Say) -> Result<ReplayReport, ReplayError> {
    let rec = Recording::load(&opts.recording)?;
    let session = rec.select(opts.plugin.as_deref(), opts.session)?;
    let plugin = session.plugin.clone().unwrap_or_default();
    for e in session.exchanges.iter().filter(|e| e.to_plugin) {
        if plugin_codec(&e.method).is_none() {
            return Err(ReplayError::Plugin(format!(
                "{}:{}: cannot replay method {:?}",
                rec.path, e.line, e.method
            )));
        }
    }
    let connected = connect(opts, &plugin, say).await;
    let result = match connected {
        Ok((trunk, running)) => Ok((drive(opts, session, &plugin, trunk, say).await, running)),
        Err(e) => Err(e),
    };
    // The socket an external plugin connected to is ours to remove.
    if let Target::Socket(path) = &opts.target {
        let _ = std::fs::remove_file(path);
    }
    let (result, mut running) = result.map_err(ReplayError::Plugin)?;
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            running.stop(Duration::ZERO).await;
            let tail = running.stderr_tail();
            return Err(ReplayError::Plugin(if tail.is_empty() {
                e
            } else {
                format!("{e}; its standard error ends with:\n{tail}")
            }));
        }
    };
    running.stop(Duration::from_secs(1)).await;
    Ok(ReplayReport {
        recording: rec.path.clone(),
        session: session.id,
        ..report
    })
}

async fn drive(
    opts: &Options,
    session: &Session,
    plugin: &str,
    trunk: UnixStream,
    say: &crate::runner::Say,
) -> Result<ReplayReport, String> {
    let recorded_plugin: Vec<&Exchange> =
        session.exchanges.iter().filter(|e| !e.to_plugin).collect();
    let recorded_updates: Vec<Option<Answer>> = recorded_plugin
        .iter()
        .filter(|e| e.method == rm::UPDATE_CONTAINERS)
        .map(|e| e.answer.clone())
        .collect();
    let mux = Mux::new(
        trunk,
        MuxOptions {
            blocked_read: true,
            ..MuxOptions::default()
        },
    );
    let (client_conn, server_conn) = mux
        .open(PLUGIN_SERVICE_CONN)
        .and_then(|a| mux.open(RUNTIME_SERVICE_CONN).map(|b| (a, b)))
        .map_err(|e| format!("cannot set up the connection: {e}"))?;
    let client = Client::new(client_conn);
    let seen = Arc::new(Seen::default());
    let server = Arc::new(runtime_service(seen.clone(), recorded_updates));
    let serving = tokio::spawn(async move {
        let _ = server.serve(server_conn).await;
    });
    mux.unblock();

    // Registration.
    let registered = async {
        loop {
            let wait = seen.notify.notified();
            if seen.count(rm::REGISTER_PLUGIN) > 0 {
                return Ok(());
            }
            tokio::select! {
                _ = wait => {}
                _ = mux.closed() => return Err("the plugin closed the connection before it registered".to_string()),
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    };
    match tokio::time::timeout(opts.wait_timeout, registered).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(format!(
                "{plugin} did not register within {:?}",
                opts.wait_timeout
            ))
        }
    }
    say(&format!("{plugin} registered; replaying"));

    let mut messages = Vec::new();
    for (i, e) in session.exchanges.iter().filter(|e| e.to_plugin).enumerate() {
        let Some((encode, decode)) = plugin_codec(&e.method) else {
            continue;
        };
        let payload = encode(&e.request).map_err(|err| {
            format!(
                "line {}: cannot encode the {} request: {err}",
                e.line, e.method
            )
        })?;
        let timeout = e
            .timeout_ns
            .map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_nanos);
        let new = match client
            .call(PLUGIN_SERVICE, &e.method, payload, Some(timeout))
            .await
        {
            Ok(bytes) => match decode(&bytes) {
                Ok(v) => Answer {
                    line: 0,
                    code: 0,
                    message: String::new(),
                    response: Some(v),
                },
                Err(err) => Answer {
                    line: 0,
                    code: i64::from(i32::from(Code::Internal)),
                    message: format!("undecodable response: {err}"),
                    response: None,
                },
            },
            Err(nri_ttrpc::Error::Status(s)) => Answer {
                line: 0,
                code: i64::from(i32::from(s.code())),
                message: s.message().to_string(),
                response: None,
            },
            Err(nri_ttrpc::Error::Timeout) => Answer {
                line: 0,
                code: i64::from(i32::from(Code::DeadlineExceeded)),
                message: format!("no answer within {timeout:?}"),
                response: None,
            },
            Err(err) => Answer {
                line: 0,
                code: i64::from(i32::from(Code::Unavailable)),
                message: err.to_string(),
                response: None,
            },
        };
        let new = new.to_json();
        let (same, d, recorded) = match &e.answer {
            Some(a) => {
                let old = a.to_json();
                let d = compare(&old, &new, &opts.ignore);
                (d.is_empty(), d, Some(old))
            }
            // No recorded answer (a recording cut short): different, with
            // nothing to compare field by field.
            None => (false, Vec::new(), None),
        };
        messages.push(MessageReport {
            index: i + 1,
            line: e.line,
            method: e.method.clone(),
            subject: subject(&e.request),
            same,
            recorded: if same { None } else { recorded },
            new: if same { None } else { Some(new) },
            diff: d,
        });
    }

    // Plugin-initiated requests the recording has and the replay not yet.
    let want = |m: &str| recorded_plugin.iter().filter(|e| e.method == m).count();
    let settled = async {
        loop {
            let wait = seen.notify.notified();
            if [rm::REGISTER_PLUGIN, rm::UPDATE_CONTAINERS]
                .iter()
                .all(|m| seen.count(m) >= want(m))
            {
                return;
            }
            tokio::select! {
                _ = wait => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    };
    let _ = tokio::time::timeout(opts.settle, settled).await;
    let seen_all = seen.all();
    client.close();
    mux.close();
    serving.abort();

    let mut plugin_requests = Vec::new();
    for method in [rm::REGISTER_PLUGIN, rm::UPDATE_CONTAINERS] {
        let old: Vec<&&Exchange> = recorded_plugin
            .iter()
            .filter(|e| e.method == method)
            .collect();
        let new: Vec<&Value> = seen_all
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, v)| v)
            .collect();
        for i in 0..old.len().max(new.len()) {
            let o = old
                .get(i)
                .map(|e| serde_json::json!({"request": e.request}));
            let n = new.get(i).map(|v| serde_json::json!({"request": v}));
            let d = match (&o, &n) {
                (Some(o), Some(n)) => compare(o, n, &opts.ignore),
                (o, n) => diff(
                    o.as_ref().unwrap_or(&Value::Null),
                    n.as_ref().unwrap_or(&Value::Null),
                ),
            };
            let same = d.is_empty();
            plugin_requests.push(PluginRequestReport {
                method: method.to_string(),
                line: old.get(i).map(|e| e.line),
                same,
                recorded: if same { None } else { o },
                new: if same { None } else { n },
                diff: d,
            });
        }
    }
    let differences = messages.iter().filter(|m| !m.same).count()
        + plugin_requests.iter().filter(|m| !m.same).count();
    Ok(ReplayReport {
        schema: SCHEMA,
        kind: "replay",
        recording: String::new(),
        plugin: plugin.to_string(),
        session: 0,
        target: opts.target.describe(),
        messages,
        plugin_requests,
        ignored: opts.ignore.clone(),
        differences,
        passed: differences == 0,
    })
}

/// The human report.
pub fn render(st: &crate::render::Style, r: &ReplayReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} of {} (session {}) against {}",
        st.bold("replay"),
        r.plugin,
        r.recording,
        r.session,
        r.target
    );
    let mark = |same: bool| if same { st.green("=") } else { st.red("≠") };
    let _ = writeln!(out, "\n{}", st.bold("Runtime requests"));
    for m in &r.messages {
        let subject = m
            .subject
            .as_deref()
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {:>3}. {}{subject} {}",
            mark(m.same),
            m.index,
            m.method,
            st.dim(&format!("(line {})", m.line))
        );
        if m.recorded.is_none() && !m.same {
            let _ = writeln!(out, "      {}", st.yellow("no recorded answer"));
        }
        crate::render::changes(st, &m.diff, &mut out);
    }
    let _ = writeln!(out, "\n{}", st.bold("Plugin requests"));
    if r.plugin_requests.is_empty() {
        let _ = writeln!(out, "  {}", st.dim("none"));
    }
    for p in &r.plugin_requests {
        let note = match (&p.recorded, &p.new, p.same) {
            (_, _, true) => String::new(),
            (None, Some(_), _) => " (not in the recording)".into(),
            (Some(_), None, _) => " (recorded, not sent now)".into(),
            _ => String::new(),
        };
        let line = p.line.map(|l| format!(" (line {l})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {}{}{note}",
            mark(p.same),
            p.method,
            st.dim(&line)
        );
        if p.recorded.is_some() && p.new.is_some() {
            crate::render::changes(st, &p.diff, &mut out);
        }
    }
    let answers = r.messages.iter().filter(|m| !m.same).count();
    let requests = r.plugin_requests.iter().filter(|m| !m.same).count();
    let _ = writeln!(out);
    if r.passed {
        let _ = writeln!(
            out,
            "{} {} answers and {} plugin requests as recorded",
            st.green(&st.bold("SAME")),
            r.messages.len(),
            r.plugin_requests.len()
        );
    } else {
        let _ = writeln!(
            out,
            "{} {answers} of {} answers, {requests} of {} plugin requests differ",
            st.red(&st.bold("DIFFERENT")),
            r.messages.len(),
            r.plugin_requests.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_masks_are_compared_by_name() {
        let a = json!({"code": 0, "response": {"events": 1}});
        let b = json!({"code": 0, "response": {"events": 3}});
        let d = compare(&a, &b, &[]);
        assert_eq!(d.len(), 1, "{d:?}");
        let shown = format!("{d:?}");
        assert!(shown.contains("RunPodSandbox,StopPodSandbox"), "{shown}");
        assert!(!shown.contains("Number("), "{shown}");
    }

    #[test]
    fn ignored_pointers_are_left_out() {
        let a = json!({"response": {"adjust": {"annotations": {"t": "1", "k": "v"}}}});
        let b = json!({"response": {"adjust": {"annotations": {"t": "2", "k": "v"}}}});
        assert_eq!(compare(&a, &b, &[]).len(), 1);
        assert!(compare(&a, &b, &["/response/adjust/annotations/t".into()]).is_empty());
    }

    #[test]
    fn every_plugin_method_has_a_codec_that_round_trips() {
        for m in pm::ALL {
            assert!(plugin_codec(m).is_some(), "{m}");
        }
        let (enc, _) = plugin_codec(pm::CONFIGURE).unwrap();
        let bytes = enc(&json!({"config": "x: 1", "runtime_name": "r"})).unwrap();
        let back = nri_api::ConfigureRequest::decode(bytes.as_slice()).unwrap();
        assert_eq!(back.config, "x: 1");
        assert!(enc(&json!({"config": 5})).is_err());
    }
}
