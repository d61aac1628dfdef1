//! `nri-rdt`: the device-injector NRI plugin.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nri_plugin_rdt::cli::{go_args, init_logging, parse_go_bool, plugin_name, ShortFlags};
use nri_plugin_rdt::Rdt;
use nri_stub::Stub;

/// Sets the RDT class, schemata and monitoring of containers, as pod annotations ask.
#[derive(Debug, Parser)]
#[command(name = "nri-rdt", version)]
struct Args {
    /// Plugin name to register to NRI (default: rdt, or from the runtime)
    #[arg(long)]
    name: Option<String>,
    /// Plugin index to register to NRI
    #[arg(long)]
    idx: Option<String>,
    /// Path of the NRI socket file (not in the Go plugin)
    #[arg(long = "socket-path")]
    socket_path: Option<PathBuf>,
    /// Enable verbose logging
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, default_value = "false")]
    verbose: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse_from(go_args(std::env::args_os(), ShortFlags::Long));
    init_logging(args.verbose);
    tracing::info!(verbose = args.verbose, "starting plugin");

    let mut builder = Stub::builder(Rdt);
    if let Some(name) = plugin_name(args.name, "rdt") {
        builder = builder.name(name);
    }
    if let Some(idx) = args.idx.filter(|i| !i.is_empty()) {
        builder = builder.index(idx);
    }
    if let Some(path) = args.socket_path {
        builder = builder.socket_path(path);
    }
    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(e) => {
            tracing::error!("failed to create plugin stub: {e}");
            return ExitCode::FAILURE;
        }
    };
    match stub.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("plugin exited with error {e}");
            ExitCode::FAILURE
        }
    }
}
