//! [`WasmPlugin`]: one loaded plugin module, its instance, and the calls
//! into it, run as futures on the caller's task.

use std::cell::OnceCell;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_api::log_request::Level;
use nri_api::LogRequest;
use prost::Message;
use wasmtime::{
    Caller, Extern, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, TypedFunc,
    UpdateDeadline, Val, ValType,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{I32Exit, WasiCtxBuilder};

use crate::engine::{self, Shared};
use crate::error::WasmError;
use crate::event::WasmEvent;

/// The plugin API version this host speaks (`plugin_api_version`).
pub const API_VERSION: u64 = 1;

/// Bit 31 of the size half of a handler's result: the bytes are an error
/// text, not a response message.
const ERROR_BIT: u32 = 1 << 31;

/// How much of the module's standard error is kept to explain a failure.
const STDERR_CAPACITY: usize = 64 * 1024;

/// How plugin modules are loaded and run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmOptions {
    /// Where compiled modules are cached (`None`: compile on every load).
    /// The directory is created with mode 0700 if missing; a directory that
    /// is not ours or that others can write to is not used. Default:
    /// [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// The most linear memory one instance may have, in bytes (default
    /// 256 MiB). Growing past it traps.
    pub memory_limit: usize,
    /// Time allowed for instantiation and the module's `_initialize`
    /// (default 30 s).
    pub init_timeout: Duration,
}

impl Default for WasmOptions {
    fn default() -> Self {
        WasmOptions {
            cache_dir: Some(default_cache_dir()),
            memory_limit: 256 << 20,
            init_timeout: Duration::from_secs(30),
        }
    }
}

/// `nri-wasm-cache-<uid>` in the system's temporary directory.
pub fn default_cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "nri-wasm-cache-{}",
        rustix::process::geteuid().as_raw()
    ))
}

/// A loaded plugin module.
///
/// [`call`](Self::call) runs the module on the task that awaits it, as a
/// future: no thread of its own, no hand-over. Calls of one plugin run one
/// at a time, in the order they were made (a fair lock around the
/// instance); calls of different plugins run side by side. Each call is
/// bounded by its timeout. While the module runs, the engine's epoch
/// advances every few milliseconds: at each tick the module yields to the
/// executor, so a module that computes for long (or forever) never keeps
/// the executor's thread from its other tasks for more than a tick. Past
/// its timeout the module is interrupted at its next function entry or
/// loop back-edge (or, waiting in a host call, cancelled) and the call
/// fails with [`WasmError::Timeout`].
///
/// After a timeout or a trap the instance is thrown away (also when the
/// caller drops a call before it finished); the next call gets a fresh
/// instance, which is initialized again and, if the plugin was configured,
/// configured again with the last successful Configure request. The
/// module's other state (what it learnt from Synchronize and the events
/// since) is lost with the instance: [`discarded`](Self::discarded) tells
/// the caller, who can synchronize the plugin again.
///
/// The futures of `call` need a Tokio runtime with the time driver
/// enabled (`enable_time` or `enable_all`): they bound the call with a
/// Tokio timer, and the module's WASI sleeps use Tokio timers too.
pub struct WasmPlugin {
    name: Arc<str>,
    /// Boxed: the instance and its loader are large.
    worker: Box<tokio::sync::Mutex<Worker>>,
    discarded: tokio::sync::watch::Receiver<u64>,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("name", &self.name)
            .finish()
    }
}

impl WasmPlugin {
    /// Reads, compiles (or loads from the cache) and instantiates the
    /// module at `path`, runs its `_initialize`, checks its API version and
    /// exports. `name` names the plugin in errors and logs. Blocks for the
    /// compilation and the initialization: call it off the async threads
    /// (e.g. in `tokio::task::spawn_blocking`). The initialization runs on
    /// a Tokio runtime of its own (on a short-lived thread if this thread
    /// is one of a Tokio runtime's).
    pub fn load(path: &Path, name: &str, options: &WasmOptions) -> Result<WasmPlugin, WasmError> {
        let bytes = std::fs::read(path).map_err(|source| WasmError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&bytes, name, options)
    }

