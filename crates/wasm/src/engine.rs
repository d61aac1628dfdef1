//! The engine all plugins share, the ticker that advances its epoch while
//! calls run, and the on-disk cache of compiled modules.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, Module};

/// How often the epoch advances while a call runs: the longest a running
/// module keeps the thread that polls its call before it yields, and the
/// precision of its timeout.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The process-wide engine and its epoch ticker.
pub(crate) struct Shared {
    pub engine: Engine,
    pub ticker: Arc<Ticker>,
}

/// The engine, created on first use. Epoch interruption is on: while a
/// call runs, the ticker advances the epoch every [`EPOCH_TICK`], and each
/// store then yields to the executor or, past its call's deadline, traps.
pub(crate) fn shared() -> Result<&'static Shared, String> {
    static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let mut config = Config::new();
            config.epoch_interruption(true);
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            let ticker = Ticker::start(engine.clone()).map_err(|e| e.to_string())?;
            Ok(Shared { engine, ticker })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] while calls run, from
/// a thread of its own. Idle (no call for a whole tick) it sleeps until
/// the next call starts.
///
/// A call only takes a lock to count itself in and out; it wakes the
/// ticker only when the ticker sleeps, so a stream of calls costs the
/// ticker one wake-up per tick, and nothing in the calls waits for it.
pub(crate) struct Ticker {
    state: Mutex<TickState>,
    wake: Condvar,
}

#[derive(Default)]
struct TickState {
    /// Calls running now.
    running: usize,
    /// Calls started so far (wrapping).
    started: u64,
    /// Whether the ticker is awake.
    ticking: bool,
}

/// A running call, counted out when dropped.
pub(crate) struct Running<'a>(&'a Ticker);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lock().running -= 1;
    }
}

impl Ticker {
    fn start(engine: Engine) -> io::Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker {
            state: Mutex::new(TickState::default()),
            wake: Condvar::new(),
        });
        let t = ticker.clone();
        std::thread::Builder::new()
            .name("nri-wasm-epoch".into())
            .spawn(move || t.run(&engine))?;
        Ok(ticker)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TickState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a call in until the returned guard is dropped; the epoch
    /// advances meanwhile.
    pub(crate) fn enter(&self) -> Running<'_> {
        let mut state = self.lock();
        state.running += 1;
        state.started = state.started.wrapping_add(1);
        if !state.ticking {
            state.ticking = true;
            self.wake.notify_one();
        }
        Running(self)
    }

    fn run(&self, engine: &Engine) {
        let mut state = self.lock();
        loop {
            while !state.ticking {
                state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            let seen = state.started;
            drop(state);
            std::thread::sleep(EPOCH_TICK);
            state = self.lock();
            if state.running > 0 {
                engine.increment_epoch();
            } else if state.started == seen {
                // No call ran during a whole tick.
                state.ticking = false;
            }
        }
    }
}

/// Compiles `bytes`, or loads the compiled module from `cache_dir`.
/// Cache problems are logged and never fatal: the module is compiled again.
pub(crate) fn compile(
    engine: &Engine,
    bytes: &[u8],
    cache_dir: Option<&Path>,
    plugin: &str,
) -> wasmtime::Result<Module> {
    let Some(dir) = cache_dir else {
        return Module::new(engine, bytes);
    };
    let path = cache_path(engine, bytes, dir);
    match load_cached(engine, dir, &path) {
        Ok(Some(module)) => {
            tracing::debug!(plugin, cache = %path.display(), "loaded compiled WASM module from cache");
            return Ok(module);
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(plugin, cache = %path.display(), error = %e,
                "ignoring unusable cached WASM module, compiling again");
            let _ = fs::remove_file(&path);
        }
    }
    let started = Instant::now();
    let module = Module::new(engine, bytes)?;
    tracing::info!(plugin, elapsed = ?started.elapsed(), "compiled WASM module");
    if let Err(e) = store_cached(&module, dir, &path) {
        tracing::warn!(plugin, cache = %dir.display(), error = %e,
            "could not cache the compiled WASM module");
    }
    Ok(module)
}

