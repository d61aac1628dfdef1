//! Building the Go harness programs once per test process.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rustix::fs::{flock, FlockOperation};

/// One `go build` in the Go module `interop/harness`.
struct GoBuild {
    /// Flags before the packages.
    flags: &'static [&'static str],
    /// The packages built, into one output directory.
    packages: &'static [&'static str],
    /// The programs kept: the name `go build` gave the binary (its package's
    /// directory) and the program's name.
    programs: &'static [(&'static str, &'static str)],
}

/// The harness builds: the programs on NRI v0.12.5 (`go.mod`), and the
/// v0.9.0 ones from the sources of `nri-ref-runtime` and `nri-ref-plugin`
/// against `go.v0.9.mod`, with the build tag `nri_v09`.
const BUILDS: &[GoBuild] = &[
    GoBuild {
        flags: &[],
        packages: &["./cmd/..."],
        programs: &[
            ("nri-ref-runtime", "nri-ref-runtime"),
            ("nri-ref-plugin", "nri-ref-plugin"),
            ("nri-wire-vectors", "nri-wire-vectors"),
            ("nri-wire-bench", "nri-wire-bench"),
            ("nri-adaptation-bench", "nri-adaptation-bench"),
        ],
    },
    GoBuild {
        flags: &["-modfile=go.v0.9.mod", "-tags=nri_v09"],
        packages: &["./cmd/nri-ref-runtime", "./cmd/nri-ref-plugin"],
        programs: &[
            ("nri-ref-runtime", "nri-ref-runtime-old"),
            ("nri-ref-plugin", "nri-ref-plugin-old"),
        ],
    },
];

/// Names of all harness programs.
pub fn harness_programs() -> impl Iterator<Item = &'static str> {
    BUILDS
        .iter()
        .flat_map(|build| build.programs.iter().map(|&(_, name)| name))
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
/// Programs (all of module `interop/harness`): `nri-ref-runtime`,
/// `nri-ref-plugin`, `nri-wire-vectors`, `nri-wire-bench`,
/// `nri-adaptation-bench` (official NRI v0.12.x), and `nri-ref-runtime-old`
/// and `nri-ref-plugin-old`, the first two built against NRI v0.9.0.
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

    let module = interop_dir().join("harness");
    for build in BUILDS {
        run_build(&go, &module, build, &dir)?;
    }
    drop(lock);
    Ok(dir)
}

/// Runs one build into a scratch directory, then moves the binaries into
/// `dir` by rename, so that a concurrently running copy of an older binary
/// is never overwritten in place.
fn run_build(go: &OsString, module: &Path, build: &GoBuild, dir: &Path) -> Result<(), String> {
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
        .args(build.flags)
        .arg("-o")
        .arg(&out_dir)
        .args(build.packages)
        .output()
        .map_err(|e| format!("run go build in {}: {e}", module.display()))?;
    if !output.status.success() {
        let command: Vec<_> = std::iter::once(&"go build")
            .chain(build.flags)
            .copied()
            .collect();
        return Err(format!(
            "{} in {} failed ({}):\n{}{}",
            command.join(" "),
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    for (built, program) in build.programs {
        let from = scratch.path().join(built);
        let to = dir.join(program);
        fs::rename(&from, &to)
            .map_err(|e| format!("move {} to {}: {e}", from.display(), to.display()))?;
    }
    Ok(())
}
