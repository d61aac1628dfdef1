//! Validation of a new container's merged adjustment by every validator
//! plugin, concurrently; the first rejection in plugin order wins.

use std::sync::Arc;

use nri_api::ValidateContainerAdjustmentRequest;

use crate::adaptation_error::{Error, PluginError};
use crate::plugin::Plugin;
use crate::trace::RequestTrace;

/// Runs all `validators` (in plugin order) on `req` at once and waits for
/// all. Fatal call errors close the validator, and a failed call fails the
/// validation, unless the validator's [`TimeoutPolicy`](crate::TimeoutPolicy)
/// says otherwise for a timeout. Returns the error of the first failing
/// validator in plugin order (decision [16]).
pub(crate) async fn validate(
    validators: Vec<Arc<Plugin>>,
    req: Arc<ValidateContainerAdjustmentRequest>,
    trace: &RequestTrace,
) -> Result<(), Error> {
    // Each validator runs as a task of its own, so that in-process
    // (WebAssembly) validators can use other worker threads. Spawning also
    // lets tasks that are ready run first (such as the synchronization of
    // a replaced WebAssembly instance, decision [22]).
    let tasks: Vec<_> = validators
        .into_iter()
        .map(|p| {
            let req = req.clone();
            let trace = trace.clone();
            let task = tokio::spawn({
                let p = p.clone();
                async move { p.call_event(&*req, Some(&trace)).await }
            });
            (p, task)
        })
        .collect();

    let mut first = None;
    for (p, task) in tasks {
        let outcome = match task.await {
            Ok(r) => r,
            Err(e) => Err(PluginError::Builtin(Box::new(e))),
        };
        let error = match outcome {
            Ok(None) => None,
            Ok(Some(reply)) if reply.reject => Some(Error::ValidationRejected {
                plugin: p.name.clone(),
                reason: if reply.reason.is_empty() {
                    "unknown rejection reason".to_string()
                } else {
                    reply.reason
                },
            }),
            Ok(Some(_)) => None,
            Err(e) => {
                let outcome = if e.is_fatal() {
                    p.on_validator_fatal(&e)
                } else {
                    crate::policy::Outcome {
                        drop_plugin: false,
                        fail_call: true,
                    }
                };
                if outcome.drop_plugin {
                    tracing::error!(plugin = %p.name, error = %e,
                        "closing plugin, failed to handle ValidateContainerAdjustment request");
                    p.close();
                }
                if outcome.fail_call {
                    Some(Error::ValidatorFailed {
                        plugin: p.name.clone(),
                        source: e,
                    })
                } else {
                    tracing::warn!(plugin = %p.name, error = %e,
                        "validator failed to handle ValidateContainerAdjustment request; \
                         skipping its verdict");
                    None
                }
            }
        };
        if let Some(e) = error {
            tracing::debug!(plugin = %p.name, error = %e, "validation failed");
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}
