//! The memory floor of an idle plugin: `VmRSS` of `nri-rs-rss-floor`
//! (package `interop/min-plugin`), a program of the same build as the
//! minimal plugin that starts, says so and blocks reading a socket, with no
//! plugin code at all. Its `VmRSS` is what any Rust program of that build
//! pays on this machine (the standard library's start-up, the dynamic loader
//! and the C library); the minimal plugin's figure less this one is what the
//! plugin's own code costs.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a floor process may take to start and block.
const START_LIMIT: Duration = Duration::from_secs(30);

/// Idle memory of one process, in KiB.
#[derive(Clone, Copy, Debug)]
pub struct Idle {
    pub vm_rss: u64,
    pub rss_anon: u64,
}

/// One floor process; killed and reaped when the measurement ends, read or
/// failed.
struct Floor {
    child: Child,
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `count` processes of `program` one after the other and returns
/// the idle memory of each, read once it is blocked in its read.
pub fn measure(program: &Path, count: usize) -> Vec<Idle> {
    (0..count).map(|_| measure_one(program)).collect()
}

fn measure_one(program: &Path) -> Idle {
    let (mut ours, theirs) = UnixStream::pair().expect("socketpair");
    let theirs_out = theirs.try_clone().expect("dup socket");
    let child = Command::new(program)
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(OwnedFd::from(theirs_out)))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
    let floor = Floor { child };
    let pid = floor.child.id();
    ours.set_read_timeout(Some(START_LIMIT))
        .expect("socket timeout");
    let mut up = [0u8; 1];
    ours.read_exact(&mut up)
        .unwrap_or_else(|e| panic!("{} did not start: {e}", program.display()));
    // It wrote its byte; it is idle once the kernel has put it to sleep in its read.
    let deadline = Instant::now() + START_LIMIT;
    while proc_state(pid) != Some('S') {
        assert!(
            Instant::now() < deadline,
            "{} (pid {pid}) did not block in its read",
            program.display()
        );
        std::thread::yield_now();
    }
    idle_memory(pid).unwrap_or_else(|| panic!("no memory figures in /proc/{pid}/status"))
}

fn proc_state(pid: u32) -> Option<char> {
    nri_interop::bench::proc_stat(pid).ok().map(|s| s.state)
}

fn idle_memory(pid: u32) -> Option<Idle> {
    let kib = |field| nri_interop::bench::status_kib(pid, field).ok();
    Some(Idle {
        vm_rss: kib("VmRSS:")?,
        rss_anon: kib("RssAnon:")?,
    })
}
