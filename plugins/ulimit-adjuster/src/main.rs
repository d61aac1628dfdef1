//! `nri-ulimit-adjuster`: sets the rlimits (ulimits) of containers from pod annotations
//! `ulimits.noderesource.dev/container.<name>` (or the older
//! `ulimits.nri.containerd.io/container.<name>`).

use std::process::ExitCode;

use nri_stub::Stub;

use nri_plugin_ulimit_adjuster::cli::Args;
use nri_plugin_ulimit_adjuster::plugin::UlimitAdjuster;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::from_env();
    nri_plugin_util::init_logging(args.verbose);
    tracing::info!(name = ?args.name, idx = ?args.idx, verbose = args.verbose, "starting plugin");

    let mut builder = Stub::builder(UlimitAdjuster);
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
