//! `nri-v010-adapter`: runs NRI v0.1 plugins from an NRI plugin.

use std::process::ExitCode;
use std::time::Duration;

use nri_plugin_v010_adapter::cli::{Args, INFO};
use nri_plugin_v010_adapter::invoke::Invoker;
use nri_plugin_v010_adapter::V010Adapter;
use nri_stub::Stub;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

    let invoker = Invoker {
        conf_path: args.conf,
        bin_dir: args.bin_dir,
        search_path: std::env::var_os("PATH"),
        timeout: args.invoke_timeout.unwrap_or(Duration::from_secs(2)),
    };
    let adapter = V010Adapter::new(invoker, args.invoke_timeout.is_none());
    tracing::info!("runtime connection: running v0.1 plugins");
    args.common.serve(Stub::builder(adapter), &INFO).await
}
