//! The workspace's own programs, built from a test with the cargo that
//! built the test, into the same target directory and profile. Every
//! member is selected (`--workspace`; `--bin`/`--example` pick what is
//! built), so the dependencies keep the features of the `cargo test
//! --workspace` build and are not built again, as they would be with `-p`.
//!
//! ```no_run
//! let example = nri_interop::workspace::example("annotate").unwrap();
//! assert!(example.is_file());
//! let logger = nri_interop::workspace::binary("nri-logger").unwrap();
//! assert!(logger.ends_with("nri-logger"));
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{HarnessError, Result};

/// The target directory and the profile of the running test binary
/// (`<target>/<profile>/deps/<test>`), e.g. (`target`, `debug`).
pub fn target_and_profile() -> Result<(PathBuf, String)> {
    let exe = std::env::current_exe().map_err(|e| HarnessError::io("current_exe", e))?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| HarnessError::Build {
            what: format!("locating the target directory of {}", exe.display()),
            stderr: "the test binary is not in <target>/<profile>/deps".into(),
        })?;
    let profile = profile_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = profile_dir.parent().unwrap_or(profile_dir).to_owned();
    Ok((target, profile))
}

/// Runs `cargo build --quiet --locked --workspace ARGS` for the running
/// test's target directory and profile; returns `<target>/<profile>`.
pub fn cargo_build(args: &[&str]) -> Result<PathBuf> {
    let (target, profile) = target_and_profile()?;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "--locked", "--workspace"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target);
    if profile == "release" {
        cmd.arg("--release");
    }
    let what = format!("cargo build --workspace {}", args.join(" "));
    let out = cmd.output().map_err(|e| HarnessError::io(&what, e))?;
    if !out.status.success() {
        return Err(HarnessError::Build {
            what,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(target.join(profile))
}

/// Builds the program `name` of the workspace ([`cargo_build`]) and
/// returns its path.
pub fn binary(name: &str) -> Result<PathBuf> {
    built(cargo_build(&["--bin", name])?.join(name))
}

/// Builds the example `name` of the workspace ([`cargo_build`]) and
/// returns its path.
pub fn example(name: &str) -> Result<PathBuf> {
    built(
        cargo_build(&["--example", name])?
            .join("examples")
            .join(name),
    )
}

fn built(path: PathBuf) -> Result<PathBuf> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarnessError::Build {
            what: format!("building {}", path.display()),
            stderr: "cargo succeeded, but the file is missing".into(),
        })
    }
}
