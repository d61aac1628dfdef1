//! `nri-v010-adapter`: runs NRI v0.1 plugins from an NRI plugin.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nri_plugin_v010_adapter::cli::{
    go_args, init_logging, parse_duration, parse_go_bool, plugin_name, ShortFlags,
};
use nri_plugin_v010_adapter::invoke::Invoker;
use nri_plugin_v010_adapter::v01::{DEFAULT_BINARY_PATH, DEFAULT_CONF_PATH};
use nri_plugin_v010_adapter::V010Adapter;
use nri_stub::Stub;

/// Runs the NRI v0.1 plugins of /etc/nri/conf.json at pod and container start and stop.
#[derive(Debug, Parser)]
#[command(name = "nri-v010-adapter", version)]
struct Args {
    /// Plugin name to register to NRI (default: v010-adapter, or from the runtime)
    #[arg(long)]
    name: Option<String>,
    /// Plugin index to register to NRI
    #[arg(long)]
    idx: Option<String>,
    /// Path to NRI socket
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The v0.1 configuration list
    #[arg(long = "conf", default_value = DEFAULT_CONF_PATH)]
    conf: PathBuf,
    /// Directory of v0.1 plugin executables (searched after $PATH)
    #[arg(long = "bin-dir", default_value = DEFAULT_BINARY_PATH)]
    bin_dir: PathBuf,
    /// Longest run of one v0.1 plugin (e.g. 2s); default: the runtime's request timeout
    #[arg(long = "invoke-timeout", value_parser = parse_duration)]
    invoke_timeout: Option<Duration>,
    /// Enable debug logging
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool, default_value = "false")]
    verbose: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse_from(go_args(std::env::args_os(), ShortFlags::Long));
    init_logging(args.verbose);

    let invoker = Invoker {
        conf_path: args.conf,
        bin_dir: args.bin_dir,
        search_path: std::env::var_os("PATH"),
        timeout: args.invoke_timeout.unwrap_or(Duration::from_secs(2)),
    };
    let adapter = V010Adapter::new(invoker, args.invoke_timeout.is_none());
    let mut builder = Stub::builder(adapter);
    if let Some(name) = plugin_name(args.name, "v010-adapter") {
        builder = builder.name(name);
    }
    if let Some(idx) = args.idx.filter(|i| !i.is_empty()) {
        builder = builder.index(idx);
    }
    if let Some(path) = args.socket {
        builder = builder.socket_path(path);
    }
    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(e) => {
            tracing::error!("failed to create plugin stub: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!("runtime connection: running v0.1 plugins");
    match stub.run().await {
        Ok(()) => {
            tracing::info!("runtime shutting down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("plugin exited ({e})");
            ExitCode::FAILURE
        }
    }
}
