//! Who may reach the adaptation's socket for external plugins: its mode and
//! group under umask 000, the directories it refuses, and the allow-list of
//! peer uids and gids, tried with a client running as an unprivileged user.
//!
//! This test has its own `main` (`harness = false`): the whole process runs
//! under umask 000 (the umask is per process, so no other test shares it),
//! and started with `NRI_SOCKET_TEST_CLIENT` the same binary is the client,
//! run as `nobody` (uid and gid 65534). The unprivileged scenarios need root
//! to switch users and are skipped without it.

mod capture;
mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nri_adaptation::socket::SocketAccess;
use nri_adaptation::Adaptation;
use nri_stub::Plugin;
use support::*;

const CLIENT_ENV: &str = "NRI_SOCKET_TEST_CLIENT";
const NOBODY: u32 = 65534;
/// Exit status of a client whose connect(2) was refused for permission.
const EXIT_EACCES: i32 = 13;
/// Exit status of a client whose plugin failed to register.
const EXIT_NOT_REGISTERED: i32 = 3;

struct Quiet;

#[nri_stub::plugin]
impl Plugin for Quiet {
    async fn run_pod_sandbox(
        &self,
        _ctx: &nri_stub::Context,
        _pod: &nri_api::PodSandbox,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
}

/// The client: `connect:<path>` only connects; `register:<path>` runs an
/// nri-stub plugin `50-nobody` until its connection ends.
fn client_main(task: &str) -> i32 {
    let Some((what, path)) = task.split_once(':') else {
        return 2;
    };
    match what {
        "connect" => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => 0,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => EXIT_EACCES,
            Err(e) => {
                eprintln!("client: connect {path}: {e}");
                1
            }
        },
        "register" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let stub = nri_stub::Stub::builder(Quiet)
                    .name("nobody")
                    .index("50")
                    .socket_path(path)
                    .registration_timeout(Duration::from_secs(5))
                    .build()
                    .unwrap();
                match stub.run().await {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("client: {e}");
                        EXIT_NOT_REGISTERED
                    }
                }
            })
        }
        _ => 2,
    }
}

/// Starts this binary as the client, as uid and gid 65534 (std drops the
/// supplementary groups when root changes the uid).
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

/// A temporary directory only its owner may write to (tempfile leaves the
/// mode to the umask: under umask 000 it would be 0777, and refused).
fn private_env() -> Env {
    let env = Env::new();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    env
}

/// A directory tree others may enter (so that only the socket's own mode
/// keeps them out): `<tmp>/run`, mode 0755, created before the adaptation.
fn open_env() -> (Env, PathBuf) {
    let env = Env::new();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = env.dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    (env, run.join("nri.sock"))
}

fn mode_and_gid(path: &Path) -> (u32, u32) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.mode() & 0o7777, meta.gid())
}

async fn start(env: &Env, access: SocketAccess) -> Result<Adaptation, nri_adaptation::Error> {
    let nri = env.builder().socket_access(access).build();
    match bounded(nri.start()).await {
        Ok(()) => Ok(nri),
        Err(e) => {
            nri.stop().await;
            Err(e)
        }
    }
}

// ---- scenarios ----

/// Under umask 000, in an existing 0755 directory: the socket is 0600 and
/// root's plugins register on it.
async fn default_mode_is_0600_whatever_the_umask() {
    let (env, socket) = open_env();
    let nri = start(&env, SocketAccess::default()).await.unwrap();
    assert_eq!(mode_and_gid(&socket).0, 0o600);
    // The directory was there: its mode is left alone.
    assert_eq!(mode_and_gid(socket.parent().unwrap()).0, 0o755);
    let root = run_stub(Quiet, "root", "10", &socket);
    wait_plugins(&nri, &["10-root"]).await;
    bounded(nri.stop()).await;
    let _ = bounded(root).await;
}

/// A missing directory is created 0700 (0750 with a group) under umask 000.
async fn created_directory_is_private() {
    let env = private_env();
    let nri = start(&env, SocketAccess::default()).await.unwrap();
    assert_eq!(mode_and_gid(&env.socket()).0, 0o600);
    assert_eq!(mode_and_gid(env.socket().parent().unwrap()).0, 0o700);
    bounded(nri.stop()).await;
}

/// A socket directory its group or others may write to is refused, with
/// the directory and its mode in the error, and nothing is created there.
async fn writable_directories_are_refused() {
    for (mode, words) in [
        (0o777, "writable by others (mode 0777)"),
        (0o1777, "writable by others (mode 1777)"),
        (0o770, "writable by its group (mode 0770)"),
    ] {
        let (env, socket) = open_env();
        let dir = socket.parent().unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let Err(err) = start(&env, SocketAccess::default()).await else {
            panic!("listening in a {mode:o} directory was not refused");
        };
        let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(text.contains(words), "{text}");
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(text.contains("refusing to listen"), "{text}");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "{text}");
    }
}

