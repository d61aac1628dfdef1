//! `nri-rdt`: the RDT NRI plugin.

use std::process::ExitCode;

use nri_plugin_rdt::cli::{Args, INFO};
use nri_plugin_rdt::Rdt;
use nri_stub::Stub;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);
    tracing::info!(verbose = args.common.verbose, "starting plugin");
    args.common.serve(Stub::builder(Rdt), &INFO).await
}
