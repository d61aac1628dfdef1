//! The physical limit of a CreateContainer through a chain of plugins: one
//! runtime process and one process per plugin, each hop a blocking echo of
//! the bytes the real call puts on the trunk (request out, reply back) over
//! a Unix socket pair, one plugin after the other, no protocol at all.
//!
//! The plugin processes are the bench program itself, started again with
//! [`ECHO_ENV`] set: [`serve_echo_if_asked`] runs first in `main` and never
//! returns in them.

// Each bench including this module uses only some of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set to `REQUEST_BYTES,REPLY_BYTES` in an echo process.
pub const ECHO_ENV: &str = "NRI_BENCH_RAW_ECHO";

/// In an echo process (started by [`measure`]): answers every request
/// read from its standard input (its end of the socket pair) with a reply
/// of the reply size on the same socket, until the runtime hangs up, then
/// exits. Elsewhere returns at once.
pub fn serve_echo_if_asked() {
    let Ok(sizes) = std::env::var(ECHO_ENV) else {
        return;
    };
    let parse = |s: Option<&str>| s.and_then(|s| s.trim().parse::<usize>().ok());
    let mut it = sizes.split(',');
    let (Some(req_len), Some(resp_len)) = (parse(it.next()), parse(it.next())) else {
        eprintln!("raw chain: bad {ECHO_ENV}={sizes:?}");
        std::process::exit(2);
    };
    let mut sock = std::io::stdin();
    let mut out = std::io::stdout();
    let mut req = vec![0u8; req_len];
    let resp = vec![0u8; resp_len];
    while sock.read_exact(&mut req).is_ok() {
        // stdout is the same socket as stdin: write straight to fd 1,
        // unbuffered.
        if out.write_all(&resp).and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    std::process::exit(0);
}

/// One plugin process of the chain and the runtime's end of its socket.
struct Echo {
    child: Child,
    sock: UnixStream,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let _ = self.child.wait();
    }
}

/// Per-call latencies of `iters` calls (after `warmup` more) through
/// `plugins` echo processes, each hop `hop_bytes` (request, reply).
pub fn measure(
    plugins: usize,
    hop_bytes: &[(usize, usize)],
    iters: usize,
    warmup: usize,
) -> Vec<Duration> {
    let exe = std::env::current_exe().expect("the bench program's path");
    let mut chain: Vec<(Echo, Vec<u8>, Vec<u8>)> = (0..plugins)
        .map(|i| {
            let (req_len, resp_len) = hop_bytes[i % hop_bytes.len()];
            let (ours, theirs) = UnixStream::pair().expect("socketpair");
            let theirs_out = theirs.try_clone().expect("dup socket");
            let child = Command::new(&exe)
                .env(ECHO_ENV, format!("{req_len},{resp_len}"))
                .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
                .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start an echo process");
            (
                Echo { child, sock: ours },
                vec![0u8; req_len],
                vec![0u8; resp_len],
            )
        })
        .collect();
    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let start = Instant::now();
        for (echo, req, resp) in chain.iter_mut() {
            echo.sock.write_all(req).expect("write to an echo process");
            echo.sock
                .read_exact(resp)
                .expect("read from an echo process");
        }
        if i >= warmup {
            samples.push(start.elapsed());
        }
    }
    drop(chain);
    samples
}
