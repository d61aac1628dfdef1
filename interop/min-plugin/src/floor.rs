//! `nri-rs-rss-floor`: the memory floor of a Rust program built like
//! `nri-rs-min-plugin`. It does what every plugin does before any NRI code
//! runs and nothing more: it starts (the standard library's start-up, the
//! dynamic loader and the C library), says it is up by writing one byte to
//! its standard output, then blocks reading its standard input until end of
//! file. The adaptation bench gives it one end of a Unix socket pair as both
//! and reads its `VmRSS` while it waits: what an idle plugin of the same
//! build would cost if the plugin's own code (tokio, the stub, the protocol)
//! were free.
//!
//! ```text
//! nri-rs-rss-floor    # stdin and stdout: the same connected socket
//! ```

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut out = std::io::stdout().lock();
    if out.write_all(&[1]).and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    let mut buf = [0u8; 1];
    let mut input = std::io::stdin().lock();
    // Nothing is sent: the read returns at end of file, when the bench hangs up.
    loop {
        match input.read(&mut buf) {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return ExitCode::FAILURE,
        }
    }
}