    /// As [`load`](Self::load), from the module's bytes (the binary
    /// format).
    pub fn from_bytes(
        bytes: &[u8],
        name: &str,
        options: &WasmOptions,
    ) -> Result<WasmPlugin, WasmError> {
        let shared = engine::shared().map_err(WasmError::Engine)?;
        let name: Arc<str> = name.into();
        let module = engine::compile(&shared.engine, bytes, options.cache_dir.as_deref(), &name)
            .map_err(|e| WasmError::Compile {
                plugin: name.to_string(),
                message: format!("{e:#}"),
            })?;
        let loader = Loader::new(shared, module, name.clone(), options.clone())?;
        let live = block_on(&name, || loader.instantiate())??;
        let (discarded_tx, discarded) = tokio::sync::watch::channel(0);
        let worker = Worker {
            loader,
            live: Some(live),
            configured: None,
            discarded: discarded_tx,
        };
        Ok(WasmPlugin {
            name,
            worker: Box::new(tokio::sync::Mutex::new(worker)),
            discarded,
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many instances were thrown away so far (after a trap, an exit,
    /// a timeout or the memory limit); the receiver sees each change. The
    /// next call after a change runs on a fresh instance that remembers
    /// nothing but the last Configure request.
    ///
    /// ```no_run
    /// # async fn f(plugin: nri_wasm::WasmPlugin) {
    /// let mut discarded = plugin.discarded();
    /// while discarded.changed().await.is_ok() {
    ///     // Synchronize the plugin again.
    /// }
    /// # }
    /// ```
    pub fn discarded(&self) -> tokio::sync::watch::Receiver<u64> {
        self.discarded.clone()
    }

    /// Calls the module's handler for `event` with an encoded request and
    /// returns the encoded response (empty for an empty response).
    ///
    /// The module runs while the returned future is polled, on the thread
    /// that polls it, yielding at every epoch tick. A call waits for the
    /// plugin's earlier calls; its `timeout` counts from when it starts to
    /// run. Dropping the future before it finished cancels the call and
    /// throws the instance away, as a timeout does.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use nri_wasm::{WasmEvent, WasmOptions, WasmPlugin};
    ///
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = WasmOptions::default();
    /// let plugin = tokio::task::spawn_blocking(move || {
    ///     WasmPlugin::load("/opt/nri/plugins/10-logger".as_ref(), "10-logger", &options)
    /// })
    /// .await??;
    /// let reply = plugin
    ///     .call(WasmEvent::Synchronize, Vec::new(), Duration::from_secs(2))
    ///     .await?;
    /// # let _ = reply; Ok(()) }
    /// ```
    pub async fn call(
        &self,
        event: WasmEvent,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmError> {
        let mut worker = self.worker.lock().await;
        worker.handle(event, request, timeout).await
    }

    /// As [`call`](Self::call), blocking the calling thread until the call
    /// finished. The call runs on a Tokio runtime of its own (on a
    /// short-lived thread if this thread is one of a Tokio runtime's). Do
    /// not use it from async code, where it would block an executor thread:
    /// await [`call`](Self::call) instead.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use nri_wasm::{WasmEvent, WasmOptions, WasmPlugin};
    ///
    /// let plugin = WasmPlugin::load("/opt/nri/plugins/10-logger".as_ref(), "10-logger",
    ///     &WasmOptions::default())?;
    /// let reply = plugin.call_blocking(WasmEvent::Synchronize, Vec::new(), Duration::from_secs(2))?;
    /// # let _ = reply;
    /// # Ok::<(), nri_wasm::WasmError>(())
    /// ```
    pub fn call_blocking(
        &self,
        event: WasmEvent,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmError> {
        block_on(&self.name, || self.call(event, request, timeout))?
    }
}

thread_local! {
    /// The runtime [`block_on`] runs futures on, one per thread.
    static RUNTIME: OnceCell<tokio::runtime::Runtime> = const { OnceCell::new() };
}

/// Runs the future `make` returns to completion on a current-thread Tokio
/// runtime (time driver on, for the call's timeout and the module's WASI
/// sleeps), blocking this thread. A thread that is already in a Tokio
/// runtime's context (an executor thread, or a `spawn_blocking` closure)
/// cannot start another runtime: the future then runs on a short-lived
/// thread of its own.
fn block_on<F>(plugin: &str, make: impl FnOnce() -> F + Send) -> Result<F::Output, WasmError>
where
    F: Future,
    F::Output: Send,
{
    let setup = |e: std::io::Error| {
        WasmError::Engine(format!(
            "cannot run WASM plugin {plugin} in a blocking call: {e}"
        ))
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run_here(make).map_err(setup);
    }
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("nri-wasm-block-on".into())
            .spawn_scoped(scope, || run_here(make))
            .map_err(setup)?;
        match thread.join() {
            Ok(result) => result.map_err(setup),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

fn run_here<F: Future>(make: impl FnOnce() -> F) -> std::io::Result<F::Output> {
    RUNTIME.with(|cell| {
        let runtime = match cell.get() {
            Some(runtime) => runtime,
            None => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()?;
                cell.get_or_init(|| runtime)
            }
        };
        Ok(runtime.block_on(make()))
    })
}

/// What the store of an instance holds.
struct Host {
    wasi: WasiP1Ctx,
    limits: StoreLimits,
    deadline: Instant,
    plugin: Arc<str>,
}

/// The marker error the epoch callback raises when a call's deadline
/// passed.
#[derive(Debug)]
struct DeadlineExceeded;

impl std::fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline exceeded")
    }
}

impl std::error::Error for DeadlineExceeded {}

/// Makes instances of one module.
struct Loader {
    shared: &'static Shared,
    module: Module,
    linker: Linker<Host>,
    name: Arc<str>,
    options: WasmOptions,
}

/// One instance and its exports.
struct Live {
    store: Store<Host>,
    memory: Memory,
    malloc: TypedFunc<u32, u32>,
    free: TypedFunc<u32, ()>,
    handlers: Vec<TypedFunc<(u32, u32), u64>>,
    stderr: MemoryOutputPipe,
}

impl Loader {
    fn new(
        shared: &'static Shared,
        module: Module,
        name: Arc<str>,
        options: WasmOptions,
    ) -> Result<Loader, WasmError> {
        let fail = |e: wasmtime::Error| WasmError::Instantiate {
            plugin: name.to_string(),
            message: format!("{e:#}"),
        };
        let mut linker = Linker::new(&shared.engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |h: &mut Host| &mut h.wasi)
            .map_err(fail)?;
        linker.func_wrap("env", "log", host_log).map_err(fail)?;
        Ok(Loader {
            shared,
            module,
            linker,
            name,
            options,
        })
    }

    fn plugin(&self) -> String {
        self.name.to_string()
    }

    /// A fresh instance, initialized, with its API version and exports
    /// checked.
    async fn instantiate(&self) -> Result<Live, WasmError> {
        // As the reference: no arguments, no environment, no files, no
        // standard input or output. Standard error is kept (bounded) to
        // explain failures.
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build_p1();
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.options.memory_limit)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            &self.shared.engine,
            Host {
                wasi,
                limits,
                deadline: Instant::now() + self.options.init_timeout,
                plugin: self.name.clone(),
            },
        );
        store.limiter(|h| &mut h.limits);
        // At every epoch tick: back to the executor, or, past the call's
        // deadline, a trap.
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Err(wasmtime::Error::new(DeadlineExceeded))
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        let timeout = self.options.init_timeout;
        self.bounded("_initialize", timeout, self.initialize(store, stderr))
            .await
    }

    /// Runs `work` (a call of `export`) with the epoch ticker running and
    /// at most `timeout`: a guest still waiting in a host call past the
    /// deadline is dropped with the future.
    async fn bounded<T>(
        &self,
        export: &'static str,
        timeout: Duration,
        work: impl Future<Output = Result<T, WasmError>>,
    ) -> Result<T, WasmError> {
        let _running = self.shared.ticker.enter();
        tokio::time::timeout(timeout, work)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(export, timeout)))
    }

    /// The error of a call of `export` that ran past `timeout`.
    fn timed_out(&self, export: &'static str, timeout: Duration) -> WasmError {
        WasmError::Timeout {
            plugin: self.plugin(),
            export,
            timeout,
        }
    }

    /// Instantiates the module in `store` and checks the instance.
    async fn initialize(
        &self,
        mut store: Store<Host>,
        stderr: MemoryOutputPipe,
    ) -> Result<Live, WasmError> {
        let timeout = self.options.init_timeout;
        let classify = |e: wasmtime::Error, export: &'static str, stderr: &MemoryOutputPipe| {
            if e.downcast_ref::<DeadlineExceeded>().is_some() {
                return self.timed_out(export, timeout);
            }
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                return WasmError::ExitCode {
                    plugin: self.plugin(),
                    code: exit.0,
                };
            }
            WasmError::Instantiate {
                plugin: self.plugin(),
                message: with_stderr(format!("{export}: {e:#}"), stderr),
            }
        };

