//! `nri-default-validator`: NRI's default validator as a standalone validating plugin.
//!
//! It subscribes to ValidateContainerAdjustment only, and rejects the merged
//! adjustments that its configuration (the YAML keys of the Go default validator)
//! forbids: OCI hook injection, seccomp policy changes, namespace and sysctl changes,
//! missing required plugins.

use std::path::Path;
use std::process::ExitCode;

use nri_stub::Stub;
use nri_validator::{DEFAULT_VALIDATOR_INDEX, DEFAULT_VALIDATOR_NAME};

use nri_plugin_default_validator::cli::Args;
use nri_plugin_default_validator::config::ValidatorSettings;
use nri_plugin_default_validator::plugin::Validator;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::from_env();
    nri_plugin_util::init_logging(args.verbose);

    let settings = match args.config.as_deref() {
        None => ValidatorSettings::default(),
        Some(path) => match ValidatorSettings::from_file(Path::new(path)) {
            Ok(s) => s,
            Err(err) => {
                tracing::error!("{err}");
                return ExitCode::FAILURE;
            }
        },
    };
    tracing::info!(config = ?settings.config, enabled = settings.enabled, "starting validator");

    let name = nri_plugin_util::plugin_name(args.name, DEFAULT_VALIDATOR_NAME);
    let idx = nri_plugin_util::plugin_index(args.idx, DEFAULT_VALIDATOR_INDEX);
    let mut builder = Stub::builder(Validator::new(settings));
    if let Some(name) = name {
        builder = builder.name(name);
    }
    if let Some(idx) = idx {
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