/// `<sha256 of the module>-<engine compatibility hash>.cwasm`: a module
/// compiled by another wasmtime version or engine configuration gets
/// another file.
fn cache_path(engine: &Engine, bytes: &[u8], dir: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut compat = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compat);
    env!("CARGO_PKG_VERSION").hash(&mut compat);
    let digest = Sha256::digest(bytes);
    dir.join(format!("{}-{:016x}.cwasm", hex(&digest), compat.finish()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache directory must be a directory of ours that nobody else can
/// write to: its files are loaded as native code.
fn check_dir(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other("not a directory"));
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(io::Error::other("owned by another user"));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(io::Error::other("writable by group or others"));
    }
    Ok(())
}

/// Creates the cache directory (mode 0700) if needed and checks it.
fn ensure_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_dir(dir)
}

/// The layout of a cache file: the SHA-256 of the serialized module, then
/// the serialized module.
const DIGEST_LEN: usize = 32;

fn load_cached(engine: &Engine, dir: &Path, path: &Path) -> io::Result<Option<Module>> {
    let data = match fs::read(path) {
        Ok(data) => data,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    check_dir(dir)?;
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_file()
        || meta.uid() != rustix::process::geteuid().as_raw()
        || meta.permissions().mode() & 0o022 != 0
    {
        return Err(io::Error::other("cache file is not a private file of ours"));
    }
    if data.len() < DIGEST_LEN {
        return Err(io::Error::other("truncated cache file"));
    }
    let (digest, payload) = data.split_at(DIGEST_LEN);
    if Sha256::digest(payload).as_slice() != digest {
        return Err(io::Error::other("checksum mismatch"));
    }
    // SAFETY: `Module::deserialize` trusts its input to be the output of
    // `Module::serialize` of a compatible engine; arbitrary bytes could be
    // run as native code. The bytes come from a file this process (or an
    // earlier one of the same user) wrote with `store_cached`: the file and
    // its directory belong to our effective user and nobody else can write
    // to them (checked above), and the checksum written with the file
    // matches, so the file is complete and unchanged. Wasmtime itself
    // checks the engine version and configuration in the serialized header
    // and refuses incompatible artifacts with an error.
    let module = unsafe { Module::deserialize(engine, payload) }
        .map_err(|e| io::Error::other(format!("{e:#}")))?;
    Ok(Some(module))
}

fn store_cached(module: &Module, dir: &Path, path: &Path) -> io::Result<()> {
    ensure_dir(dir)?;
    let payload = module
        .serialize()
        .map_err(|e| io::Error::other(format!("{e:#}")))?;
    let digest = Sha256::digest(&payload);
    // Written under a temporary name and renamed, so a reader never sees
    // a partial file.
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("module"),
        std::process::id()
    ));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&digest)?;
        file.write_all(&payload)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAT: &str = r#"(module (func (export "f") (result i32) i32.const 7))"#;

    fn engine() -> Engine {
        shared().unwrap().engine.clone()
    }

    #[test]
    fn cache_round_trip_and_corruption() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let bytes = wat::parse_str(WAT).unwrap();
        let engine = engine();
        compile(&engine, &bytes, Some(&dir), "t").unwrap();
        let path = cache_path(&engine, &bytes, &dir);
        assert!(path.exists());
        assert!(load_cached(&engine, &dir, &path).unwrap().is_some());

        // A flipped byte fails the checksum; compile recovers.
        let mut data = fs::read(&path).unwrap();
        let last = data.len() - 1;
        data[last] ^= 0xff;
        fs::write(&path, &data).unwrap();
        assert!(load_cached(&engine, &dir, &path).is_err());
        compile(&engine, &bytes, Some(&dir), "t").unwrap();
        assert!(load_cached(&engine, &dir, &path).unwrap().is_some());

        // Truncated.
        fs::write(&path, b"short").unwrap();
        assert!(load_cached(&engine, &dir, &path).is_err());
        compile(&engine, &bytes, Some(&dir), "t").unwrap();

        // A valid checksum over garbage is refused by wasmtime.
        let garbage = b"not a module".to_vec();
        let mut data = Sha256::digest(&garbage).to_vec();
        data.extend_from_slice(&garbage);
        fs::write(&path, &data).unwrap();
        assert!(load_cached(&engine, &dir, &path).is_err());
        compile(&engine, &bytes, Some(&dir), "t").unwrap();
    }

    #[test]
    fn shared_cache_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let bytes = wat::parse_str(WAT).unwrap();
        let engine = engine();
        // Compiles fine, but nothing is cached or loaded.
        compile(&engine, &bytes, Some(&dir), "t").unwrap();
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    }
}