        let instance = self
            .linker
            .instantiate_async(&mut store, &self.module)
            .await
            .map_err(|e| classify(e, "instantiation", &stderr))?;
        if let Some(init) = instance.get_func(&mut store, "_initialize") {
            let init = init
                .typed::<(), ()>(&store)
                .map_err(|e| self.signature("_initialize", e))?;
            match init.call_async(&mut store, ()).await {
                Ok(()) => {}
                // Exiting with 0 from the initialization is no error.
                Err(e) if matches!(e.downcast_ref::<I32Exit>(), Some(I32Exit(0))) => {}
                Err(e) => return Err(classify(e, "_initialize", &stderr)),
            }
        }

        let version = instance
            .get_func(&mut store, "plugin_api_version")
            .ok_or_else(|| self.missing("plugin_api_version"))?;
        let ty = version.ty(&store);
        let results: Vec<ValType> = ty.results().collect();
        let result = match (ty.params().len(), results.as_slice()) {
            (0, [ValType::I32]) => Val::I32(0),
            (0, [ValType::I64]) => Val::I64(0),
            _ => {
                return Err(WasmError::Signature {
                    plugin: self.plugin(),
                    export: "plugin_api_version",
                    message: format!("{ty}"),
                })
            }
        };
        let mut out = [result];
        version
            .call_async(&mut store, &[], &mut out)
            .await
            .map_err(|e| classify(e, "plugin_api_version", &stderr))?;
        let version = match out[0] {
            Val::I32(v) => u64::from(v as u32),
            Val::I64(v) => v as u64,
            _ => 0,
        };
        if version != API_VERSION {
            return Err(WasmError::ApiVersion {
                plugin: self.plugin(),
                host: API_VERSION,
                version,
            });
        }

