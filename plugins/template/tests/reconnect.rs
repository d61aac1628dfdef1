//! The template program connects again when the runtime goes away, and exits
//! instead with `-no-reconnect` (the behaviour of the Go samples).

use std::os::unix::net::UnixListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nri-template");
const WAIT: Duration = Duration::from_secs(10);

/// Accepts one connection, within [`WAIT`], and closes it: a runtime that goes away.
fn accept_and_drop(listener: &UnixListener) {
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                drop(conn);
                return;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the plugin did not connect: {e}"),
        }
    }
}

fn spawn(socket: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(BIN)
        .args(["-idx", "10", "-socket-path"])
        .arg(socket)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nri-template")
}

fn exited_within(child: &mut Child, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().expect("wait").is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn reconnects_by_default_and_exits_with_no_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();

    let mut plugin = spawn(&socket, &[]);
    for _ in 0..3 {
        accept_and_drop(&listener);
    }
    assert!(plugin.try_wait().unwrap().is_none(), "the plugin gave up");
    plugin.kill().unwrap();
    plugin.wait().unwrap();

    let mut plugin = spawn(&socket, &["-no-reconnect"]);
    accept_and_drop(&listener);
    assert!(exited_within(&mut plugin, WAIT), "the plugin did not exit");
}
