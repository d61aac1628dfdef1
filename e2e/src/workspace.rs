//! The workspace's own binaries, built with the cargo that runs the tests,
//! into the same target directory (so a test run reuses what `cargo test`
//! already built).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host::run;
use crate::Result;

/// The workspace root.
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// The target directory and profile of the running test binary.
pub fn target_and_profile() -> (PathBuf, String) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| root().join(d))
        .unwrap_or_else(|| root().join("target"));
    // The test binary lives in <target>/<profile>/deps/.
    let profile = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.parent()?
                .parent()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "debug".into());
    (target, profile)
}

/// `cargo <subcommand> <packages>` for the running test's target directory
/// and profile; with them.
fn cargo(subcommand: &str, packages: &[&str]) -> (Command, PathBuf, String) {
    let (target, profile) = target_and_profile();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root())
        .env("CARGO_TARGET_DIR", &target)
        .args([subcommand, "--quiet", "--locked"])
        .args(packages);
    if profile == "release" {
        cmd.arg("--release");
    }
    (cmd, target, profile)
}

/// Builds the binaries `bins` of the workspace and returns their paths, in
/// the order given. The build selects every workspace member (`--bin` picks
/// what is built): dependencies then get the features the `cargo test
/// --workspace` build gave them and are not built again, as they would be
/// with `-p <package>`, which resolves features for that package alone.
///
/// ```no_run
/// let bins = nri_e2e::workspace::build_bins(&["nri-logger"]).unwrap();
/// assert!(bins[0].is_file());
/// ```
pub fn build_bins(bins: &[&str]) -> Result<Vec<PathBuf>> {
    build_bins_with_features(".", bins, &[])
}

/// As [`build_bins`], with the `features` of the member in directory
/// `member` (relative to the workspace root) on: a binary that another test
/// target runs too must be built with the features that target's build gave
/// it, or this build replaces it with a leaner one. The build runs in that
/// member's directory, where cargo applies `--features` to it (a
/// `member/feature` form given from the root applies to none of the selected
/// packages).
///
/// ```no_run
/// let sim = nri_e2e::workspace::build_bins_with_features(
///     "tools/nri-sim",
///     &["nri-sim"],
///     &["samples"],
/// )
/// .unwrap();
/// assert!(sim[0].is_file());
/// ```
pub fn build_bins_with_features(
    member: &str,
    bins: &[&str],
    features: &[&str],
) -> Result<Vec<PathBuf>> {
    let (mut cmd, target, profile) = cargo("build", &["--workspace"]);
    cmd.current_dir(root().join(member));
    for bin in bins {
        cmd.args(["--bin", bin]);
    }
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    run(&mut cmd)?;
    Ok(bins.iter().map(|b| target.join(&profile).join(b)).collect())
}

/// Builds the binary `bin` of package `package` linked statically against
/// glibc (`-C target-feature=+crt-static` for that binary alone: its
/// libraries are compiled as for [`build_bins`]) and returns the path of a
/// copy under `<target>/<profile>/static/`, which later normal builds of
/// the package leave alone.
///
/// ```no_run
/// let runc = nri_e2e::workspace::build_static_bin("nri-runc", "nri-runc").unwrap();
/// assert!(runc.is_file());
/// ```
pub fn build_static_bin(package: &str, bin: &str) -> Result<PathBuf> {
    let (mut cmd, target, profile) = cargo("rustc", &["-p", package]);
    cmd.args(["--bin", bin, "--", "-C", "target-feature=+crt-static"]);
    run(&mut cmd)?;
    let built = target.join(&profile).join(bin);
    let dir = target.join(&profile).join("static");
    std::fs::create_dir_all(&dir)
        .map_err(|e| crate::E2eError::io(format!("create {}", dir.display()), e))?;
    // Copied under a temporary name and renamed: a copy another test
    // process is running stays intact.
    let tmp = dir.join(format!(".{bin}.{}", std::process::id()));
    let copy = dir.join(bin);
    std::fs::copy(&built, &tmp)
        .and_then(|_| std::fs::rename(&tmp, &copy))
        .map_err(|e| {
            crate::E2eError::io(format!("copy {} to {}", built.display(), copy.display()), e)
        })?;
    Ok(copy)
}
