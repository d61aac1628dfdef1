//! `nri-network-device-injector`: moves host network devices into the network namespace
//! of pods annotated with `netdevice.noderesource.dev` (or the older
//! `netdevices.nri.containerd.io`), and gives them back when the pod stops.

mod cli;
mod netdevice;
mod netlink;
mod plugin;

use std::process::ExitCode;

use nri_stub::Stub;

use crate::cli::Args;
use crate::plugin::NetDeviceInjector;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::from_env();
    nri_plugin_util::init_logging(args.verbose);
    tracing::info!(name = ?args.name, idx = ?args.idx, verbose = args.verbose, "starting plugin");

    let mut builder = Stub::builder(NetDeviceInjector);
    if let Some(name) = args.name {
        builder = builder.name(name);
    }
    if let Some(idx) = args.idx {
        builder = builder.index(idx);
    }
    if let Some(socket) = args.socket {
        builder = builder.socket_path(socket);
    }
    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(err) => {
            tracing::error!("failed to create plugin stub: {err}");
            return ExitCode::FAILURE;
        }
    };
    match stub.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("plugin exited with error: {err}");
            ExitCode::FAILURE
        }
    }
}
