//! `nri-policy`: a policy validator as a standalone validating NRI plugin.
//!
//! It subscribes to ValidateContainerAdjustment only and refuses the merged
//! adjustments its policy file forbids (see docs/policy.md), logging and
//! counting every decision and appending it to the audit trail.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use nri_policy::{Policy, PolicyValidator};
use nri_stub::Stub;

use nri_plugin_policy::cli::{Args, INFO};
use nri_plugin_policy::plugin::PolicyPlugin;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

    let policy_file = args.policy_file();
    let validator = match policy_file.as_deref() {
        None => PolicyValidator::new(Policy::empty("(no policy file)")),
        Some(path) => match PolicyValidator::load(std::path::Path::new(path)) {
            Ok(v) => v,
            Err(err) => {
                tracing::error!("{err}");
                return ExitCode::FAILURE;
            }
        },
    };
    let validator = Arc::new(validator);
    let policy = validator.policy();
    tracing::info!(
        source = %policy.source,
        mode = policy.mode.as_str(),
        rules = policy.rules.len(),
        "starting policy validator"
    );

    if let Some(path) = policy_file.as_deref() {
        let interval =
            (args.reload_interval > 0).then(|| Duration::from_millis(args.reload_interval));
        tokio::spawn(nri_plugin_policy::reload::watch(
            validator.clone(),
            PathBuf::from(path),
            interval,
        ));
    }
    if let Some(addr) = args.metrics_addr.as_deref() {
        let Some(addr) = nri_plugin_policy::http::parse_addr(addr) else {
            tracing::error!("bad -metrics-addr {addr:?}: use PORT, :PORT or IP:PORT");
            return ExitCode::FAILURE;
        };
        match nri_plugin_policy::http::bind(addr).await {
            Ok(listener) => {
                if let Ok(a) = listener.local_addr() {
                    tracing::info!("metrics on http://{a}/metrics");
                }
                tokio::spawn(nri_plugin_policy::http::serve(listener, validator.clone()));
            }
            Err(e) => {
                tracing::error!("cannot listen on {addr} for metrics: {e}");
                return ExitCode::FAILURE;
            }
        }
    }

    args.common
        .serve(Stub::builder(PolicyPlugin::new(validator)), &INFO)
        .await
}
