//! Who may reach nri-hostd's sockets: the control socket's mode and group
//! under umask 000, the directories it refuses, and the allow-list of peer
//! uids and gids, tried with a client running as an unprivileged user; and
//! the NRI socket's mode from the top-level `socket_mode`.
//!
//! Own `main` (`harness = false`): the process runs under umask 000 (the
//! umask is per process), and started with `NRI_HOSTD_TEST_CLIENT` the same
//! binary is the client, run as `nobody` (uid and gid 65534). The
//! unprivileged scenarios need root and are skipped without it.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nri_hostd::protocol::{call, Request, Response};
use nri_hostd::{server, Hostd, HostdConfig};

const CLIENT_ENV: &str = "NRI_HOSTD_TEST_CLIENT";
const NOBODY: u32 = 65534;
const WAIT: Duration = Duration::from_secs(20);
/// Exit status of a client whose connect(2) was refused for permission.
const EXIT_EACCES: i32 = 13;
/// Exit status of a client that connected but got no answer.
const EXIT_NO_ANSWER: i32 = 3;

/// `connect:<path>` only connects; `ping:<path>` sends a Ping.
fn client_main(task: &str) -> i32 {
    let Some((what, path)) = task.split_once(':') else {
        return 2;
    };
    let path = Path::new(path);
    match what {
        "connect" => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => 0,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => EXIT_EACCES,
            Err(e) => {
                eprintln!("client: connect: {e}");
                1
            }
        },
        "ping" => match call(path, &Request::Ping, Duration::from_secs(5)) {
            Ok(Response::Ok) => 0,
            Ok(other) => {
                eprintln!("client: unexpected answer {other:?}");
                1
            }
            Err(e) => {
                eprintln!("client: {e}");
                EXIT_NO_ANSWER
            }
        },
        _ => 2,
    }
}

fn spawn_nobody(task: &str, socket: &Path) -> Child {
    let exe = std::env::current_exe().unwrap();
    Command::new(&exe)
        .env(CLIENT_ENV, format!("{task}:{}", socket.display()))
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} as uid {NOBODY}: {e}", exe.display()))
}

/// Waits for `child` (bounded); kills it by pid if it does not exit.
async fn wait_child(mut child: Child) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("client {} did not exit in time", child.id());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Log lines, captured.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn lines_with(&self, parts: &[&str]) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_string)
            .collect()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        LogWriter(self.0.clone())
    }
}

/// A temporary tree others may enter: `<tmp>` and `<tmp>/run`, both 0755
/// and there before the daemon starts.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        Tree { dir }
    }

    fn run(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn config(&self) -> HostdConfig {
        let mut config = HostdConfig::default();
        config.nri.socket_path = self.run().join("nri.sock");
        config.nri.plugin_path = self.dir.path().join("plugins");
        config.nri.plugin_config_path = self.dir.path().join("conf.d");
        config.hostd.state_file = self.dir.path().join("state.json");
        config.hostd.control_socket = self.run().join("nri-hostd.sock");
        config
    }
}

/// A daemon serving its control socket as `config` says.
struct Daemon {
    hostd: Arc<Hostd>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Daemon {
    async fn start(config: HostdConfig) -> std::io::Result<Daemon> {
        let socket = config.hostd.control_socket.clone();
        let access = config.hostd.control_access();
        let hostd = Arc::new(Hostd::start(config).await.unwrap());
        let listener = match server::bind(&socket, &access) {
            Ok(l) => l,
            Err(e) => {
                hostd.stop().await;
                return Err(e);
            }
        };
        let server = tokio::spawn(server::serve_listener(hostd.clone(), listener));
        Ok(Daemon { hostd, server })
    }

    async fn stop(self) {
        self.server.abort();
        self.hostd.stop().await;
    }
}

fn mode_and_gid(path: &Path) -> (u32, u32) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.mode() & 0o7777, meta.gid())
}

async fn ping_as_root(socket: &Path) -> Response {
    let socket = socket.to_path_buf();
    tokio::task::spawn_blocking(move || call(&socket, &Request::Ping, WAIT))
        .await
        .unwrap()
        .unwrap()
}

// ---- scenarios ----

/// Umask 000, existing 0755 directory: both the control socket and the NRI
/// socket are 0600 and root is served.
async fn default_modes_are_0600_whatever_the_umask() {
    let tree = Tree::new();
    let config = tree.config();
    let (control, nri) = (
        config.hostd.control_socket.clone(),
        config.nri.socket_path.clone(),
    );
    let daemon = Daemon::start(config).await.unwrap();
    assert_eq!(mode_and_gid(&control).0, 0o600);
    assert_eq!(mode_and_gid(&nri).0, 0o600);
    assert_eq!(mode_and_gid(&tree.run()).0, 0o755);
    assert!(matches!(ping_as_root(&control).await, Response::Ok));
    daemon.stop().await;
}