        let mut handlers = Vec::with_capacity(WasmEvent::ALL.len());
        for event in WasmEvent::ALL {
            let export = event.export_name();
            let func = instance
                .get_func(&mut store, export)
                .ok_or_else(|| self.missing(export))?;
            handlers.push(
                func.typed::<(u32, u32), u64>(&store)
                    .map_err(|e| self.signature(export, e))?,
            );
        }
        let malloc = instance
            .get_func(&mut store, "malloc")
            .ok_or_else(|| self.missing("malloc"))?
            .typed::<u32, u32>(&store)
            .map_err(|e| self.signature("malloc", e))?;
        let free = instance
            .get_func(&mut store, "free")
            .ok_or_else(|| self.missing("free"))?
            .typed::<u32, ()>(&store)
            .map_err(|e| self.signature("free", e))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| self.missing("memory"))?;
        Ok(Live {
            store,
            memory,
            malloc,
            free,
            handlers,
            stderr,
        })
    }

    fn missing(&self, export: &'static str) -> WasmError {
        WasmError::MissingExport {
            plugin: self.plugin(),
            export,
        }
    }

    fn signature(&self, export: &'static str, e: wasmtime::Error) -> WasmError {
        WasmError::Signature {
            plugin: self.plugin(),
            export,
            message: format!("{e:#}"),
        }
    }
}

