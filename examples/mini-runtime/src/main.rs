//! `nri-mini-runtime`: a small container runtime that starts no containers.
//!
//! It keeps pods and containers in memory, runs NRI plugins through
//! `nri-integration` (pre-installed ones from the plugin directory, external
//! ones connecting to the socket), applies their adjustments and updates to
//! each container's OCI spec with `nri-oci`, and writes the spec to
//! `<state-dir>/<container-id>/config.json`. What happens is read from a
//! script, one command per line (see [`script`]).
//!
//! ```text
//! nri-mini-runtime [--socket PATH] [--plugin-dir DIR] [--plugin-config-dir DIR]
//!                  --state-dir DIR SCRIPT
//! ```
//!
//! Exit status: 0 when every step succeeded, 1 when a step failed or NRI
//! could not start, 2 for bad usage or a bad script.

mod cli;
mod runner;
mod script;
mod spec;
mod store;

use std::process::ExitCode;
use std::sync::Arc;

use nri_integration::{Config, Nri};
use tracing_subscriber::EnvFilter;

use crate::cli::Options;
use crate::runner::Runner;
use crate::store::Store;

/// Environment variable with the log filter (default `warn`).
const LOG_ENV: &str = "NRI_MINI_RUNTIME_LOG";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    let opts = match Options::parse(std::env::args_os().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("nri-mini-runtime: {e}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let steps = match opts.read_script() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nri-mini-runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&opts.state_dir) {
        eprintln!(
            "nri-mini-runtime: cannot create {}: {e}",
            opts.state_dir.display()
        );
        return ExitCode::from(1);
    }

    // 1. NRI, configured as a runtime's configuration file would.
    let nri = Nri::builder(nri_config(&opts))
        .runtime("nri-mini-runtime", env!("CARGO_PKG_VERSION"))
        .build();
    // 2. The domain: the store plugins synchronize with and update.
    let store = Arc::new(Store::new(&opts.state_dir));
    if let Err(e) = nri.register_domain(store.clone()) {
        eprintln!("nri-mini-runtime: {e}");
        return ExitCode::from(1);
    }
    // 3. Start: pre-installed plugins are launched and synchronized, the
    //    socket accepts external plugins.
    if let Err(e) = nri.start().await {
        eprintln!("nri-mini-runtime: {e}");
        return ExitCode::from(1);
    }

    // 4. The script.
    let failed = Runner::new(nri.clone(), store).run(&steps).await;

    // 5. Plugins get Shutdown, launched ones end.
    nri.stop().await;
    println!("done: {} steps, {failed} failed", steps.len());
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn nri_config(opts: &Options) -> Config {
    let mut config = Config {
        plugin_path: opts.plugin_dir.clone(),
        plugin_config_path: opts.plugin_config_dir.clone(),
        ..Config::default()
    };
    match &opts.socket {
        Some(socket) => config.socket_path = socket.clone(),
        None => config.disable_connections = true,
    }
    config
}
