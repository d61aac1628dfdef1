//! `nri-network-logger`: logs the network namespace and IP addresses of pods
//! as they start, stop and are removed.

use std::process::ExitCode;

use nri_stub::Stub;

use nri_plugin_network_logger::cli::{Args, INFO};
use nri_plugin_network_logger::plugin::NetworkLogger;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);
    let builder =
        Stub::builder(NetworkLogger).on_close(|| tracing::info!("connection to the runtime lost"));
    args.common.serve(builder, &INFO).await
}