fn with_stderr(message: String, stderr: &MemoryOutputPipe) -> String {
    let contents = stderr.contents();
    let text = String::from_utf8_lossy(&contents);
    let text = text.trim();
    if text.is_empty() {
        return message;
    }
    // The end of the output explains most (a Go panic and its stack).
    let tail: String = {
        let skip = text.chars().count().saturating_sub(2048);
        text.chars().skip(skip).collect()
    };
    format!("{message}; plugin stderr: {tail}")
}

impl Live {
    /// One call following the plugin ABI: the request is copied into a
    /// buffer from the module's `malloc` (none for an empty request), the
    /// handler returns `pointer << 32 | size`, bit 31 of the size marks an
    /// error text, and both buffers are given back with `free`.
    ///
    /// Bounded by `timeout`: the module traps at the first epoch tick past
    /// it, and a call still waiting in a host call then is cancelled.
    async fn call(
        &mut self,
        loader: &Loader,
        event: WasmEvent,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmError> {
        self.store.data_mut().deadline = Instant::now() + timeout;
        self.store.set_epoch_deadline(1);
        let work = self.exchange(loader, event, request, timeout);
        loader.bounded(event.export_name(), timeout, work).await
    }

    /// The ABI of one call, see [`call`](Self::call).
    async fn exchange(
        &mut self,
        loader: &Loader,
        event: WasmEvent,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmError> {
        let export = event.export_name();
        let trap = |e: wasmtime::Error, stderr: &MemoryOutputPipe| {
            if e.downcast_ref::<DeadlineExceeded>().is_some() {
                return loader.timed_out(export, timeout);
            }
            let message = match e.downcast_ref::<I32Exit>() {
                Some(exit) => format!("plugin exited with exit_code({})", exit.0),
                None => format!("{e:#}"),
            };
            WasmError::Trap {
                plugin: loader.plugin(),
                export,
                message: with_stderr(message, stderr),
            }
        };
        let out_of_bounds = |what, ptr, len, memory| WasmError::OutOfBounds {
            plugin: loader.plugin(),
            export,
            what,
            ptr,
            len,
            memory,
        };

        let len = u32::try_from(request.len())
            .ok()
            .filter(|len| len & ERROR_BIT == 0)
            .ok_or_else(|| out_of_bounds("request", 0, u32::MAX, request.len()))?;
        let mut ptr = 0;
        if len != 0 {
            ptr = self
                .malloc
                .call_async(&mut self.store, len)
                .await
                .map_err(|e| trap(e, &self.stderr))?;
            if self
                .memory
                .write(&mut self.store, ptr as usize, request)
                .is_err()
            {
                let size = self.memory.data_size(&self.store);
                return Err(out_of_bounds("request buffer", ptr, len, size));
            }
        }

        let packed = self.handlers[event.index()]
            .call_async(&mut self.store, (ptr, len))
            .await
            .map_err(|e| trap(e, &self.stderr))?;
        let res_ptr = (packed >> 32) as u32;
        let raw_size = packed as u32;
        let is_error = raw_size & ERROR_BIT != 0;
        let res_len = raw_size & !ERROR_BIT;

        let data = self.memory.data(&self.store);
        let bytes = (res_ptr as usize)
            .checked_add(res_len as usize)
            .and_then(|end| data.get(res_ptr as usize..end))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| out_of_bounds("response", res_ptr, res_len, data.len()))?;

        if res_ptr != 0 {
            self.free
                .call_async(&mut self.store, res_ptr)
                .await
                .map_err(|e| trap(e, &self.stderr))?;
        }
        if ptr != 0 {
            self.free
                .call_async(&mut self.store, ptr)
                .await
                .map_err(|e| trap(e, &self.stderr))?;
        }
        if is_error {
            return Err(WasmError::Plugin(
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
        Ok(bytes)
    }
}

/// The state behind a plugin's lock: its instance and what a replacement
/// needs.
struct Worker {
    loader: Loader,
    /// `None` after the instance was thrown away, until the next call.
    live: Option<Live>,
    /// The last Configure request the plugin accepted, replayed into a
    /// replacement instance.
    configured: Option<Vec<u8>>,
    /// Counts the instances thrown away.
    discarded: tokio::sync::watch::Sender<u64>,
}

impl Worker {
    async fn handle(
        &mut self,
        event: WasmEvent,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, WasmError> {
        // Taken out for the call: if the caller drops the call midway, the
        // instance goes with it.
        let mut live = match self.live.take() {
            Some(live) => live,
            None => {
                let mut live = self.loader.instantiate().await?;
                tracing::info!(plugin = %self.loader.name, "replaced the WASM plugin instance");
                if let Some(config) = self.configured.as_deref() {
                    if event != WasmEvent::Configure {
                        live.call(&self.loader, WasmEvent::Configure, config, timeout)
                            .await?;
                    }
                }
                live
            }
        };
        let mut unfinished = Unfinished {
            plugin: &self.loader.name,
            discarded: &self.discarded,
            armed: true,
        };
        let result = live.call(&self.loader, event, &request, timeout).await;
        if let Err(e @ (WasmError::Timeout { .. } | WasmError::Trap { .. })) = &result {
            // A trapped or interrupted instance is in an unknown state.
            tracing::warn!(plugin = %self.loader.name, error = %e,
                "discarding the WASM plugin instance");
            unfinished.armed = false;
            drop(live);
            self.discarded.send_modify(|n| *n += 1);
            return result;
        }
        unfinished.armed = false;
        self.live = Some(live);
        if result.is_ok() && event == WasmEvent::Configure {
            self.configured = Some(request);
        }
        result
    }
}

/// Counts the instance of a call as thrown away if the call is dropped
/// before it finished (the caller gave up waiting): the module stopped
/// somewhere in the middle of its handler.
struct Unfinished<'a> {
    plugin: &'a str,
    discarded: &'a tokio::sync::watch::Sender<u64>,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::warn!(plugin = %self.plugin,
                "call dropped before it finished, discarding the WASM plugin instance");
            self.discarded.send_modify(|n| *n += 1);
        }
    }
}

/// `env.log`: a `LogRequest` from the module's memory, logged at its level.
fn host_log(mut caller: Caller<'_, Host>, ptr: u32, len: u32) -> wasmtime::Result<u64> {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return Err(wasmtime::Error::msg("log: the module exports no memory"));
    };
    let data = memory.data(&caller);
    let bytes = (ptr as usize)
        .checked_add(len as usize)
        .and_then(|end| data.get(ptr as usize..end))
        .ok_or_else(|| {
            wasmtime::Error::msg(format!(
                "log: message {ptr:#x}+{len} is outside the plugin's memory"
            ))
        })?;
    let req = LogRequest::decode(bytes)
        .map_err(|e| wasmtime::Error::msg(format!("log: bad LogRequest: {e}")))?;
    let plugin = &caller.data().plugin;
    match req.level() {
        Level::Info => tracing::info!(plugin = %plugin, "{}", req.msg),
        Level::Warn => tracing::warn!(plugin = %plugin, "{}", req.msg),
        Level::Error => tracing::error!(plugin = %plugin, "{}", req.msg),
        Level::Debug | Level::Unspecified => tracing::debug!(plugin = %plugin, "{}", req.msg),
    }
    // The reply is an empty message: no buffer.
    Ok(0)
}
