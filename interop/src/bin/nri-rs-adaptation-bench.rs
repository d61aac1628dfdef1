//! `nri-rs-adaptation-bench`: our runtime adaptation with external plugin
//! processes, in a process of its own so that its memory can be measured;
//! the twin of the Go `nri-adaptation-bench` (interop/harness): same flags,
//! same JSON report (`nri_interop::bench::Report`). `interop/benches/
//! adaptation.rs` runs both and describes every mode in the document it
//! writes (`adaptation-notes/template.md`).
//!
//! ```text
//! nri-rs-adaptation-bench -plugin BIN [-mode create] [-plugins 1] [-n 5000] [-warmup 500] [-registrations 10]
//! nri-rs-adaptation-bench -plugin BIN -mode lifecycle [-plugins 8] [-n 1000] [-warmup 100]
//! nri-rs-adaptation-bench -plugin BIN -mode sync [-containers 1000] [-rounds 5]
//! nri-rs-adaptation-bench -plugin BIN -mode load [-plugins 8] [-rate 100] [-duration 60] [-update-ms 100]
//! nri-rs-adaptation-bench -plugin MODULE -mode wasm [-n 5000] [-warmup 500] [-registrations 3]
//! ```
//!
//! `NRI_BENCH_METRICS=1`: `nri-metrics` records every plugin call. The
//! adaptation runs on a current-thread tokio runtime; the requests are made
//! from a spawned task, as a runtime's request handlers make them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::{
    Container, ContainerEviction, ContainerState, ContainerUpdate, PodSandbox,
    RemoveContainerRequest, StartContainerRequest, StopContainerRequest,
};
use nri_interop::bench::{
    create_envelope, create_request, proc_stat, status_kib, Latency, Report, Window,
};
use prost::Message;
use serde_json::json;
use tokio::sync::mpsc;

/// A failed measurement, reported on stderr.
type Failure = String;

/// Length of one window of the load mode.
const LOAD_WINDOW: Duration = Duration::from_secs(5);

/// Command-line options (Go `flag` style: `-name value`).
#[derive(Debug)]
struct Args {
    plugin: PathBuf,
    mode: String,
    plugins: usize,
    n: usize,
    warmup: usize,
    registrations: usize,
    containers: usize,
    rounds: usize,
    rate: usize,
    duration: usize,
    update_ms: usize,
    /// `plugin_busy_poll` of our runtime; `None`: the adaptation's default.
    busy_poll: Option<Duration>,
}

