//! `nri-tap proxy` stopped with SIGTERM or SIGINT removes its listening
//! socket and exits 0.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stopped_by(signal: Signal, dir: &Path) {
    let listen = dir.join(format!("tap-{signal:?}.sock"));
    let mut tap = Command::new(env!("CARGO_BIN_EXE_nri-tap"))
        .args(["proxy", "--listen"])
        .arg(&listen)
        .arg("--runtime")
        .arg(dir.join("no-runtime.sock"))
        .args(["--record"])
        .arg(dir.join("rec.jsonl"))
        .stderr(Stdio::null())
        .spawn()
        .expect("start nri-tap");
    wait_for("the listening socket", || listen.exists());
    let pid = Pid::from_raw(i32::try_from(tap.id()).expect("pid")).expect("pid");
    kill_process(pid, signal).expect("signal nri-tap");
    let status = tap.wait().expect("wait for nri-tap");
    assert!(status.success(), "{signal:?}: {status}");
    assert!(!listen.exists(), "{signal:?} left {}", listen.display());
}

#[test]
fn sigterm_and_sigint_remove_the_listening_socket() {
    let dir = tempfile::tempdir().expect("temporary directory");
    stopped_by(Signal::TERM, dir.path());
    stopped_by(Signal::INT, dir.path());
}
