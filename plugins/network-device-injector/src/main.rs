//! `nri-network-device-injector`: moves host network devices into the network namespace
//! of pods annotated with `netdevice.noderesource.dev` (or the older
//! `netdevices.nri.containerd.io`), and gives them back when the pod stops.

mod cli;
mod netdevice;
mod netlink;
mod plugin;

use std::process::ExitCode;

use nri_stub::Stub;

use crate::cli::{Args, INFO};
use crate::plugin::NetDeviceInjector;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);
    tracing::info!(name = ?args.common.name, idx = ?args.common.idx, verbose = args.common.verbose, "starting plugin");
    args.common
        .serve(Stub::builder(NetDeviceInjector), &INFO)
        .await
}
