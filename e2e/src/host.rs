//! What the machine must offer, what the suites install, and the processes they
//! start.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation};
use rustix::process::{kill_process, kill_process_group, Pid, Signal};

use crate::{E2eError, Result};

/// Whether a suite that cannot run must fail (`NRI_E2E_REQUIRED=1`, set by CI)
/// rather than print a `SKIPPED` line.
pub fn required() -> bool {
    matches!(
        std::env::var("NRI_E2E_REQUIRED").as_deref(),
        Ok("1") | Ok("true")
    )
}

/// Checks that the machine can run a suite and installs the Debian packages it
/// needs. Returns false (after printing one `SKIPPED` line) when it cannot and
/// [`required`] is off; panics with the reason when it is on.
///
/// ```no_run
/// if !nri_e2e::host::prepare("containerd", &["runc"]) {
///     return; // printed: SKIPPED e2e containerd: ...
/// }
/// ```
pub fn prepare(suite: &str, packages: &[&str]) -> bool {
    match check_and_install(packages) {
        Ok(()) => true,
        Err(reason) if required() => {
            panic!("e2e {suite} cannot run and NRI_E2E_REQUIRED is set: {reason}")
        }
        Err(reason) => {
            println!("SKIPPED e2e {suite}: {reason}");
            eprintln!("SKIPPED e2e {suite}: {reason}");
            false
        }
    }
}

fn check_and_install(packages: &[&str]) -> Result<()> {
    if !rustix::process::geteuid().is_root() {
        return Err(E2eError::Unsupported(
            "needs root (runtimes create namespaces, mounts and cgroups)".into(),
        ));
    }
    overlay_works()?;
    install_packages(packages)
}

/// Mounts an overlay filesystem in a temporary directory and unmounts it:
/// containerd's snapshotter needs overlayfs. A fresh machine may not have
/// loaded the module yet (`/proc/filesystems` does not list it); the first
/// mount loads it.
fn overlay_works() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| E2eError::io("create a temporary directory", e))?;
    let sub = |name: &str| -> Result<PathBuf> {
        let p = dir.path().join(name);
        fs::create_dir(&p).map_err(|e| E2eError::io(format!("create {}", p.display()), e))?;
        Ok(p)
    };
    let (lower, upper, work, merged) = (sub("lower")?, sub("upper")?, sub("work")?, sub("merged")?);
    // With util-linux's mount(8) and umount(8) rather than the mount(2) call:
    // see `unmount_below`.
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    run(Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &options])
        .arg(&merged))
    .map_err(|e| {
        E2eError::Unsupported(format!(
            "cannot mount an overlay filesystem (containerd's snapshotter needs one): {e}"
        ))
    })?;
    run(Command::new("umount").arg(&merged)).map(|_| ())
}

/// Installs the Debian packages that are not installed yet (`apt-get install`),
/// serialized across test processes by a lock in the cache directory.
pub fn install_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !package_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let _lock = lock_file(&cache_dir()?.join(".apt.lock"))?;
    let missing: Vec<&str> = missing
        .into_iter()
        .filter(|p| !package_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    if run(&mut install).is_err() {
        // The package lists may be missing on a fresh machine.
        run(Command::new("apt-get")
            .args(["update", "-q"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
        run(&mut install)?;
    }
    Ok(())
}

fn package_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("ok installed"))
        .unwrap_or(false)
}

/// Holds an exclusive `flock` on a file until dropped.
#[derive(Debug)]
pub struct FileLock(#[allow(dead_code)] File);

/// Takes an exclusive lock on `path` (created if missing), waiting for it.
pub fn lock_file(path: &Path) -> Result<FileLock> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| E2eError::io(format!("create {}", dir.display()), e))?;
    }
    let file =
        File::create(path).map_err(|e| E2eError::io(format!("create {}", path.display()), e))?;
    flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| E2eError::io(format!("lock {}", path.display()), e.into()))?;
    Ok(FileLock(file))
}

/// Where slow-to-build tools are kept between runs: `$NRI_E2E_CACHE`, else
/// `$HOME/.cache/nri-rs-e2e`, outside the clone. Entries are keyed by version.
pub fn cache_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("NRI_E2E_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache").join("nri-rs-e2e")
        }
    };
    fs::create_dir_all(&dir).map_err(|e| E2eError::io(format!("create {}", dir.display()), e))?;
    Ok(dir)
}

