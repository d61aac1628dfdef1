//! `nri-device-injector`: the device-injector NRI plugin.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nri_plugin_device_injector::cli::{
    go_args, init_logging, parse_go_bool, plugin_name, ShortFlags,
};
use nri_plugin_device_injector::DeviceInjector;
use nri_stub::Stub;

/// Injects devices, mounts and more into containers, as pod annotations ask.
#[derive(Debug, Parser)]
#[command(name = "nri-device-injector", version)]
struct Args {
    /// Plugin name to register to NRI (default: device-injector, or from the runtime)
    #[arg(long)]
    name: Option<String>,
    /// Plugin index to register to NRI
    #[arg(long)]
    idx: Option<String>,
    /// Path of the NRI socket file
    #[arg(long = "socket-path")]
    socket_path: Option<PathBuf>,
    /// Enable (more) verbose logging
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, default_value = "false")]
    verbose: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse_from(go_args(std::env::args_os(), ShortFlags::Long));
    init_logging(args.verbose);

    let mut builder = Stub::builder(DeviceInjector);
    if let Some(name) = plugin_name(args.name, "device-injector") {
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
