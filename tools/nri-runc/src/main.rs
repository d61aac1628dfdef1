//! `nri-runc`: an OCI runtime that gives any engine NRI.
//!
//! Command-line compatible with runc: every command, global flag and exit
//! status passes through to the real runtime (runc or crun, from `PATH` or
//! the configuration). Around `create`, `start`, `kill`, `delete`,
//! `update`, `pause` and `resume` it asks `nri-hostd` over its control
//! socket, so NRI plugins adjust and follow the containers. It starts no
//! other program than the real runtime.
//!
//! Configuration: `$NRI_RUNC_CONFIG`, else `<program>.toml` next to the
//! program, else `/etc/nri/nri-runc.toml` (see the README). Exit status: the real runtime's, or 1 when the
//! wrapper refuses (a plugin rejected the container, the daemon failed,
//! the bundle is unreadable).

mod cli;
mod config;
mod wrapper;

use std::process::ExitCode;

use crate::config::Config;
use crate::wrapper::{find_runtime, Wrapper, FAILED};

fn main() -> ExitCode {
    let mut argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let argv0 = if argv.is_empty() {
        String::new()
    } else {
        argv.remove(0)
    };
    let config = match Config::load(&argv0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nri-runc: {e}");
            return ExitCode::from(FAILED as u8);
        }
    };
    let runtime = match find_runtime(&config.runtime) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nri-runc: {e}");
            return ExitCode::from(FAILED as u8);
        }
    };
    let wrapper = Wrapper::new(config, runtime, argv);
    match wrapper.run() {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            wrapper.report(&e);
            ExitCode::from(FAILED as u8)
        }
    }
}