fn parse_args() -> Result<Args, Failure> {
    let mut args = Args {
        plugin: PathBuf::new(),
        mode: "create".into(),
        plugins: 1,
        n: 5000,
        warmup: 500,
        registrations: 10,
        containers: 1000,
        rounds: 5,
        rate: 100,
        duration: 60,
        update_ms: 100,
        busy_poll: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("flag {flag} needs a value"))?;
        let number = || -> Result<usize, Failure> {
            value
                .parse()
                .map_err(|e| format!("flag {flag}: {value:?}: {e}"))
        };
        match flag.trim_start_matches('-') {
            "plugin" => args.plugin = PathBuf::from(&value),
            "mode" => args.mode = value.clone(),
            "plugins" => args.plugins = number()?,
            "n" => args.n = number()?,
            "warmup" => args.warmup = number()?,
            "registrations" => args.registrations = number()?,
            "containers" => args.containers = number()?,
            "rounds" => args.rounds = number()?,
            "rate" => args.rate = number()?,
            "duration" => args.duration = number()?,
            "update-ms" => args.update_ms = number()?,
            "busy-poll-us" => {
                args.busy_poll = Some(Duration::from_micros(number()? as u64));
            }
            other => return Err(format!("unknown flag -{other}")),
        }
    }
    if args.plugin.as_os_str().is_empty()
        || !(1..=40).contains(&args.plugins)
        || args.n == 0
        || args.containers < 10
        || args.rounds == 0
        || args.rate == 0
        || args.duration == 0
        || args.update_ms == 0
    {
        return Err(
            "need -plugin; -plugins in 1..40, -n, -rounds, -rate, -duration, \
                    -update-ms positive, -containers at least 10"
                .into(),
        );
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("nri-rs-adaptation-bench: {err}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("nri-rs-adaptation-bench: tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // The runtime's requests are made from a task, as a runtime's request
    // handlers make them, not from the future the thread blocks on (which
    // tokio polls only after one more look at its event loop).
    let run = rt.spawn(async move {
        match args.mode.as_str() {
            "create" => run_create(&args).await,
            "lifecycle" => run_lifecycle(&args).await,
            "sync" => run_sync(&args).await,
            "load" => run_load(&args).await,
            "wasm" => run_wasm(&args).await,
            other => Err(format!("unknown -mode {other}")),
        }
    });
    let result = rt
        .block_on(run)
        .unwrap_or_else(|e| Err(format!("bench task failed: {e}")));
    rt.shutdown_timeout(Duration::from_secs(5));
    match result.and_then(|r| serde_json::to_string_pretty(&r).map_err(|e| e.to_string())) {
        Ok(doc) => {
            println!("{doc}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("nri-rs-adaptation-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

/// A temporary directory with the adaptation's `plugins` and `conf`.
fn bench_dir() -> Result<tempfile::TempDir, Failure> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    for sub in ["plugins", "conf"] {
        std::fs::create_dir(dir.path().join(sub)).map_err(|e| format!("mkdir: {e}"))?;
    }
    Ok(dir)
}

/// One completed Synchronize: its start and end in the hook.
type SyncTimes = (Instant, Instant);

/// The runtime side: the table offered to every plugin, and a note each
/// time a plugin finished its Synchronize.
struct Hooks {
    pods: Vec<PodSandbox>,
    containers: Vec<Container>,
    synced: mpsc::UnboundedSender<SyncTimes>,
    updates: Arc<AtomicU64>,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Hooks {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let start = Instant::now();
        sync.synchronize(&self.pods, &self.containers).await?;
        let _ = self.synced.send((start, Instant::now()));
        Ok(())
    }

    async fn update_containers(
        &self,
        _plugin: &str,
        updates: Vec<ContainerUpdate>,
        _evictions: Vec<ContainerEviction>,
    ) -> Result<Vec<ContainerUpdate>, BoxError> {
        self.updates
            .fetch_add(updates.len() as u64, Ordering::Relaxed);
        Ok(Vec::new())
    }
}

/// The adaptation, its directory and the plugin binary.
struct Bench {
    nri: Adaptation,
    dir: tempfile::TempDir,
    socket: PathBuf,
    plugin: PathBuf,
    synced: mpsc::UnboundedReceiver<SyncTimes>,
    updates: Arc<AtomicU64>,
}

/// Time between two timed registrations, for the runtime to notice the
/// last plugin's closed connection.
const REGISTRATION_PAUSE: Duration = Duration::from_millis(50);

/// One plugin registered by our runtime.
struct Registered {
    /// From the runtime's first Synchronize message to its end.
    inside: Duration,
    /// From starting the plugin process to the end of its Synchronize.
    from_start: Duration,
    /// CPU ticks of the runtime process meanwhile.
    runtime_ticks: u64,
    /// CPU ticks of the plugin process from its start.
    plugin_ticks: u64,
}

/// Registration times of one run, each list in the order measured.
#[derive(Default)]
struct Registrations {
    /// Registered by our runtime, from process start.
    ours: Vec<Duration>,
    /// From process start to the plugin's connection to a bare socket.
    connect: Vec<Duration>,
    /// Registered by the scripted runtime, from process start.
    scripted: Vec<Duration>,
}

/// A socket that a bare listener accepts plugins on (no runtime behind it).
struct BareSocket {
    path: PathBuf,
    listener: tokio::net::UnixListener,
}

/// Plugin processes, killed on drop.
struct Plugins(Vec<Child>);

impl Plugins {
    fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Plugins {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Bench {
    async fn start(
        plugin: &Path,
        busy_poll: Option<Duration>,
        pods: Vec<PodSandbox>,
        containers: Vec<Container>,
    ) -> Result<Bench, Failure> {
        let dir = bench_dir()?;
        let socket = dir.path().join("nri.sock");
        let (tx, mut synced) = mpsc::unbounded_channel();
        let updates = Arc::new(AtomicU64::new(0));
        let hooks = Hooks {
            pods,
            containers,
            synced: tx,
            updates: Arc::clone(&updates),
        };
        let builder = Adaptation::builder("nri-adaptation-bench", "v0.0.0", Arc::new(hooks))
            .plugin_path(dir.path().join("plugins"))
            .plugin_config_path(dir.path().join("conf"))
            .socket_path(&socket)
            // The whole split Synchronize must fit in one request timeout.
            .request_timeout(Duration::from_secs(120))
            .plugin_busy_poll(busy_poll.unwrap_or_else(nri_adaptation::default_plugin_busy_poll));
        // NRI_BENCH_METRICS=1: the Prometheus metrics of nri-metrics record
        // every call (for measuring their cost; docs/observability.md).
        let builder = if std::env::var_os("NRI_BENCH_METRICS").is_some_and(|v| v == "1") {
            builder.metrics(Arc::new(nri_metrics::NriMetrics::new()))
        } else {
            builder
        };
        let nri = builder.build();
        nri.start()
            .await
            .map_err(|e| format!("start adaptation: {e}"))?;
        // Start synchronizes the (absent) pre-installed plugins once.
        while synced.try_recv().is_ok() {}
        Ok(Bench {
            nri,
            dir,
            socket,
            plugin: plugin.to_path_buf(),
            synced,
            updates,
        })
    }

    /// Starts one external plugin with its configuration file.
    fn spawn(&self, idx: usize, name: &str, config: &serde_json::Value) -> Result<Child, Failure> {
        self.spawn_at(&self.socket, idx, name, config)
    }

    /// Starts one external plugin that connects to `socket`.
    fn spawn_at(
        &self,
        socket: &Path,
        idx: usize,
        name: &str,
        config: &serde_json::Value,
    ) -> Result<Child, Failure> {
        let path = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&path, config.to_string()).map_err(|e| format!("write config: {e}"))?;
        Command::new(&self.plugin)
            .arg("-config")
            .arg(&path)
            .args(["-name", name, "-idx", &format!("{idx:02}"), "-socket"])
            .arg(socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {}: {e}", self.plugin.display()))
    }

    /// Starts plugins 0..count-1, plugin `i` configured by `config(i)`, and
    /// waits until every one's annotation shows in a CreateContainer reply.
    async fn start_plugins(
        &mut self,
        count: usize,
        config: impl Fn(usize) -> serde_json::Value,
    ) -> Result<Plugins, Failure> {
        let mut plugins = Plugins(Vec::with_capacity(count));
        for i in 0..count {
            plugins
                .0
                .push(self.spawn(i, &format!("bench{i}"), &config(i))?);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        // Each probe creates a container of its own (ids below zero): a
        // plugin that registers during a probe was synchronized without
        // that container in the runtime's listing, so our runtime takes it
        // for gone and never shows that plugin its later events.
        for probe in 1.. {
            let reply = self.nri.create_container(create_request(-probe)).await;
            let adjusted = match &reply {
                Ok(r) => r.adjust.as_ref().map_or(0, |a| a.annotations.len()),
                Err(_) => 0,
            };
            if adjusted == count {
                break;
            }
            // A plugin that exited (its registration refused or timed out)
            // never adjusts: say so at once, and what the last call gave.
            let exited: Vec<String> = plugins
                .0
                .iter_mut()
                .enumerate()
                .filter_map(|(i, c)| Some(format!("bench{i} {}", c.try_wait().ok()??)))
                .collect();
            if !exited.is_empty() || Instant::now() > deadline {
                let last = reply.map_or_else(|e| e.to_string(), |_| format!("{adjusted} adjusted"));
                return Err(format!(
                    "{count} plugins did not all adjust within 30 s (last call: {last}; exited: {})",
                    exited.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        while self.synced.try_recv().is_ok() {}
        Ok(plugins)
    }

    /// Starts one plugin that our runtime registers and times it to the end
    /// of its Synchronize; the plugin is stopped before this returns.
    async fn register_one(
        &mut self,
        idx: usize,
        name: &str,
        limit: Duration,
    ) -> Result<Registered, Failure> {
        let config = json!({"events": ["CreateContainer"]});
        let runtime_before = process_cpu_ticks(std::process::id())?;
        let began = Instant::now();
        let child = Plugins(vec![self.spawn(idx, name, &config)?]);
        let (start, end) = tokio::time::timeout(limit, self.synced.recv())
            .await
            .map_err(|_| format!("{name}: plugin not synchronized within {limit:?}"))?
            .ok_or("hooks gone")?;
        let (runtime, plugin) = cpu_ticks(&child.pids())?;
        Ok(Registered {
            inside: end - start,
            from_start: end - began,
            runtime_ticks: runtime.saturating_sub(runtime_before),
            plugin_ticks: plugin,
        })
    }

    /// Times `count` registrations of each kind, interleaved so that a
    /// slow stretch of the machine falls on all three alike, each
    /// [`REGISTRATION_PAUSE`] after the one before: by our runtime (process
    /// start to the end of its Synchronize); from process start to the
    /// plugin's connection to a bare socket that nothing serves (what every
    /// registration costs before a runtime sees the plugin, whichever
    /// runtime it is); and by a scripted runtime (process start to the end
    /// of its Synchronize; see [`Bench::scripted_one`]).
    async fn registrations(&mut self, count: usize) -> Result<Registrations, Failure> {
        let config = json!({"events": ["CreateContainer"]});
        let bare = self.listen("bare")?;
        let scripted = self.listen("scripted")?;
        let script = Script::new()?;
        let mut times = Registrations::default();
        for i in 0..count {
            let ours = self
                .register_one(90 + i % 10, &format!("reg{i}"), Duration::from_secs(30))
                .await?;
            times.ours.push(ours.from_start);
            tokio::time::sleep(REGISTRATION_PAUSE).await;

            let name = format!("bare{i}");
            let began = Instant::now();
            let child = Plugins(vec![self.spawn_at(
                &bare.path,
                80 + i % 10,
                &name,
                &config,
            )?]);
            let conn = accept_plugin(&bare.listener, &name).await?;
            times.connect.push(began.elapsed());
            drop(conn);
            drop(child);
            tokio::time::sleep(REGISTRATION_PAUSE).await;

            let (from_start, _) = self
                .scripted_one(&scripted, &script, 70 + i % 10, &format!("scripted{i}"))
                .await?;
            times.scripted.push(from_start);
            tokio::time::sleep(REGISTRATION_PAUSE).await;
        }
        Ok(times)
    }

    /// A bare listener on a socket of its own in the bench's directory.
    fn listen(&self, name: &str) -> Result<BareSocket, Failure> {
        let path = self.dir.path().join(format!("{name}.sock"));
        let listener = tokio::net::UnixListener::bind(&path)
            .map_err(|e| format!("listen on {}: {e}", path.display()))?;
        Ok(BareSocket { path, listener })
    }

    /// Starts one plugin that connects to `bare` and registers it with
    /// a scripted runtime: a bare listener that answers RegisterPlugin and
    /// sends Configure and Synchronize as frames encoded in advance
    /// (`script`), reading the plugin's frames without decoding more than
    /// their headers. No runtime can register a plugin in less time: what
    /// is left is the plugin's own part. Returns the time from the process
    /// start, and from the first Synchronize message, to the reply to the
    /// last one; the plugin is stopped before this returns.
    async fn scripted_one(
        &self,
        bare: &BareSocket,
        script: &Script,
        idx: usize,
        name: &str,
    ) -> Result<(Duration, Duration), Failure> {
        let config = json!({"events": ["CreateContainer"]});
        let began = Instant::now();
        let child = Plugins(vec![self.spawn_at(&bare.path, idx, name, &config)?]);
        let conn = accept_plugin(&bare.listener, name).await?;
        // Served with blocking calls on this thread: nothing else is
        // waiting for it meanwhile, and no task hand-over adds time.
        let mut conn = conn.into_std().map_err(|e| format!("{name}: {e}"))?;
        let (sync_started, ended) = script
            .serve(&mut conn, &mut Pending::new())
            .map_err(|e| format!("{name}: {e}"))?;
        drop(conn);
        drop(child);
        Ok((ended - began, ended - sync_started))
    }

    async fn stop(self) {
        self.nri.stop().await;
    }
}

/// The runtime's side of a registration, encoded in advance: the reply to
/// RegisterPlugin (its stream id filled in when the request arrives), the
/// Configure request and the Synchronize request with empty lists.
struct Script {
    configure: Vec<u8>,
    /// One frame per Synchronize message, the last without `more`.
    synchronize: Vec<Vec<u8>>,
}

/// Stream ids of the scripted runtime's two requests.
const SCRIPT_CONFIGURE_ID: u32 = 1;
const SCRIPT_SYNCHRONIZE_ID: u32 = 3;

impl Script {
    /// Registration with empty pod and container lists.
    fn new() -> Result<Script, Failure> {
        Script::with_table(&[], &[])
    }

    /// Registration offering `pods` and `containers`, split as the runtime
    /// splits a table above the message size limit (pods first, each
    /// message as full as it can be).
    fn with_table(pods: &[PodSandbox], containers: &[Container]) -> Result<Script, Failure> {
        use nri_api::service::{plugin as method, PLUGIN_SERVICE};
        let request = |id: u32, method: &str, payload: Vec<u8>| {
            let envelope = nri_ttrpc::proto::Request {
                service: PLUGIN_SERVICE.into(),
                method: method.into(),
                payload,
                timeout_nano: 2_000_000_000,
                metadata: Vec::new(),
            }
            .encode_to_vec();
            mux_frame(
                nri_mux::PLUGIN_SERVICE_CONN,
                id,
                nri_ttrpc::frame::MESSAGE_TYPE_REQUEST,
                &envelope,
            )
        };
        let configure = nri_api::ConfigureRequest {
            config: String::new(),
            runtime_name: "nri-rs-adaptation-bench".into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            registration_timeout: 5000,
            request_timeout: 2000,
            nri_version: nri_api::NRI_VERSION.to_string(),
        }
        .encode_to_vec();
        // Room for the request envelope around each message.
        let budget = nri_ttrpc::MAX_MESSAGE_LEN - 1024;
        let item_len = |len: usize| 1 + prost::length_delimiter_len(len) + len;
        let mut messages = vec![nri_api::SynchronizeRequest::default()];
        let mut used = 2;
        let mut room = |len: usize, messages: &mut Vec<nri_api::SynchronizeRequest>| {
            if used + len > budget {
                messages.push(nri_api::SynchronizeRequest::default());
                used = 2;
            }
            used += len;
        };
        for pod in pods {
            room(item_len(pod.encoded_len()), &mut messages);
            if let Some(last) = messages.last_mut() {
                last.pods.push(pod.clone());
            }
        }
        for ctr in containers {
            room(item_len(ctr.encoded_len()), &mut messages);
            if let Some(last) = messages.last_mut() {
                last.containers.push(ctr.clone());
            }
        }
        let count = messages.len();
        let synchronize = messages
            .into_iter()
            .enumerate()
            .map(|(i, mut msg)| {
                msg.more = i + 1 < count;
                let id = SCRIPT_SYNCHRONIZE_ID + 2 * i as u32;
                request(id, method::SYNCHRONIZE, msg.encode_to_vec())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Script {
            configure: request(SCRIPT_CONFIGURE_ID, method::CONFIGURE, configure)?,
            synchronize,
        })
    }

    /// The stream id of the first request after this script.
    fn next_stream_id(&self) -> u32 {
        SCRIPT_SYNCHRONIZE_ID + 2 * self.synchronize.len() as u32
    }

    /// Registers the plugin on `conn` (made blocking), reading its
    /// frames into `pending`; returns when the first Synchronize message
    /// was sent and when the reply to the last arrived.
    fn serve(
        &self,
        conn: &mut std::os::unix::net::UnixStream,
        pending: &mut Pending,
    ) -> Result<(Instant, Instant), Failure> {
        use std::io::Write;
        conn.set_nonblocking(false)
            .and_then(|()| conn.set_read_timeout(Some(Duration::from_secs(10))))
            .map_err(|e| format!("socket: {e}"))?;
        let (register, _) = pending.read(conn, nri_mux::RUNTIME_SERVICE_CONN, None, false)?;
        // An empty response envelope: status OK, empty reply.
        let mut out = mux_frame(
            nri_mux::RUNTIME_SERVICE_CONN,
            register,
            nri_ttrpc::frame::MESSAGE_TYPE_RESPONSE,
            &[],
        )?;
        out.extend_from_slice(&self.configure);
        conn.write_all(&out).map_err(|e| format!("write: {e}"))?;
        let plugin_conn = nri_mux::PLUGIN_SERVICE_CONN;
        pending.read(conn, plugin_conn, Some(SCRIPT_CONFIGURE_ID), false)?;
        let started = Instant::now();
        for (i, message) in self.synchronize.iter().enumerate() {
            conn.write_all(message).map_err(|e| format!("write: {e}"))?;
            let id = SCRIPT_SYNCHRONIZE_ID + 2 * i as u32;
            pending.read(conn, plugin_conn, Some(id), false)?;
        }
        Ok((started, Instant::now()))
    }
}

/// The smallest runtime a chain of plugins can have: registered by a
/// [`Script`], each plugin sent its request recorded in advance (only the
/// stream id written in), replies read and not decoded; the sockets on the
/// event loop (registered for reading only, as the mux's), read in
/// blocking calls for [`Call::Blocking`].
struct Chain {
    conns: Vec<nri_mux::UnixTrunk>,
    /// Each plugin's request frame; the ttRPC stream id is at
    /// [`STREAM_ID_AT`].
    frames: Vec<Vec<u8>>,
    next_id: u32,
    pending: Vec<Pending>,
    plugins: Plugins,
    /// The name each plugin's adjustments are merged under
    /// ([`chain_plugin_name`]), made once so that no call times its making.
    names: Vec<String>,
}

/// Where the ttRPC stream id sits in a frame: after the mux header and
/// the ttRPC length.
const STREAM_ID_AT: usize = nri_mux::HEADER_LEN + 4;

/// How [`Chain::measure`] makes each call.
#[derive(Clone, Copy)]
enum Call {
    /// The recorded frames, each reply read in blocking calls.
    Blocking,
    /// The recorded frames, each reply polled for up to this long (as
    /// `nri_ttrpc::Client::with_busy_poll` does), then awaited.
    Polled(Duration),
    /// The protocol's own work: each request encoded from the result
    /// merged so far, each reply decoded and merged, polled as above.
    Encoding(Duration),
}

impl Chain {
    /// Starts `count` plugins as `bench` would (same binary, same
    /// configurations) on a socket of their own, `socket` in the bench's
    /// directory, and registers them.
    async fn start(bench: &Bench, count: usize, socket: &str) -> Result<Chain, Failure> {
        use std::io::Write;
        let socket = bench.dir.path().join(socket);
        let listener = tokio::net::UnixListener::bind(&socket)
            .map_err(|e| format!("listen on {}: {e}", socket.display()))?;
        let script = Script::new()?;
        let mut conns = Vec::with_capacity(count);
        let mut pending: Vec<Pending> = (0..count).map(|_| Pending::new()).collect();
        let mut plugins = Plugins(Vec::with_capacity(count));
        for (i, pending) in pending.iter_mut().enumerate() {
            plugins
                .0
                .push(bench.spawn_at(&socket, i, &format!("chain{i}"), &bench_config(i))?);
            let conn = accept_plugin(&listener, &format!("chain {i}")).await?;
            let mut conn = conn.into_std().map_err(|e| format!("chain {i}: {e}"))?;
            script
                .serve(&mut conn, pending)
                .map_err(|e| format!("chain {i}: {e}"))?;
            conns.push(conn);
        }
        // One call as a runtime makes it, each reply decoded and merged, so
        // that each plugin's frame holds the request it gets from a runtime.
        let id = script.next_stream_id();
        let mut result = nri_adaptation::CreateResult::new(create_request(0));
        let mut frames = Vec::with_capacity(count);
        let names: Vec<String> = (0..count).map(chain_plugin_name).collect();
        for (i, (conn, pending)) in conns.iter_mut().zip(&mut pending).enumerate() {
            let frame = request_frame(&result, id)?;
            conn.write_all(&frame)
                .map_err(|e| format!("chain {i}: write: {e}"))?;
            let (_, body) = pending.read(conn, nri_mux::PLUGIN_SERVICE_CONN, Some(id), true)?;
            merge_reply(&mut result, &names[i], &body).map_err(|e| format!("chain {i}: {e}"))?;
            frames.push(frame);
        }
        let conns = conns
            .into_iter()
            .map(nri_mux::UnixTrunk::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("chain: {e}"))?;
        Ok(Chain {
            conns,
            frames,
            next_id: id + 2,
            pending,
            plugins,
            names,
        })
    }

    /// `warmup` calls, then `n` measured ones, made as `how` says, the
    /// first for container `first`; with [`Call::Encoding`], each measured
    /// call's time spent on that work (none for the other calls).
    async fn measure(
        &mut self,
        first: usize,
        (warmup, n): (usize, usize),
        how: Call,
    ) -> Result<(Timed, Vec<Duration>), Failure> {
        let blocking = matches!(how, Call::Blocking);
        if blocking {
            self.set_blocking(true)?;
        }
        let (mut timed, mut work) = (Timed::new(warmup, n, &self.plugins), Vec::new());
        while let Some(i) = timed.next()? {
            let spent = match how {
                Call::Blocking => self.call_blocking().map(|()| None),
                Call::Polled(poll) => self.call(poll).await.map(|()| None),
                Call::Encoding(poll) => self.call_encoding(first + i, poll).await.map(Some),
            }
            .map_err(|e| format!("chain, call {i}: {e}"))?;
            work.extend(spent.filter(|_| i >= warmup));
        }
        if blocking {
            self.set_blocking(false)?;
        }
        Ok((timed, work))
    }

    /// Puts the sockets in blocking mode, or back in non-blocking mode.
    fn set_blocking(&self, blocking: bool) -> Result<(), Failure> {
        for conn in &self.conns {
            conn.get_ref()
                .set_nonblocking(!blocking)
                .map_err(|e| format!("chain: {e}"))?;
        }
        Ok(())
    }

    /// One call through every plugin, one after the other, each reply
    /// read as [`Chain::call`] reads it (whatever the socket holds, frames
    /// taken from the buffer), but in blocking reads.
    fn call_blocking(&mut self) -> Result<(), Failure> {
        use std::io::Write;
        let id = next_request(&mut self.frames, &mut self.next_id);
        let calls = self.conns.iter().zip(&mut self.pending);
        for ((conn, pending), frame) in calls.zip(&self.frames) {
            let mut sock = conn.get_ref();
            sock.write_all(frame).map_err(|e| format!("write: {e}"))?;
            pending.read(&mut sock, nri_mux::PLUGIN_SERVICE_CONN, Some(id), false)?;
        }
        Ok(())
    }

    /// One call doing the protocol's own work ([`Call::Encoding`]); returns
    /// the time spent on that work.
    async fn call_encoding(&mut self, i: usize, poll: Duration) -> Result<Duration, Failure> {
        use tokio::io::AsyncWriteExt;
        let id = self.next_id;
        self.next_id += 2;
        let started = Instant::now();
        let mut result = nri_adaptation::CreateResult::new(create_request(i as i64));
        let mut work = started.elapsed();
        let calls = self
            .conns
            .iter_mut()
            .zip(&mut self.pending)
            .zip(&self.names);
        for (k, ((conn, pending), name)) in calls.enumerate() {
            let started = Instant::now();
            let frame = request_frame(&result, id)?;
            work += started.elapsed();
            conn.write_all(&frame)
                .await
                .map_err(|e| format!("write: {e}"))?;
            let body = await_reply(conn, pending, id, poll, true).await?;
            let started = Instant::now();
            merge_reply(&mut result, name, &body).map_err(|e| format!("plugin {k}: {e}"))?;
            work += started.elapsed();
        }
        Ok(work)
    }

    /// One call through every plugin, each reply polled for up to `poll`,
    /// then awaited.
    async fn call(&mut self, poll: Duration) -> Result<(), Failure> {
        use tokio::io::AsyncWriteExt;
        let id = next_request(&mut self.frames, &mut self.next_id);
        let calls = self.conns.iter_mut().zip(&mut self.pending);
        for ((conn, pending), frame) in calls.zip(&self.frames) {
            conn.write_all(frame)
                .await
                .map_err(|e| format!("write: {e}"))?;
            await_reply(conn, pending, id, poll, false).await?;
        }
        Ok(())
    }
}

/// The next plugin's CreateContainer request frame, ttRPC stream `id`,
/// encoded from the result merged so far.
fn request_frame(result: &nri_adaptation::CreateResult, id: u32) -> Result<Vec<u8>, Failure> {
    let envelope = create_envelope(result.request()).encode_to_vec();
    mux_frame(
        nri_mux::PLUGIN_SERVICE_CONN,
        id,
        nri_ttrpc::frame::MESSAGE_TYPE_REQUEST,
        &envelope,
    )
}

/// The name the chains merge plugin `i`'s adjustments under, at the
/// recording call and in the encoding chain alike.
fn chain_plugin_name(i: usize) -> String {
    format!("{i:02}-chain{i}")
}

/// Decodes `body`, the ttRPC message of a plugin's CreateContainer reply,
/// and merges its adjustments into `result` under the plugin's `name`.
fn merge_reply(
    result: &mut nri_adaptation::CreateResult,
    name: &str,
    body: &[u8],
) -> Result<(), Failure> {
    let reply = nri_ttrpc::proto::Response::decode(body).map_err(|e| format!("reply: {e}"))?;
    if let Some(status) = reply.status.filter(|s| s.code != 0) {
        return Err(format!("CreateContainer failed: {}", status.message));
    }
    let reply = nri_api::CreateContainerResponse::decode(&reply.payload[..])
        .map_err(|e| format!("reply: {e}"))?;
    result.apply(name, reply).map_err(|e| format!("merge: {e}"))
}

/// Writes the next client stream id (odd, counting by two) into every
/// request frame of `frames` and returns it.
fn next_request(frames: &mut [Vec<u8>], next_id: &mut u32) -> u32 {
    let id = *next_id;
    *next_id += 2;
    for frame in frames {
        frame[STREAM_ID_AT..STREAM_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
    }
    id
}

/// Bytes read from one plugin's connection and not yet consumed. Every
/// message is expected in one mux frame (the scripted runtime's messages
/// and the plugins' replies are small).
struct Pending {
    buf: Vec<u8>,
    /// How much of `buf` holds bytes read.
    len: usize,
}

/// What one read may take from the socket.
const READ_CHUNK: usize = 4096;

impl Pending {
    fn new() -> Pending {
        Pending {
            buf: vec![0; READ_CHUNK],
            len: 0,
        }
    }

    /// Consumes whole frames until one on mux connection `conn` (with
    /// ttRPC stream id `id`, if given) and returns its stream id and ttRPC
    /// message (empty unless `body`); `None` if it has not arrived yet.
    fn take(
        &mut self,
        conn: u32,
        id: Option<u32>,
        body: bool,
    ) -> Result<Option<(u32, Vec<u8>)>, Failure> {
        let mut at = 0;
        let mut found = None;
        while let Some((on, stream, used)) = complete_frame(&self.buf[at..self.len])? {
            if on == conn && id.is_none_or(|id| id == stream) {
                let start = at + nri_mux::HEADER_LEN + nri_ttrpc::frame::HEADER_LEN;
                let message = match body {
                    true => self.buf[start..at + used].to_vec(),
                    false => Vec::new(),
                };
                found = Some((stream, message));
                at += used;
                break;
            }
            at += used;
        }
        self.buf.copy_within(at..self.len, 0);
        self.len -= at;
        Ok(found)
    }

    /// As [`Pending::take`], reading `from` (blocking) until it arrives.
    fn read(
        &mut self,
        from: &mut impl std::io::Read,
        conn: u32,
        id: Option<u32>,
        body: bool,
    ) -> Result<(u32, Vec<u8>), Failure> {
        loop {
            if let Some(frame) = self.take(conn, id, body)? {
                return Ok(frame);
            }
            let n = from.read(self.spare()).map_err(|e| format!("read: {e}"))?;
            self.filled(n)?;
        }
    }

    /// Room for the next read.
    fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() - self.len < READ_CHUNK {
            self.buf.resize(self.len + READ_CHUNK, 0);
        }
        &mut self.buf[self.len..]
    }

    /// `n` bytes were read into [`Pending::spare`].
    fn filled(&mut self, n: usize) -> Result<(), Failure> {
        if n == 0 {
            return Err("plugin closed its connection".into());
        }
        self.len += n;
        Ok(())
    }
}

/// Reads `conn` until the reply on stream `id` is whole, polled for up to
/// `poll` then awaited; its ttRPC message (empty unless `body`).
async fn await_reply(
    conn: &mut nri_mux::UnixTrunk,
    pending: &mut Pending,
    id: u32,
    poll: Duration,
    body: bool,
) -> Result<Vec<u8>, Failure> {
    use tokio::io::AsyncReadExt;
    let sent = Instant::now();
    loop {
        if let Some((_, message)) = pending.take(nri_mux::PLUGIN_SERVICE_CONN, Some(id), body)? {
            return Ok(message);
        }
        let n = if sent.elapsed() < poll {
            match look(conn, pending.spare()).await {
                Some(n) => n,
                None => {
                    std::thread::yield_now();
                    tokio::task::yield_now().await;
                    continue;
                }
            }
        } else {
            conn.read(pending.spare()).await
        };
        pending.filled(n.map_err(|e| format!("read: {e}"))?)?;
    }
}

/// One read of `conn` if it has bytes (or an error) now; `None` if it has
/// not.
async fn look(conn: &mut nri_mux::UnixTrunk, buf: &mut [u8]) -> Option<std::io::Result<usize>> {
    use std::task::Poll;
    use tokio::io::AsyncRead;
    std::future::poll_fn(|cx| {
        let mut rb = tokio::io::ReadBuf::new(buf);
        Poll::Ready(
            match std::pin::Pin::new(&mut *conn).poll_read(cx, &mut rb) {
                Poll::Ready(r) => Some(r.map(|()| rb.filled().len())),
                Poll::Pending => None,
            },
        )
    })
    .await
}

/// The first whole mux frame in `buf`: its mux connection, the ttRPC
/// stream id it carries and its length; `None` if `buf` holds no whole
/// frame yet.
fn complete_frame(buf: &[u8]) -> Result<Option<(u32, u32, usize)>, Failure> {
    let Some(head) = buf.get(..nri_mux::HEADER_LEN) else {
        return Ok(None);
    };
    let mux = nri_mux::FrameHeader::decode(head.try_into().map_err(|_| "short header")?);
    let total = nri_mux::HEADER_LEN + mux.len as usize;
    let Some(frame) = buf.get(nri_mux::HEADER_LEN..total) else {
        return Ok(None);
    };
    let ttrpc: &[u8; nri_ttrpc::frame::HEADER_LEN] = frame
        .get(..nri_ttrpc::frame::HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or("mux frame shorter than a ttRPC header")?;
    let header = nri_ttrpc::frame::FrameHeader::decode(ttrpc);
    if header.length as usize != frame.len() - nri_ttrpc::frame::HEADER_LEN {
        return Err(format!(
            "a ttRPC message of {} bytes in a mux frame of {}",
            header.length,
            frame.len()
        ));
    }
    Ok(Some((mux.id, header.stream_id, total)))
}

/// The next plugin connecting to `listener`, within 30 s; `who` names it
/// in errors.
async fn accept_plugin(
    listener: &tokio::net::UnixListener,
    who: &str,
) -> Result<tokio::net::UnixStream, Failure> {
    let (conn, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .map_err(|_| format!("{who}: plugin did not connect within 30 s"))?
        .map_err(|e| format!("{who}: accept: {e}"))?;
    Ok(conn)
}

/// One ttRPC message as mux frames on `conn`, split as every mux writes
/// one message ([`nri_mux::encode_frames`]).
fn mux_frame(conn: u32, stream_id: u32, kind: u8, body: &[u8]) -> Result<Vec<u8>, Failure> {
    let length = u32::try_from(body.len()).map_err(|_| "scripted message too long")?;
    let header = nri_ttrpc::frame::FrameHeader {
        length,
        stream_id,
        kind,
        flags: 0,
    };
    let mut out = bytes::BytesMut::new();
    let message = [&header.encode()[..], body].concat();
    nri_mux::encode_frames(&mut out, conn, &message, nri_mux::GO_READ_BUFFER);
    Ok(out.to_vec())
}

/// CreateContainer of container `i` on `nri`, its merged adjustment checked
/// (one annotation from each of `plugins` plugins).
async fn checked_create(nri: &Adaptation, i: usize, plugins: usize) -> Result<(), Failure> {
    let reply = nri
        .create_container(create_request(i as i64))
        .await
        .map_err(|e| format!("CreateContainer {i}: {e}"))?;
    let got = reply.adjust.map_or(0, |a| a.annotations.len());
    match got == plugins {
        true => Ok(()),
        false => Err(format!(
            "CreateContainer {i}: {got} annotations, want {plugins}"
        )),
    }
}

/// The measurement loop of every mode: `warmup` unmeasured calls, then
/// `n` measured ones, each timed from one [`Timed::next`] to the next; the
/// wall time of the measured calls and the CPU ticks over them of this
/// process and of the plugin processes.
struct Timed {
    warmup: usize,
    n: usize,
    pids: Vec<u32>,
    /// Calls started so far.
    started: usize,
    start: Instant,
    began: Instant,
    before: (u64, u64),
    samples: Vec<Duration>,
    wall: Duration,
    ticks: (u64, u64),
}

impl Timed {
    fn new(warmup: usize, n: usize, plugins: &Plugins) -> Timed {
        let now = Instant::now();
        Timed {
            warmup,
            n,
            pids: plugins.pids(),
            started: 0,
            start: now,
            began: now,
            before: (0, 0),
            samples: Vec::with_capacity(n),
            wall: Duration::ZERO,
            ticks: (0, 0),
        }
    }

    /// Ends the call before (its time is a sample if it was measured) and
    /// returns the number of the next one, or `None` after the last.
    fn next(&mut self) -> Result<Option<usize>, Failure> {
        let now = Instant::now();
        if self.started > self.warmup {
            self.samples.push(now - self.start);
        }
        if self.started == self.warmup + self.n {
            self.wall = now - self.began;
            let after = cpu_ticks(&self.pids)?;
            self.ticks = (
                after.0.saturating_sub(self.before.0),
                after.1.saturating_sub(self.before.1),
            );
            return Ok(None);
        }
        if self.started == self.warmup {
            self.before = cpu_ticks(&self.pids)?;
            self.began = Instant::now();
        }
        self.started += 1;
        self.start = Instant::now();
        Ok(Some(self.started - 1))
    }

    /// CPU µs per measured call of this process and of the plugins.
    fn cpu_per_call(&self) -> (f64, f64) {
        let us = |t: u64| t as f64 * 1e6 / USER_HZ / self.samples.len().max(1) as f64;
        (us(self.ticks.0), us(self.ticks.1))
    }
}

/// Calls per turn of [`measure_in_turns`].
const TURN: usize = 50;

/// What [`measure_in_turns`] measured: latency, and CPU time per call of
/// the runtime process and of the plugins (ours, the chain's).
struct Turns {
    ours: Latency,
    chain: Latency,
    runtime_cpu: (f64, f64),
    plugins_cpu: (f64, f64),
}

/// Our runtime's CreateContainer and the chain doing the protocol's own
/// work ([`Call::Encoding`]) on fresh plugins, `args.n`
/// calls each in alternating turns of [`TURN`], so both are measured at
/// the same moments.
async fn measure_in_turns(
    b: &Bench,
    plugins: &Plugins,
    args: &Args,
    window: Duration,
) -> Result<Turns, Failure> {
    let mut chain = Chain::start(b, args.plugins, "turns.sock").await?;
    let encoding = Call::Encoding(window);
    chain.measure(0, (args.warmup, 0), encoding).await?;
    let (mut ours, mut theirs) = (Vec::with_capacity(args.n), Vec::with_capacity(args.n));
    // Ticks of (runtime, plugins) during our turns and during the chain's.
    let (mut ours_ticks, mut chain_ticks) = ((0, 0), (0, 0));
    let add = |sum: &mut (u64, u64), turn: &Timed| {
        sum.0 += turn.ticks.0;
        sum.1 += turn.ticks.1;
    };
    let mut i = args.warmup;
    while ours.len() < args.n {
        let turn = TURN.min(args.n - ours.len());
        let mut timed = Timed::new(0, turn, plugins);
        while let Some(k) = timed.next()? {
            checked_create(&b.nri, i + k, args.plugins).await?;
        }
        add(&mut ours_ticks, &timed);
        ours.extend(timed.samples);
        i += turn;
        let (timed, _) = chain.measure(i, (0, turn), encoding).await?;
        add(&mut chain_ticks, &timed);
        theirs.extend(timed.samples);
        i += turn;
    }
    let us = |ticks: u64| ticks as f64 * 1e6 / USER_HZ / args.n as f64;
    Ok(Turns {
        ours: summarize(ours)?,
        chain: summarize(theirs)?,
        runtime_cpu: (us(ours_ticks.0), us(chain_ticks.0)),
        plugins_cpu: (us(ours_ticks.1), us(chain_ticks.1)),
    })
}

async fn run_create(args: &Args) -> Result<Report, Failure> {
    let mut b = Bench::start(&args.plugin, args.busy_poll, Vec::new(), Vec::new()).await?;
    let registered = b.registrations(args.registrations).await?;
    let plugins = b.start_plugins(args.plugins, bench_config).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = |field: &str| -> Result<Vec<u64>, Failure> {
        plugins
            .pids()
            .into_iter()
            .map(|pid| status_kib(pid, field))
            .collect()
    };
    let (plugin_rss, plugin_anon) = (status("VmRSS:")?, status("RssAnon:")?);
    let runtime_rss = vm_rss_kib(std::process::id())?;
    let runtime_anon = status_kib(std::process::id(), "RssAnon:")?;
    let mut create = Timed::new(args.warmup, args.n, &plugins);
    while let Some(i) = create.next()? {
        checked_create(&b.nri, i, args.plugins).await?;
    }
    let (runtime_cpu, plugins_cpu) = create.cpu_per_call();
    let runtime_after = vm_rss_kib(std::process::id())?;
    let window = args
        .busy_poll
        .unwrap_or_else(nri_adaptation::default_plugin_busy_poll);
    let turns = measure_in_turns(&b, &plugins, args, window).await?;
    drop(plugins);

    // The same plugins behind the smallest possible runtime: blocking
    // reads, then the same frames awaited on the event loop (first waiting
    // to be woken at once, then polling as our runtime does), then doing
    // the protocol's own work.
    let mut chain = Chain::start(&b, args.plugins, "chain.sock").await?;
    let calls = (args.warmup, args.n);
    let (blocking, _) = chain.measure(0, calls, Call::Blocking).await?;
    let (scripted_runtime_cpu, scripted_plugins_cpu) = blocking.cpu_per_call();
    let (looped, _) = chain
        .measure(0, calls, Call::Polled(Duration::ZERO))
        .await?;
    let polling = match window.is_zero() {
        true => None,
        false => Some(chain.measure(0, calls, Call::Polled(window)).await?.0),
    };
    let (encoding, encoding_work) = chain.measure(0, calls, Call::Encoding(window)).await?;
    drop(chain);
    b.stop().await;
    Ok(Report {
        mode: "create".into(),
        event_loop_runtime_cpu_us_per_call: Some(looped.cpu_per_call().0),
        event_loop_chain: Some(summarize(looped.samples)?),
        busy_poll_us: Some(window.as_secs_f64() * 1e6),
        polling_runtime_cpu_us_per_call: polling.as_ref().map(|p| p.cpu_per_call().0),
        polling_chain: polling.map(|p| summarize(p.samples)).transpose()?,
        encoding_runtime_cpu_us_per_call: Some(encoding.cpu_per_call().0),
        encoding_chain_work: Some(summarize(encoding_work)?),
        encoding_chain: Some(summarize(encoding.samples)?),
        turns_create: Some(turns.ours),
        turns_encoding_chain: Some(turns.chain),
        turns_runtime_cpu_us_per_call: Some(turns.runtime_cpu),
        turns_plugins_cpu_us_per_call: Some(turns.plugins_cpu),
        scripted_runtime_cpu_us_per_call: Some(scripted_runtime_cpu),
        scripted_plugins_cpu_us_per_call: Some(scripted_plugins_cpu),
        scripted_chain: Some(summarize(blocking.samples)?),
        runtime_cpu_us_per_call: Some(runtime_cpu),
        plugins_cpu_us_per_call: Some(plugins_cpu),
        create: Some(summarize(create.samples)?),
        registration: summarize_any(&registered.ours)?,
        registration_samples_us: micros(&registered.ours),
        plugin_connect: summarize_any(&registered.connect)?,
        plugin_connect_samples_us: micros(&registered.connect),
        plugin_scripted: summarize_any(&registered.scripted)?,
        plugin_scripted_samples_us: micros(&registered.scripted),
        plugin_rss_kib: plugin_rss,
        plugin_anon_kib: plugin_anon,
        runtime_rss_kib: Some(runtime_rss),
        runtime_anon_kib: Some(runtime_anon),
        runtime_rss_after_kib: Some(runtime_after),
        plugins: args.plugins,
        iterations: args.n,
        ..Default::default()
    })
}

/// One lifecycle (create, start, stop, remove) of container `i` through
/// `plugins` plugins, each of which must adjust the creation.
async fn one_lifecycle(nri: &Adaptation, i: usize, plugins: usize) -> Result<(), Failure> {
    checked_create(nri, i, plugins).await?;
    let req = create_request(i as i64);
    let (pod, mut ctr) = (req.pod, req.container);
    if let Some(c) = ctr.as_mut() {
        c.state = ContainerState::ContainerRunning as i32;
    }
    nri.start_container(StartContainerRequest {
        pod: pod.clone(),
        container: ctr.clone(),
    })
    .await
    .map_err(|e| format!("StartContainer {i}: {e}"))?;
    if let Some(c) = ctr.as_mut() {
        c.state = ContainerState::ContainerStopped as i32;
    }
    nri.stop_container(StopContainerRequest {
        pod: pod.clone(),
        container: ctr.clone(),
    })
    .await
    .map_err(|e| format!("StopContainer {i}: {e}"))?;
    nri.remove_container(RemoveContainerRequest {
        pod,
        container: ctr,
    })
    .await
    .map_err(|e| format!("RemoveContainer {i}: {e}"))?;
    Ok(())
}

async fn run_lifecycle(args: &Args) -> Result<Report, Failure> {
    let mut b = Bench::start(&args.plugin, args.busy_poll, Vec::new(), Vec::new()).await?;
    let plugins = b.start_plugins(args.plugins, lifecycle_config).await?;
    let mut cycles = Timed::new(args.warmup, args.n, &Plugins(Vec::new()));
    while let Some(i) = cycles.next()? {
        one_lifecycle(&b.nri, i, args.plugins).await?;
    }
    drop(plugins);
    b.stop().await;
    Ok(Report {
        mode: "lifecycle".into(),
        lifecycles_per_s: Some(args.n as f64 / cycles.wall.as_secs_f64()),
        lifecycle: Some(summarize(cycles.samples)?),
        plugins: args.plugins,
        iterations: args.n,
        ..Default::default()
    })
}

/// Container id the unsolicited updates of the load mode name.
const LOAD_UPDATE_TARGET: &str = "load-ctr";

async fn run_load(args: &Args) -> Result<Report, Failure> {
    let mut b = Bench::start(&args.plugin, args.busy_poll, Vec::new(), Vec::new()).await?;
    let update_ms = args.update_ms;
    let plugins = b
        .start_plugins(args.plugins, |i| load_config(i, update_ms))
        .await?;
    for i in 0..args.warmup {
        one_lifecycle(&b.nri, i, args.plugins).await?;
    }
    let rss_start = vm_rss_kib(std::process::id())?;
    let updates_start = b.updates.load(Ordering::Relaxed);
    let period = Duration::from_secs_f64(1.0 / args.rate as f64);
    let total = Duration::from_secs(args.duration as u64);
    let windows = (total.as_nanos() / LOAD_WINDOW.as_nanos()).max(1) as usize;
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); windows];
    let mut all = Vec::new();
    let mut late = 0;
    let t0 = tokio::time::Instant::now();
    for n in 0u32.. {
        let offset = period * n;
        if offset >= total {
            break;
        }
        let due = t0 + offset;
        if tokio::time::Instant::now() > due {
            late += 1;
        }
        tokio::time::sleep_until(due).await;
        one_lifecycle(&b.nri, args.warmup + n as usize, args.plugins).await?;
        let latency = due.elapsed();
        let w = ((offset.as_nanos() / LOAD_WINDOW.as_nanos()) as usize).min(windows - 1);
        samples[w].push(latency);
        all.push(latency);
    }
    let rss_end = vm_rss_kib(std::process::id())?;
    let updates = b.updates.load(Ordering::Relaxed) - updates_start;
    drop(plugins);
    b.stop().await;
    let load_windows = samples
        .into_iter()
        .enumerate()
        .map(|(w, s)| window(w, s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Report {
        mode: "load".into(),
        iterations: all.len(),
        lifecycle: Some(summarize(all)?),
        load_windows,
        load_late: Some(late),
        updates_received: Some(updates),
        runtime_rss_kib: Some(rss_start),
        runtime_rss_after_kib: Some(rss_end),
        plugins: args.plugins,
        ..Default::default()
    })
}

/// The summary of window `w` of the load mode.
fn window(w: usize, samples: Vec<Duration>) -> Result<Window, Failure> {
    let count = samples.len();
    let max_us = samples.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1e6);
    let lat = summarize(samples).map_err(|e| format!("load window {w}: {e}"))?;
    Ok(Window {
        start_s: (w as u64) * LOAD_WINDOW.as_secs(),
        count,
        median_us: lat.median_us,
        p99_us: lat.p99_us,
        max_us,
    })
}

async fn run_sync(args: &Args) -> Result<Report, Failure> {
    let (pods, containers) = sync_table(args.containers);
    let bytes = pods.iter().map(Message::encoded_len).sum::<usize>()
        + containers.iter().map(Message::encoded_len).sum::<usize>();
    let pod_count = pods.len();
    let mut b = Bench::start(&args.plugin, args.busy_poll, pods, containers).await?;
    let (mut inside, mut from_start, mut scripted) = (Vec::new(), Vec::new(), Vec::new());
    let (mut runtime_ticks, mut plugin_ticks) = (0, 0);
    for i in 0..args.rounds {
        let limit = Duration::from_secs(180);
        let one = b
            .register_one(50 + i % 10, &format!("sync{i}"), limit)
            .await?;
        inside.push(one.inside);
        from_start.push(one.from_start);
        runtime_ticks += one.runtime_ticks;
        plugin_ticks += one.plugin_ticks;
        tokio::time::sleep(REGISTRATION_PAUSE).await;
    }
    // The same table offered by a scripted runtime, from its first
    // Synchronize message to the reply to the last.
    let script = {
        let (pods, containers) = sync_table(args.containers);
        Script::with_table(&pods, &containers)?
    };
    let bare = b.listen("scripted-sync")?;
    for i in 0..args.rounds {
        let name = format!("scripted-sync{i}");
        let (_, sync) = b.scripted_one(&bare, &script, 70 + i % 10, &name).await?;
        scripted.push(sync);
        tokio::time::sleep(REGISTRATION_PAUSE).await;
    }
    drop(script);
    b.stop().await;
    let per_round = |ticks: u64| ticks as f64 * 1e6 / USER_HZ / args.rounds.max(1) as f64;
    Ok(Report {
        mode: "sync".into(),
        sync_runtime_cpu_us: Some(per_round(runtime_ticks)),
        sync_plugin_cpu_us: Some(per_round(plugin_ticks)),
        sync_samples_us: micros(&inside),
        sync: Some(summarize(inside)?),
        sync_from_start_samples_us: micros(&from_start),
        sync_from_start: Some(summarize(from_start)?),
        sync_scripted_samples_us: micros(&scripted),
        sync_scripted: Some(summarize(scripted)?),
        containers: Some(args.containers),
        pods: Some(pod_count),
        sync_bytes: Some(bytes),
        plugins: 1,
        iterations: args.rounds,
        ..Default::default()
    })
}

/// Starts a runtime whose plugin directory holds the WebAssembly plugin
/// `10-wasm`; returns it and the time from its builder to a completed
/// `start`.
async fn start_wasm(dir: &Path) -> Result<(Adaptation, Duration), Failure> {
    let began = Instant::now();
    let (tx, _synced) = mpsc::unbounded_channel();
    let hooks = Hooks {
        pods: Vec::new(),
        containers: Vec::new(),
        synced: tx,
        updates: Arc::new(AtomicU64::new(0)),
    };
    let nri = Adaptation::builder("nri-adaptation-bench", "v0.0.0", Arc::new(hooks))
        .plugin_path(dir.join("plugins"))
        .plugin_config_path(dir.join("conf"))
        .disable_external_connections()
        .build();
    nri.start()
        .await
        .map_err(|e| format!("start adaptation: {e}"))?;
    let took = began.elapsed();
    if nri.plugins().len() != 1 {
        return Err(format!(
            "the WebAssembly plugin did not start: plugins {:?}",
            nri.plugins()
        ));
    }
    Ok((nri, took))
}

async fn run_wasm(args: &Args) -> Result<Report, Failure> {
    let dir = bench_dir()?;
    let module = dir.path().join("plugins").join("10-wasm");
    std::fs::copy(&args.plugin, &module)
        .map_err(|e| format!("copy {}: {e}", args.plugin.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod: {e}"))?;
    }
    std::fs::write(dir.path().join("conf/10-wasm.conf"), r#"{"tag": "bench"}"#)
        .map_err(|e| format!("write config: {e}"))?;
    // Unmeasured: puts the compiled module in the cache.
    let (nri, _) = start_wasm(dir.path()).await?;
    nri.stop().await;
    let mut startups = Vec::with_capacity(args.registrations);
    for _ in 0..args.registrations {
        let (nri, took) = start_wasm(dir.path()).await?;
        startups.push(took);
        nri.stop().await;
    }
    let (nri, _) = start_wasm(dir.path()).await?;
    let mut calls = Timed::new(1 + args.warmup, args.n, &Plugins(Vec::new()));
    let mut first = Duration::ZERO;
    while let Some(i) = calls.next()? {
        let start = Instant::now();
        wasm_create(&nri, i).await?;
        if i == 0 {
            first = start.elapsed();
        }
    }
    let samples = calls.samples;
    nri.stop().await;
    let (module, work) = module_alone(&module, args).await?;
    Ok(Report {
        mode: "wasm".into(),
        module: Some(summarize(module)?),
        wasm_work: Some(summarize(work)?),
        create: Some(summarize(samples)?),
        startup: if startups.is_empty() {
            None
        } else {
            Some(summarize(startups)?)
        },
        first_create_us: Some(first.as_secs_f64() * 1e6),
        plugins: 1,
        iterations: args.n,
        ..Report::default()
    })
}

/// CreateContainer `i` through the WebAssembly plugin, whose reply carries
/// the container's name in an annotation.
async fn wasm_create(nri: &Adaptation, i: usize) -> Result<(), Failure> {
    let req = create_request(i as i64);
    let name = req.container.as_ref().map(|c| c.name.clone());
    let reply = nri
        .create_container(req)
        .await
        .map_err(|e| format!("CreateContainer {i}: {e}"))?;
    let got = reply
        .adjust
        .and_then(|a| a.annotations.get("nri-wasm/adjusted").cloned());
    match got == name {
        true => Ok(()),
        false => Err(format!(
            "CreateContainer {i}: annotation {got:?}, want {name:?}"
        )),
    }
}

/// The module's part of each CreateContainer of mode wasm: the file loaded
/// with `nri-wasm` alone, and per container the adaptation's two calls
/// (CreateContainer, ValidateContainerAdjustment) with its requests encoded
/// beforehand; second list: the work around them no runtime can skip.
async fn module_alone(path: &Path, args: &Args) -> Result<(Vec<Duration>, Vec<Duration>), Failure> {
    use nri_adaptation::CreateResult;
    use nri_wasm::{WasmEvent, WasmOptions, WasmPlugin};
    const T: Duration = Duration::from_secs(10);
    let module = {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || {
            WasmPlugin::load(&path, "10-wasm", &WasmOptions::default())
        })
        .await
        .map_err(|e| format!("load the module: {e}"))?
        .map_err(|e| format!("load the module: {e}"))?
    };
    let configure = nri_api::ConfigureRequest {
        config: r#"{"tag": "bench"}"#.into(),
        runtime_name: "nri-adaptation-bench".into(),
        runtime_version: "v0.0.0".into(),
        nri_version: nri_api::NRI_VERSION.to_string(),
        ..Default::default()
    };
    module
        .call(WasmEvent::Configure, configure.encode_to_vec(), T)
        .await
        .map_err(|e| format!("Configure: {e}"))?;
    let mut samples = Vec::with_capacity(args.n);
    let mut work = Vec::with_capacity(args.n);
    for i in 0..args.warmup + args.n {
        let req = create_request(i as i64);
        let began = Instant::now();
        let mut result = CreateResult::new(req);
        let encoded = result.request().encode_to_vec();
        let mut worked = began.elapsed();
        let began = Instant::now();
        let reply = module
            .call(WasmEvent::CreateContainer, encoded, T)
            .await
            .map_err(|e| format!("CreateContainer {i}: {e}"))?;
        let create = began.elapsed();
        let began = Instant::now();
        let reply = nri_api::CreateContainerResponse::decode(reply.as_slice())
            .map_err(|e| format!("CreateContainer {i}: reply: {e}"))?;
        let mut validate = nri_api::ValidateContainerAdjustmentRequest {
            pod: result.request().pod.clone(),
            container: result.request().container.clone(),
            plugins: vec![nri_api::PluginInstance {
                name: "wasm".into(),
                index: "10".into(),
            }],
            ..Default::default()
        };
        result
            .apply("10-wasm", reply)
            .map_err(|e| format!("CreateContainer {i}: merge: {e}"))?;
        let outcome = result.into_outcome();
        validate.adjust = outcome.response.adjust;
        validate.update = outcome.response.update;
        validate.owners = Some(outcome.owners.into_proto());
        let validate = validate.encode_to_vec();
        worked += began.elapsed();
        let began = Instant::now();
        let reply = module
            .call(WasmEvent::ValidateContainerAdjustment, validate, T)
            .await
            .map_err(|e| format!("ValidateContainerAdjustment {i}: {e}"))?;
        let validated = began.elapsed();
        let began = Instant::now();
        let verdict = nri_api::ValidateContainerAdjustmentResponse::decode(reply.as_slice())
            .map_err(|e| format!("ValidateContainerAdjustment {i}: reply: {e}"))?;
        worked += began.elapsed();
        if verdict.reject {
            return Err(format!("ValidateContainerAdjustment {i}: rejected"));
        }
        if i >= args.warmup {
            samples.push(create + validated);
            work.push(worked);
        }
    }
    Ok((samples, work))
}

/// The table of mode sync: ten containers per pod, each with four
/// annotations of 1 KiB; the Go program builds the same one.
fn sync_table(containers: usize) -> (Vec<PodSandbox>, Vec<Container>) {
    let pods = (0..containers / 10)
        .map(|p| PodSandbox {
            id: format!("pod{p}"),
            name: format!("pod{p}"),
            uid: format!("uid{p}"),
            namespace: "default".into(),
            ..Default::default()
        })
        .collect();
    let ctrs = (0..containers)
        .map(|c| Container {
            id: format!("ctr{c}"),
            pod_sandbox_id: format!("pod{}", c / 10),
            name: format!("ctr{c}"),
            state: ContainerState::ContainerRunning as i32,
            args: vec!["sleep".into(), "3600".into()],
            env: vec!["PATH=/usr/bin:/bin".into()],
            annotations: (0..4u8)
                .map(|k| {
                    (
                        format!("bench.nri.io/blob-{k}"),
                        char::from(b'a' + k).to_string().repeat(1024),
                    )
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    (pods, ctrs)
}

/// Plugin `i`'s configuration in mode create: one annotation and one
/// variable of its own (`nri-ref-plugin` format).
fn bench_config(i: usize) -> serde_json::Value {
    json!({
        "events": ["CreateContainer"],
        "adjust": {
            "annotations": {format!("bench.nri.io/plugin-{i}"): "on"},
            "env": [{"key": format!("BENCH_PLUGIN_{i}"), "value": "on"}],
        },
    })
}

/// Plugin `i`'s configuration in mode lifecycle.
fn lifecycle_config(i: usize) -> serde_json::Value {
    let mut cfg = bench_config(i);
    cfg["events"] = json!([
        "CreateContainer",
        "StartContainer",
        "StopContainer",
        "RemoveContainer"
    ]);
    cfg
}

/// Plugin `i`'s configuration in mode load: as in lifecycle, plus an
/// unsolicited CPU-shares update of [`LOAD_UPDATE_TARGET`] every `update_ms`.
fn load_config(i: usize, update_ms: usize) -> serde_json::Value {
    let mut cfg = lifecycle_config(i);
    cfg["unsolicited"] = json!([{
        "every_ms": update_ms,
        "updates": [{
            "container_id": LOAD_UPDATE_TARGET,
            "linux": {"resources": {"cpu": {"shares": {"value": 512 + i}}}},
        }],
    }]);
    cfg
}

/// Median and 99th percentile (nearest rank).
/// As [`summarize`], `None` for no samples.
fn summarize_any(samples: &[Duration]) -> Result<Option<Latency>, Failure> {
    if samples.is_empty() {
        Ok(None)
    } else {
        summarize(samples.to_vec()).map(Some)
    }
}

/// Each sample in microseconds.
fn micros(samples: &[Duration]) -> Vec<f64> {
    samples.iter().map(|d| d.as_secs_f64() * 1e6).collect()
}

fn summarize(mut samples: Vec<Duration>) -> Result<Latency, Failure> {
    samples.sort_unstable();
    let rank = |p: f64| {
        nri_interop::bench::nearest_rank(&samples, p)
            .map(|d| d.as_secs_f64() * 1e6)
            .ok_or("no samples")
    };
    Ok(Latency {
        median_us: rank(0.5)?,
        p99_us: rank(0.99)?,
    })
}

/// The resident set size of a process, in KiB.
/// The unit of the CPU times in `/proc/<pid>/stat` (`USER_HZ`, what
/// `sysconf(_SC_CLK_TCK)` returns: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// CPU time (user and system, all threads) so far, in `USER_HZ` ticks, of
/// this process and of the processes `pids` together.
fn cpu_ticks(pids: &[u32]) -> Result<(u64, u64), Failure> {
    let mut sum = 0;
    for &pid in pids {
        sum += process_cpu_ticks(pid)?;
    }
    Ok((process_cpu_ticks(std::process::id())?, sum))
}

/// `utime + stime` of `/proc/<pid>/stat`.
fn process_cpu_ticks(pid: u32) -> Result<u64, Failure> {
    proc_stat(pid).map(|s| s.utime + s.stime)
}

fn vm_rss_kib(pid: u32) -> Result<u64, Failure> {
    status_kib(pid, "VmRSS:")
}
