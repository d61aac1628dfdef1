//! Building the Go harness programs once per test process.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rustix::fs::{flock, FlockOperation};

/// Go modules of the harness and the programs they hold.
const MODULES: &[(&str, &[&str])] = &[
    (
        "harness",
        &[
            "nri-ref-runtime",
            "nri-ref-plugin",
            "nri-wire-vectors",
            "nri-wire-bench",
            "nri-adaptation-bench",
        ],
    ),
    (
        "harness-old",
        &["nri-ref-runtime-old", "nri-ref-plugin-old"],
    ),
];

/// Names of all harness programs.
pub fn harness_programs() -> impl Iterator<Item = &'static str> {
    MODULES.iter().flat_map(|(_, progs)| progs.iter().copied())
}

/// The `interop/` directory (this crate's manifest directory).
pub fn interop_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the Go programs are built: `$NRI_INTEROP_BIN_DIR`, else
/// `$CARGO_TARGET_DIR/interop-bin`, else `<workspace>/target/interop-bin`.
pub fn bin_dir() -> PathBuf {
    let workspace = interop_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(interop_dir);
    if let Some(dir) = std::env::var_os("NRI_INTEROP_BIN_DIR") {
        return workspace.join(dir);
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir).join("interop-bin"),
        None => workspace.join("target").join("interop-bin"),
    }
}

/// The Go toolchain to use: `$NRI_INTEROP_GO`, else `go` from `PATH`.
fn go_binary() -> OsString {
    std::env::var_os("NRI_INTEROP_GO").unwrap_or_else(|| OsString::from("go"))
}

/// Returns the path of a Go harness program, building all of them first
/// (once per process; concurrent test processes serialize on a lock file).
///
/// Programs: `nri-ref-runtime`, `nri-ref-plugin`, `nri-wire-vectors`
/// (module `interop/harness`, official NRI v0.12.x) and
/// `nri-ref-runtime-old` (module `interop/harness-old`, NRI v0.9.0).
///
/// # Panics
///
/// Panics with an explanation when the Go toolchain is missing, when the
/// build fails, or when `name` is not a harness program. Interop tests are
/// meant to fail loudly rather than be skipped.
///
/// ```no_run
/// let runtime = nri_interop::harness_bin("nri-ref-runtime");
/// assert!(runtime.is_file());
/// ```
pub fn harness_bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = match BUILT.get_or_init(build_all) {
        Ok(dir) => dir,
        Err(msg) => panic!("{msg}"),
    };
    if !harness_programs().any(|p| p == name) {
        let known: Vec<_> = harness_programs().collect();
        panic!("unknown harness program {name:?}; known programs: {known:?}");
    }
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "harness program {} missing after build",
        path.display()
    );
    path
}

/// WebAssembly plugins of the module `interop/wasm-plugins`, built with
/// `GOOS=wasip1 GOARCH=wasm -buildmode=c-shared`.
const WASM_PLUGINS: &[&str] = &["nri-wasm-logger", "nri-wasm-scripted"];

/// Returns the path of a WebAssembly plugin of `interop/wasm-plugins`
/// (`nri-wasm-logger`, `nri-wasm-scripted`), building them first (once per
/// process, under the same lock as the harness programs). The files are
/// `<name>.wasm`, mode 0755: the reference only starts plugin files with an
/// execute bit.
///
/// # Panics
///
/// As [`harness_bin`].
pub fn wasm_plugin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = match BUILT.get_or_init(build_wasm_plugins) {
        Ok(dir) => dir,
        Err(msg) => panic!("{msg}"),
    };
    assert!(
        WASM_PLUGINS.contains(&name),
        "unknown WASM plugin {name:?}; known: {WASM_PLUGINS:?}"
    );
    dir.join(format!("{name}.wasm"))
}

fn build_wasm_plugins() -> Result<PathBuf, String> {
    let go = go_binary();
    check_go(&go)?;
    let dir = bin_dir();
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let lock = lock_build_dir(&dir)?;
    let module = interop_dir().join("wasm-plugins");
    let scratch = tempfile::Builder::new()
        .prefix(".build-wasm-")
        .tempdir_in(&dir)
        .map_err(|e| format!("create scratch dir in {}: {e}", dir.display()))?;
    // -buildmode=c-shared takes one main package at a time.
    for program in WASM_PLUGINS {
        let out = scratch.path().join(format!("{program}.wasm"));
        let output = Command::new(&go)
            .current_dir(&module)
            .env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .env("GOWORK", "off")
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .args(["build", "-buildmode=c-shared", "-o"])
            .arg(&out)
            .arg(format!("./cmd/{program}"))
            .output()
            .map_err(|e| format!("run go build in {}: {e}", module.display()))?;
        if !output.status.success() {
            return Err(format!(
                "go build of {program} in {} failed ({}):\n{}{}",
                module.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&out, fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod {}: {e}", out.display()))?;
        let to = dir.join(format!("{program}.wasm"));
        fs::rename(&out, &to)
            .map_err(|e| format!("move {} to {}: {e}", out.display(), to.display()))?;
    }
    drop(lock);
    Ok(dir)
}

/// Takes the exclusive lock that serializes builds into `dir` across test
/// processes; released when the returned file is dropped.
fn lock_build_dir(dir: &Path) -> Result<File, String> {
    let lock_path = dir.join(".build.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("create lock file {}: {e}", lock_path.display()))?;
    flock(&lock, FlockOperation::LockExclusive)
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    Ok(lock)
}

fn check_go(go: &OsString) -> Result<(), String> {
    match Command::new(go).arg("version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`{} version` failed ({}): {}",
            go.to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(err) => Err(format!(
            "the NRI interop tests need the Go toolchain (1.24 or newer), but `{}` \
             could not be run: {err}. Install Go and put it on PATH, or point \
             NRI_INTEROP_GO at the go binary.",
            go.to_string_lossy()
        )),
    }
}

fn build_all() -> Result<PathBuf, String> {
    let go = go_binary();
    check_go(&go)?;

    let dir = bin_dir();
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let lock = lock_build_dir(&dir)?;

    for (module, programs) in MODULES {
        build_module(&go, &interop_dir().join(module), programs, &dir)?;
    }
    drop(lock);
    Ok(dir)
}

/// Builds every program of one module into a scratch directory, then moves
/// the binaries into `dir` by rename, so that a concurrently running copy
/// of an older binary is never overwritten in place.
fn build_module(go: &OsString, module: &Path, programs: &[&str], dir: &Path) -> Result<(), String> {
    let scratch = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(dir)
        .map_err(|e| format!("create scratch dir in {}: {e}", dir.display()))?;
    let mut out_dir = scratch.path().as_os_str().to_owned();
    out_dir.push("/");
    let output = Command::new(go)
        .current_dir(module)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOWORK", "off")
        .arg("build")
        .arg("-o")
        .arg(&out_dir)
        .arg("./cmd/...")
        .output()
        .map_err(|e| format!("run go build in {}: {e}", module.display()))?;
    if !output.status.success() {
        return Err(format!(
            "go build in {} failed ({}):\n{}{}",
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    for program in programs {
        let from = scratch.path().join(program);
        let to = dir.join(program);
        fs::rename(&from, &to)
            .map_err(|e| format!("move {} to {}: {e}", from.display(), to.display()))?;
    }
    Ok(())
}
