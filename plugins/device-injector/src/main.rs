//! `nri-device-injector`: the device-injector NRI plugin.

use std::process::ExitCode;

use nri_plugin_device_injector::cli::{Args, INFO};
use nri_plugin_device_injector::DeviceInjector;
use nri_stub::Stub;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);
    args.common
        .serve(Stub::builder(DeviceInjector), &INFO)
        .await
}
