//! `nri-default-validator`: NRI's default validator as a standalone validating plugin.
//!
//! It subscribes to ValidateContainerAdjustment only, and rejects the merged
//! adjustments that its configuration (the YAML keys of the Go default validator)
//! forbids: OCI hook injection, seccomp policy changes, namespace and sysctl changes,
//! missing required plugins.

mod cli;
mod config;
mod plugin;

use std::path::Path;
use std::process::ExitCode;

use nri_stub::api::plugin::{parse_plugin_name, PLUGIN_IDX_ENV, PLUGIN_NAME_ENV};
use nri_stub::Stub;
use nri_validator::{DEFAULT_VALIDATOR_INDEX, DEFAULT_VALIDATOR_NAME};
use tracing_subscriber::EnvFilter;

use crate::cli::Args;
use crate::config::ValidatorSettings;
use crate::plugin::Validator;

fn init_logging(verbose: bool) {
    let default = if verbose { "debug" } else { "info" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// True when the runtime or the program name (`NN-name`) tells who the plugin is.
fn identity_given_elsewhere(env_var: &str) -> bool {
    if std::env::var_os(env_var).is_some() {
        return true;
    }
    std::env::args_os()
        .next()
        .and_then(|p| {
            Path::new(&p)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .is_some_and(|prog| parse_plugin_name(&prog).is_ok())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::from_env();
    init_logging(args.verbose);

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

    let name = args.name.or_else(|| {
        (!identity_given_elsewhere(PLUGIN_NAME_ENV)).then(|| DEFAULT_VALIDATOR_NAME.to_string())
    });
    let idx = args.idx.or_else(|| {
        (!identity_given_elsewhere(PLUGIN_IDX_ENV)).then(|| DEFAULT_VALIDATOR_INDEX.to_string())
    });
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