/// Configured modes and groups, for both sockets.
async fn configured_modes_and_groups() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.hostd.control_socket_mode = 0o660;
    config.hostd.control_socket_gid = Some(NOBODY);
    config.nri.socket_mode = 0o640;
    config.nri.socket_gid = Some(NOBODY);
    let (control, nri) = (
        config.hostd.control_socket.clone(),
        config.nri.socket_path.clone(),
    );
    let daemon = Daemon::start(config).await.unwrap();
    assert_eq!(mode_and_gid(&control), (0o660, NOBODY));
    assert_eq!(mode_and_gid(&nri), (0o640, NOBODY));
    daemon.stop().await;
}

/// A control socket directory others may write to is refused.
async fn writable_directory_is_refused() {
    let tree = Tree::new();
    let open = tree.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut config = tree.config();
    config.hostd.control_socket = open.join("nri-hostd.sock");
    let Err(err) = Daemon::start(config).await else {
        panic!("a world-writable directory was not refused");
    };
    let text = err.to_string();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{text}");
    assert!(text.contains("refusing to listen"), "{text}");
    assert!(text.contains("is writable by others (mode 0777)"), "{text}");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
}

/// With the default mode, nobody cannot connect to the control socket.
async fn nobody_cannot_connect_by_default() {
    let tree = Tree::new();
    let config = tree.config();
    let control = config.hostd.control_socket.clone();
    let daemon = Daemon::start(config).await.unwrap();
    let status = wait_child(spawn_nobody("connect", &control)).await;
    assert_eq!(status.code(), Some(EXIT_EACCES), "{status}");
    daemon.stop().await;
}

/// A control socket anyone may connect to, with only uid 0 allowed: nobody
/// connects but gets no answer, and the refusal is logged; root is served.
async fn allow_list_refuses_nobody(logs: &Logs) {
    let tree = Tree::new();
    let mut config = tree.config();
    config.hostd.control_socket_mode = 0o666;
    config.hostd.control_allowed_uids = vec![0];
    let control = config.hostd.control_socket.clone();
    let daemon = Daemon::start(config).await.unwrap();
    let status = wait_child(spawn_nobody("ping", &control)).await;
    assert_eq!(status.code(), Some(EXIT_NO_ANSWER), "{status}");
    let refused = logs.lines_with(&[
        "refused control connection",
        "uid 65534 is not among the allowed uids [0]",
    ]);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(matches!(ping_as_root(&control).await, Response::Ok));
    let served = logs.lines_with(&[
        "control connection",
        &format!("pid {} uid 0 gid 0", std::process::id()),
    ]);
    assert!(!served.is_empty(), "no peer logged for root's connection");
    daemon.stop().await;
}

/// An allowed gid lets nobody in through a group socket.
async fn allowed_gid_serves_nobody() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.hostd.control_socket_mode = 0o660;
    config.hostd.control_socket_gid = Some(NOBODY);
    config.hostd.control_allowed_uids = vec![0];
    config.hostd.control_allowed_gids = vec![NOBODY];
    let control = config.hostd.control_socket.clone();
    let daemon = Daemon::start(config).await.unwrap();
    let status = wait_child(spawn_nobody("ping", &control)).await;
    assert_eq!(status.code(), Some(0), "{status}");
    daemon.stop().await;
}

fn main() {
    if let Ok(task) = std::env::var(CLIENT_ENV) {
        std::process::exit(client_main(&task));
    }
    // SAFETY: umask(2) cannot fail; the process is still single-threaded.
    unsafe { libc_umask(0) };
    let logs = Logs::default();
    tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .init();
    let root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut passed = 0;
    rt.block_on(async {
        println!("test default_modes_are_0600_whatever_the_umask ...");
        default_modes_are_0600_whatever_the_umask().await;
        println!("test writable_directory_is_refused ...");
        writable_directory_is_refused().await;
        passed += 2;
        if !root {
            println!("skipped (needs root): configured_modes_and_groups, nobody_cannot_connect_by_default, allow_list_refuses_nobody, allowed_gid_serves_nobody");
            return;
        }
        println!("test configured_modes_and_groups ...");
        configured_modes_and_groups().await;
        println!("test nobody_cannot_connect_by_default ...");
        nobody_cannot_connect_by_default().await;
        println!("test allow_list_refuses_nobody ...");
        allow_list_refuses_nobody(&logs).await;
        println!("test allowed_gid_serves_nobody ...");
        allowed_gid_serves_nobody().await;
        passed += 4;
    });
    println!("test result: ok. {passed} passed");
}

extern "C" {
    #[link_name = "umask"]
    fn libc_umask(mask: u32) -> u32;
}
