//! Container images built on the test machine: Debian's static busybox packed
//! as an OCI image with `umoci`, exported as an archive with `skopeo`. Nothing
//! is pulled.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::host::{cache_dir, install_packages, lock_file, run};
use crate::{E2eError, Result};

/// Debian packages the image build uses.
pub const PACKAGES: &[&str] = &["busybox-static", "umoci", "skopeo"];

/// A built image: a `docker-archive` tarball that `ctr images import` and
/// `podman load` both read, and the name it carries.
#[derive(Debug, Clone)]
pub struct ImageArchive {
    /// The archive.
    pub path: PathBuf,
    /// The image reference inside it, e.g. `docker.io/nri-e2e/busybox:1`.
    pub name: String,
}

/// The busybox image (`docker.io/nri-e2e/busybox:1`, command `sh`), built once
/// and kept in the cache directory, keyed by busybox's version.
pub fn busybox() -> Result<ImageArchive> {
    build_cached("busybox", &["/bin/sh"])
}

/// An image to use as the pod sandbox ("pause") image
/// (`docker.io/nri-e2e/pause:1`): busybox sleeping for ever.
pub fn pause() -> Result<ImageArchive> {
    build_cached("pause", &["/bin/sleep", "2147483647"])
}

fn build_cached(name: &str, cmd: &[&str]) -> Result<ImageArchive> {
    install_packages(PACKAGES)?;
    let version = busybox_version()?;
    let dir = cache_dir()?.join("images");
    let reference = format!("docker.io/nri-e2e/{name}:1");
    let path = dir.join(format!("{name}-{version}.tar"));
    let _lock = lock_file(&dir.join(".lock"))?;
    if !path.is_file() {
        let work = tempfile::tempdir_in(&dir).map_err(|e| E2eError::io("create temp dir", e))?;
        build(work.path(), &reference, cmd, &path)?;
    }
    Ok(ImageArchive {
        path,
        name: reference,
    })
}

fn busybox_version() -> Result<String> {
    let out = run(Command::new("dpkg-query").args(["-W", "-f=${Version}", "busybox-static"]))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace([':', '/'], "_"))
}

fn build(work: &Path, reference: &str, cmd: &[&str], archive: &Path) -> Result<()> {
    let layout = work.join("layout");
    let bundle = work.join("bundle");
    let tagged = format!("{}:e2e", layout.display());
    run(Command::new("umoci")
        .arg("init")
        .arg("--layout")
        .arg(&layout))?;
    run(Command::new("umoci").args(["new", "--image", &tagged]))?;
    run(Command::new("umoci")
        .args(["unpack", "--image", &tagged])
        .arg(&bundle))?;
    let rootfs = bundle.join("rootfs");
    populate_rootfs(&rootfs)?;
    run(Command::new("umoci")
        .args(["repack", "--image", &tagged])
        .arg(&bundle))?;
    let mut config = Command::new("umoci");
    config.args(["config", "--image", &tagged, "--clear=config.cmd"]);
    for arg in cmd {
        config.arg(format!("--config.cmd={arg}"));
    }
    config.args(["--config.env=PATH=/bin:/sbin:/usr/bin:/usr/sbin"]);
    run(&mut config)?;
    let partial = archive.with_extension("tar.partial");
    let _ = fs::remove_file(&partial);
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{tagged}"),
        &format!("docker-archive:{}:{reference}", partial.display()),
    ]))?;
    fs::rename(&partial, archive)
        .map_err(|e| E2eError::io(format!("move image to {}", archive.display()), e))
}

/// `/bin/busybox` with a link per applet, and the few files a container expects.
fn populate_rootfs(rootfs: &Path) -> Result<()> {
    let bin = rootfs.join("bin");
    for dir in ["bin", "etc", "tmp", "proc", "sys", "dev", "root"] {
        fs::create_dir_all(rootfs.join(dir))
            .map_err(|e| E2eError::io(format!("create {dir} in rootfs"), e))?;
    }
    fs::copy("/bin/busybox", bin.join("busybox"))
        .map_err(|e| E2eError::io("copy /bin/busybox", e))?;
    let list = run(Command::new("/bin/busybox").arg("--list"))?;
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let applet = applet.trim();
        if applet.is_empty() || applet == "busybox" {
            continue;
        }
        symlink("busybox", bin.join(applet))
            .map_err(|e| E2eError::io(format!("link applet {applet}"), e))?;
    }
    for (file, text) in [
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
        ("etc/group", "root:x:0:\n"),
    ] {
        fs::write(rootfs.join(file), text).map_err(|e| E2eError::io(format!("write {file}"), e))?;
    }
    Ok(())
}
