//! A private CRI-O for a test: its own storage, run directory, CRI socket,
//! NRI socket, plugin and drop-in directories under a temporary directory,
//! conmon and runc from Debian, images copied from local archives into its
//! storage with `skopeo`. CRI-O is built from its module source (the Go module
//! proxy serves exact versions of `github.com/cri-o/cri-o`), with `pinns` from
//! the same source.
//!
//! ```no_run
//! use nri_e2e::crio::Crio;
//! use nri_e2e::cri::{CriRuntime, Options, PodSpec};
//!
//! let crio = Crio::start(Options::default()).unwrap();
//! let pod = crio.crictl().run_pod(&PodSpec::new("demo")).unwrap();
//! println!("pod {pod}");
//! ```

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cri::{free_port, start_daemon, CriRuntime, Layout, Options};
use crate::gobuild::{build_from_source, go_build_cached};
use crate::host::{run, Daemon};
use crate::image::{self, ImageArchive};
use crate::{E2eError, Result};

/// Debian packages a CRI-O test needs besides the image tools.
pub const PACKAGES: &[&str] = &["runc", "conmon"];

/// The CRI-O release the suite runs (vendors NRI v0.9.1-pre).
pub const CRIO_VERSION: &str = "v1.34.0";

/// Build tags that leave out what needs C libraries the machine lacks
/// (gpgme, btrfs, device-mapper); seccomp is left out too.
const BUILD_TAGS: &str =
    "containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper";

/// The `crio` and `pinns` binaries of [`CRIO_VERSION`], built once into the
/// cache directory.
pub fn binaries() -> Result<PathBuf> {
    go_build_cached(&format!("crio-{CRIO_VERSION}"), &["crio", "pinns"], |out| {
        build_from_source(
            "github.com/cri-o/cri-o",
            CRIO_VERSION,
            &["cmd/crio"],
            &["-tags".to_owned(), BUILD_TAGS.to_owned()],
            out,
            |src| {
                run(Command::new("make").arg("-C").arg(src.join("pinns")))?;
                fs::copy(src.join("bin").join("pinns"), out.join("pinns"))
                    .map_err(|e| E2eError::io("copy pinns", e))?;
                Ok(())
            },
        )
    })
}

/// A running CRI-O of a test. Dropping it removes every pod through CRI,
/// stops CRI-O, kills the conmon monitors, and unmounts and removes its
/// directories.
#[derive(Debug)]
pub struct Crio {
    layout: Layout,
    bin_dir: PathBuf,
    config: PathBuf,
    daemon: Option<Daemon>,
    _tmp: tempfile::TempDir,
}

impl Crio {
    /// Builds what is missing, writes the configuration, copies the busybox
    /// and pause images into its storage, starts CRI-O and waits until CRI
    /// answers. `options.default_validator` is not used (CRI-O's NRI has none).
    pub fn start(options: Options) -> Result<Crio> {
        Self::start_with_config(options, |text| text)
    }

    /// [`start`](Self::start), with the configuration file's text passed
    /// through `edit` before CRI-O reads it (e.g. to add a runtime handler).
    pub fn start_with_config(
        options: Options,
        edit: impl FnOnce(String) -> String,
    ) -> Result<Crio> {
        let bin_dir = binaries()?;
        let busybox = image::busybox()?;
        let pause = image::pause()?;
        let (tmp, layout) = Layout::create("nri-e2e-crio-", "crio.sock", &options)?;
        let config = layout.dir.join("crio.conf");
        fs::write(
            &config,
            edit(config_toml(&layout, &bin_dir, &options, &pause.name)?),
        )
        .map_err(|e| E2eError::io(format!("write {}", config.display()), e))?;
        fs::write(
            layout.dir.join("policy.json"),
            r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
        )
        .map_err(|e| E2eError::io("write policy.json", e))?;
        // crun with the test's state root (see `config_toml`).
        let crun = layout.dir.join("crun.sh");
        fs::write(
            &crun,
            format!(
                "#!/bin/sh\nexec {CRUN} --root {:?} \"$@\"\n",
                layout.dir.join("crun")
            ),
        )
        .and_then(|()| fs::set_permissions(&crun, fs::Permissions::from_mode(0o755)))
        .map_err(|e| E2eError::io("write crun.sh", e))?;
        for img in [&busybox, &pause] {
            copy_image(&layout.dir, img)?;
        }
        let daemon = start_daemon(
            "crio",
            &bin_dir.join("crio"),
            &[
                OsStr::new("--config"),
                config.as_os_str(),
                OsStr::new("--config-dir"),
                layout.dir.join("crio.conf.d").as_os_str(),
            ],
            &[],
            &layout.dir.join("crio.log"),
            &layout,
        )?;
        Ok(Crio {
            layout,
            bin_dir,
            config,
            daemon: Some(daemon),
            _tmp: tmp,
        })
    }

