//! `nri-ulimit-adjuster`: sets the rlimits (ulimits) of containers from pod annotations
//! `ulimits.noderesource.dev/container.<name>` (or the older
//! `ulimits.nri.containerd.io/container.<name>`).

use std::process::ExitCode;

use nri_stub::Stub;

use nri_plugin_ulimit_adjuster::cli::{Args, INFO};
use nri_plugin_ulimit_adjuster::plugin::UlimitAdjuster;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);
    tracing::info!(name = ?args.common.name, idx = ?args.common.idx, verbose = args.common.verbose, "starting plugin");
    args.common
        .serve(Stub::builder(UlimitAdjuster), &INFO)
        .await
}