/// Runs a command to completion; its output, or an error with everything it
/// printed when it fails.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let line = command_line(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| E2eError::io(format!("run {line}"), e))?;
    if !out.status.success() {
        return Err(E2eError::Command {
            command: line,
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(out)
}

/// A command line for messages.
pub fn command_line(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Polls `probe` until it returns `Some`, at most `timeout`. For conditions
/// only observable from outside (a socket appearing, a daemon answering).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return Ok(v);
        }
        if start.elapsed() >= timeout {
            return Err(E2eError::Timeout {
                what: what.to_owned(),
                after: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process started by a test, in a process group of its own, with its
/// output in a log file. Dropping it stops the whole group by pid: SIGTERM,
/// then SIGKILL after a grace period; pass or fail.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `program` with `args` and `env`, output to `log`.
    pub fn spawn<S: AsRef<OsStr>>(
        name: &str,
        program: &Path,
        args: &[S],
        env: &[(&str, &OsStr)],
        log: &Path,
    ) -> Result<Daemon> {
        let out =
            File::create(log).map_err(|e| E2eError::io(format!("create {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| E2eError::io(format!("clone {}", log.display()), e))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        // A test process killed from outside (a timeout, ^C) runs no Drop:
        // the daemon is then killed by the kernel when the test thread that
        // started it ends.
        // SAFETY: the closure makes one prctl system call, which is
        // async-signal-safe, and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                    .map_err(std::io::Error::from)
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| E2eError::io(format!("start {}", program.display()), e))?;
        Ok(Daemon {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        })
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The name given at start.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` to the process only.
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let Some(pgid) = Pid::from_raw(self.child.id() as i32) else {
            return;
        };
        if self.is_running() {
            let _ = kill_process_group(pgid, Signal::TERM);
            let start = Instant::now();
            while self.is_running() && start.elapsed() < grace {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Children that outlived the leader are killed too.
        let _ = kill_process_group(pgid, Signal::KILL);
        let _ = self.child.wait();
    }

    /// Kills the process group at once (SIGKILL), as a crash would.
    pub fn crash(&mut self) {
        if let Some(pgid) = Pid::from_raw(self.child.id() as i32) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// Kills every process whose command line mentions `dir` (the shims of a
/// test's containerd name its socket there), by pid.
pub fn kill_processes_mentioning(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
}

/// Lazily unmounts every mount point below `dir`, deepest first.
pub fn unmount_below(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    // umount(8) rather than rustix's `mount` feature: no other workspace
    // member turns that feature on, so with it every `cargo test` that leaves
    // this crate out (`--exclude nri-e2e`, as scripts/test runs the other
    // tests) would build rustix and everything above it a second time.
    for p in points {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&p)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Removes the test's cgroup parent in every v1 hierarchy (empty by now).
pub fn remove_cgroups(parent: &str) {
    let Ok(entries) = fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path().join(parent.trim_start_matches('/'));
        if dir.is_dir() {
            // Children first; cgroup directories are removed with rmdir.
            if let Ok(children) = fs::read_dir(&dir) {
                for child in children.flatten() {
                    if child.path().is_dir() {
                        let _ = fs::remove_dir(child.path());
                    }
                }
            }
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Reads the cgroup v1 file `file` (e.g. `cpu.shares`) of the `controller`
/// hierarchy (e.g. `cpu`) of process `pid`'s cgroup, trimmed: where a
/// container's resources land.
///
/// ```no_run
/// let shares = nri_e2e::host::cgroup_v1_file(std::process::id(), "cpu", "cpu.shares").unwrap();
/// assert!(shares.parse::<u64>().is_ok());
/// ```
pub fn cgroup_v1_file(pid: u32, controller: &str, file: &str) -> Result<String> {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| E2eError::io(format!("read /proc/{pid}/cgroup"), e))?;
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let _ = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| path.to_owned())
        })
        .ok_or_else(|| {
            E2eError::Unsupported(format!("no {controller} cgroup for pid {pid}:\n{cgroups}"))
        })?;
    let mount = fs::read_dir("/sys/fs/cgroup")
        .map_err(|e| E2eError::io("read /sys/fs/cgroup", e))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().split(',').any(|c| c == controller))
                .unwrap_or(false)
        })
        .ok_or_else(|| E2eError::Unsupported(format!("no cgroup v1 hierarchy for {controller}")))?;
    let file_path = mount.join(path.trim_start_matches('/')).join(file);
    fs::read_to_string(&file_path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| E2eError::io(format!("read {}", file_path.display()), e))
}