    /// The configuration file CRI-O runs with.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// Where `crio` and `pinns` are.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }
}

impl CriRuntime for Crio {
    fn describe(&self) -> String {
        format!("CRI-O {CRIO_VERSION}")
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }
}

impl Drop for Crio {
    fn drop(&mut self) {
        self.layout.stop_runtime(self.daemon.take());
    }
}

/// Copies an image archive into the test's containers-storage.
fn copy_image(dir: &Path, image: &ImageArchive) -> Result<()> {
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("docker-archive:{}", image.path.display()),
        &format!(
            "containers-storage:[overlay@{}+{}]{}",
            dir.join("storage").display(),
            dir.join("run").display(),
            image.name
        ),
    ]))?;
    Ok(())
}

/// Debian's crun, when installed (the podman-with-crun test installs it).
const CRUN: &str = "/usr/bin/crun";

fn config_toml(layout: &Layout, bin_dir: &Path, o: &Options, pause: &str) -> Result<String> {
    let d = layout.dir.display();
    let port = free_port()?;
    // CRI-O asks every runtime it knows for its version at start-up, crun
    // among them when it is installed, and crun creates its state root
    // (`/run/crun` by default) even for `--version`: through `crun.sh`
    // (written by `start_with_config`) it is given the test's own.
    let crun_path = match Path::new(CRUN).exists() {
        true => format!("runtime_path = \"{d}/crun.sh\"\n"),
        false => String::new(),
    };
    Ok(format!(
        "[crio]\nroot = \"{d}/storage\"\nrunroot = \"{d}/run\"\nstorage_driver = \"overlay\"\n\
         log_dir = \"{d}/logs\"\nversion_file = \"{d}/version\"\n\
         version_file_persist = \"{d}/version-persist\"\nclean_shutdown_file = \"{d}/clean.shutdown\"\n\
         [crio.api]\nlisten = \"{sock}\"\nstream_address = \"127.0.0.1\"\nstream_port = \"{port}\"\n\
         [crio.runtime]\ndefault_runtime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n\
         conmon_cgroup = \"pod\"\nselinux = false\nnamespaces_dir = \"{d}/ns\"\n\
         pinns_path = \"{pinns}\"\ncontainer_exits_dir = \"{d}/exits\"\n\
         container_attach_socket_dir = \"{d}/attach\"\nhooks_dir = [\"{d}/hooks.d\"]\n\
         [crio.runtime.runtimes.runc]\nruntime_path = \"/usr/sbin/runc\"\n\
         runtime_root = \"{d}/runc\"\nmonitor_path = \"/usr/bin/conmon\"\n\
         [crio.runtime.runtimes.crun]\n{crun_path}runtime_root = \"{d}/crun\"\n\
         monitor_path = \"/usr/bin/conmon\"\n\
         [crio.image]\npause_image = \"{pause}\"\npause_command = \"\"\n\
         signature_policy = \"{d}/policy.json\"\n\
         [crio.network]\nnetwork_dir = \"{d}/cni/net.d\"\nplugin_dirs = [\"{d}/cni/bin\"]\n\
         [crio.nri]\nenable_nri = true\nnri_listen = \"{nri}\"\nnri_plugin_dir = \"{plugins}\"\n\
         nri_plugin_config_dir = \"{confd}\"\nnri_plugin_registration_timeout = \"{reg}\"\n\
         nri_plugin_request_timeout = \"{req}\"\n",
        sock = layout.socket.display(),
        pinns = bin_dir.join("pinns").display(),
        nri = layout.nri_socket.display(),
        plugins = layout.plugin_dir.display(),
        confd = layout.plugin_config_dir.display(),
        reg = o.registration_timeout,
        req = o.request_timeout,
    ))
}
