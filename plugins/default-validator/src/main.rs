//! `nri-default-validator`: NRI's default validator as a standalone validating plugin.
//!
//! It subscribes to ValidateContainerAdjustment only, and rejects the merged
//! adjustments that its configuration (the YAML keys of the Go default validator)
//! forbids: OCI hook injection, seccomp policy changes, namespace and sysctl changes,
//! missing required plugins.

use std::process::ExitCode;

use nri_stub::Stub;

use nri_plugin_default_validator::cli::{Args, INFO};
use nri_plugin_default_validator::config::ValidatorSettings;
use nri_plugin_default_validator::plugin::Validator;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

    let settings = match args.common.config.as_deref() {
        None => ValidatorSettings::default(),
        Some(path) => match ValidatorSettings::from_file(path) {
            Ok(s) => s,
            Err(err) => {
                tracing::error!("{err}");
                return ExitCode::FAILURE;
            }
        },
    };
    tracing::info!(config = ?settings.config, enabled = settings.enabled, "starting validator");

    args.common
        .serve(Stub::builder(Validator::new(settings)), &INFO)
        .await
}