/// A configured mode and group are the socket's, under umask 000.
async fn configured_mode_and_group() {
    let (env, socket) = open_env();
    let access = SocketAccess::default().mode(0o660).group(NOBODY);
    let nri = start(&env, access).await.unwrap();
    assert_eq!(mode_and_gid(&socket), (0o660, NOBODY));
    bounded(nri.stop()).await;
    // And a directory it creates gets the group and 0750.
    let env = private_env();
    let access = SocketAccess::default().mode(0o640).group(NOBODY);
    let nri = start(&env, access).await.unwrap();
    assert_eq!(mode_and_gid(&env.socket()), (0o640, NOBODY));
    assert_eq!(
        mode_and_gid(env.socket().parent().unwrap()),
        (0o750, NOBODY)
    );
    bounded(nri.stop()).await;
}

/// With the default mode an unprivileged user cannot even connect.
async fn nobody_cannot_connect_with_the_default_mode() {
    let (env, socket) = open_env();
    let nri = start(&env, SocketAccess::default()).await.unwrap();
    let status = wait_child(spawn_nobody("connect", &socket)).await;
    assert_eq!(status.code(), Some(EXIT_EACCES), "{status}");
    assert!(nri.plugins().is_empty());
    bounded(nri.stop()).await;
}

/// A socket anyone may connect to, but only uid 0 admitted: nobody's plugin
/// is disconnected before it registers, with the reason logged; root's
/// plugin registers on the same socket and the peer is logged.
async fn allow_list_refuses_nobody(logs: &capture::Captured) {
    let (env, socket) = open_env();
    let access = SocketAccess::default().mode(0o666).allow_uids([0]);
    let nri = start(&env, access).await.unwrap();
    assert_eq!(mode_and_gid(&socket).0, 0o666);
    // The mode lets it connect...
    let status = wait_child(spawn_nobody("connect", &socket)).await;
    assert_eq!(status.code(), Some(0), "{status}");
    // ...but its plugin never registers.
    let status = wait_child(spawn_nobody("register", &socket)).await;
    assert_eq!(status.code(), Some(EXIT_NOT_REGISTERED), "{status}");
    assert!(nri.plugins().is_empty());
    let refused = logs.lines_with(&[
        "refused external plugin connection",
        "uid 65534 is not among the allowed uids [0]",
    ]);
    assert!(!refused.is_empty(), "{}", logs.text());
    assert!(refused[0].contains("WARN"), "{}", refused[0]);
    assert!(logs.lines_with(&["nobody", "registered"]).is_empty());

    let root = run_stub(Quiet, "admitted", "10", &socket);
    wait_plugins(&nri, &["10-admitted"]).await;
    let exe = std::env::current_exe().unwrap();
    let registered = logs.lines_with(&[
        "external plugin registered",
        "10-admitted",
        &format!("pid={}", std::process::id()),
        "uid=0",
        "gid=0",
        &format!("exe={}", exe.display()),
    ]);
    assert_eq!(registered.len(), 1, "{}", logs.text());
    bounded(nri.stop()).await;
    let _ = bounded(root).await;
}

/// An allowed gid admits nobody through a group-accessible socket.
async fn allowed_gid_admits_nobody(logs: &capture::Captured) {
    let (env, socket) = open_env();
    let access = SocketAccess::default()
        .mode(0o660)
        .group(NOBODY)
        .allow_uids([0])
        .allow_gids([NOBODY]);
    let nri = start(&env, access).await.unwrap();
    let child = spawn_nobody("register", &socket);
    let pid = child.id();
    wait_plugins(&nri, &["50-nobody"]).await;
    let registered = logs.lines_with(&[
        "external plugin registered",
        "50-nobody",
        &format!("pid={pid}"),
        "uid=65534",
        "gid=65534",
    ]);
    assert_eq!(registered.len(), 1, "{}", logs.text());
    // Stopping the adaptation ends the plugin's connection and the client.
    bounded(nri.stop()).await;
    let status = wait_child(child).await;
    assert!(status.code().is_some(), "{status}");
}

fn main() {
    if let Ok(task) = std::env::var(CLIENT_ENV) {
        std::process::exit(client_main(&task));
    }
    // Every scenario runs under umask 000, as dockerd does.
    rustix::process::umask(rustix::fs::Mode::empty());
    let logs = capture::Captured::default();
    tracing::subscriber::set_global_default(logs.subscriber()).unwrap();
    let root = rustix::process::geteuid().is_root();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut passed = 0;
    rt.block_on(async {
        println!("test default_mode_is_0600_whatever_the_umask ...");
        default_mode_is_0600_whatever_the_umask().await;
        println!("test created_directory_is_private ...");
        created_directory_is_private().await;
        println!("test writable_directories_are_refused ...");
        writable_directories_are_refused().await;
        passed += 3;
        if !root {
            println!("skipped (needs root): configured_mode_and_group, nobody_cannot_connect_with_the_default_mode, allow_list_refuses_nobody, allowed_gid_admits_nobody");
            return;
        }
        println!("test configured_mode_and_group ...");
        configured_mode_and_group().await;
        println!("test nobody_cannot_connect_with_the_default_mode ...");
        nobody_cannot_connect_with_the_default_mode().await;
        println!("test allow_list_refuses_nobody ...");
        allow_list_refuses_nobody(&logs).await;
        println!("test allowed_gid_admits_nobody ...");
        allowed_gid_admits_nobody(&logs).await;
        passed += 4;
    });
    println!("test result: ok. {passed} passed");
}
