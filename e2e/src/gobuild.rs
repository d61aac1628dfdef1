//! Go programs the suites build from the Go module proxy, once, into the
//! cache directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::host::{cache_dir, lock_file, run};
use crate::{E2eError, Result};

/// The Go toolchain (`$NRI_INTEROP_GO`, else `go`), without the caller's
/// `GOFLAGS` or workspace.
pub fn go() -> Command {
    let mut cmd = Command::new(std::env::var_os("NRI_INTEROP_GO").unwrap_or_else(|| "go".into()));
    cmd.env("GOFLAGS", "").env("GOWORK", "off");
    cmd
}

/// Returns `<cache>/<key>/bin`, first running `build` into a scratch directory
/// unless every one of `expect` is already there. The scratch directory is
/// renamed into place, so an interrupted build never leaves a half-written
/// binary where a later run would trust it. Go's build cache is kept as Go
/// keeps it, so rebuilding a new version reuses what it can.
pub fn go_build_cached(
    key: &str,
    expect: &[&str],
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = cache_dir()?.join(key);
    let bin = root.join("bin");
    let done = |bin: &Path| expect.iter().all(|e| bin.join(e).is_file());
    if done(&bin) {
        return Ok(bin);
    }
    let _lock = lock_file(&cache_dir()?.join(format!(".{key}.lock")))?;
    if done(&bin) {
        return Ok(bin);
    }
    let scratch = root.join("bin.partial");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)
        .map_err(|e| E2eError::io(format!("create {}", scratch.display()), e))?;
    eprintln!("e2e: building {key} (kept in {})", root.display());
    build(&scratch)?;
    let _ = fs::remove_dir_all(&bin);
    fs::rename(&scratch, &bin)
        .map_err(|e| E2eError::io(format!("move {} into place", scratch.display()), e))?;
    Ok(bin)
}

/// Builds `programs` (paths below the module, e.g. `cmd/containerd`) of
/// `module@version` into `out`, from the module's source as the main module.
///
/// For modules whose `go.mod` has `exclude` or `replace` directives, which
/// `go install module@version` refuses: the source is fetched with
/// `go mod download`, copied to a writable place next to `out`, `prepare` runs
/// in it (e.g. to build a C helper), and `go build -mod=mod` builds it with
/// `flags`.
pub fn build_from_source(
    module: &str,
    version: &str,
    programs: &[&str],
    flags: &[String],
    out: &Path,
    prepare: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let spec = format!("{module}@{version}");
    let info = run(go().args(["mod", "download", "-json", &spec]))?;
    let info: Value = serde_json::from_slice(&info.stdout)
        .map_err(|e| E2eError::io("parse go mod download", std::io::Error::other(e)))?;
    let src = info["Dir"]
        .as_str()
        .ok_or_else(|| E2eError::Unsupported(format!("go mod download {spec}: no Dir")))?;
    let work = out.with_extension("src");
    let _ = fs::remove_dir_all(&work);
    run(Command::new("cp").arg("-r").arg(src).arg(&work))?;
    run(Command::new("chmod").arg("-R").arg("u+w").arg(&work))?;
    prepare(&work)?;
    let mut build = go();
    build
        .current_dir(&work)
        .env("GOFLAGS", "-mod=mod")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(format!("{}/", out.display()))
        .args(programs.iter().map(|p| format!("./{p}")));
    run(&mut build)?;
    let _ = fs::remove_dir_all(&work);
    Ok(())
}
