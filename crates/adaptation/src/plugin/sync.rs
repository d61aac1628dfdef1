//! Synchronize: the plugin's first view of the runtime's pods and
//! containers, split into several messages when one would exceed the ttRPC
//! message limit.

use nri_api::plugin::MAX_SYNC_SPLIT_MIN;
use nri_api::service::plugin as method;
use nri_api::{Container, ContainerUpdate, PodSandbox, SynchronizeRequest, SynchronizeResponse};
use nri_ttrpc::{Code, MAX_MESSAGE_LEN};
use prost::Message;
use tokio::time::Instant;

use super::{Backend, Plugin};
use crate::adaptation_error::{Error, PluginError};

/// Room kept in every message for the ttRPC request envelope (service and
/// method names, timeout, payload length) around the Synchronize request.
const ENVELOPE_RESERVE: usize = 1024;

/// Encoded size of one repeated message field entry: tag, length, body.
fn entry_len(body: usize) -> usize {
    1 + prost::length_delimiter_len(body) + body
}

/// Plans the next chunk: how many of the remaining pods and containers fit
/// in `budget` bytes. Pods go first; containers follow once every pod is
/// sent. `None` if not even one object fits.
fn plan(pods: &[usize], ctrs: &[usize], budget: usize) -> Option<(usize, usize)> {
    // The `more` flag takes two bytes.
    let mut used = 2;
    let mut np = 0;
    for len in pods {
        let l = entry_len(*len);
        if used + l > budget {
            break;
        }
        used += l;
        np += 1;
    }
    let mut nc = 0;
    if np == pods.len() {
        for len in ctrs {
            let l = entry_len(*len);
            if used + l > budget {
                break;
            }
            used += l;
            nc += 1;
        }
    }
    if np + nc == 0 && !(pods.is_empty() && ctrs.is_empty()) {
        return None;
    }
    Some((np, nc))
}

impl Plugin {
    /// Synchronizes the plugin with `pods` and `containers` and returns the
    /// updates it requests. One request-timeout deadline covers all
    /// messages. On failure the plugin is closed.
    pub(crate) async fn synchronize(
        &self,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> Result<Vec<ContainerUpdate>, Error> {
        tracing::info!(plugin = %self.name, pods = pods.len(), containers = containers.len(),
            "synchronizing plugin");
        let start = Instant::now();
        let mut messages = 0usize;
        let result = match &self.backend {
            Backend::Builtin(b) => {
                let req = SynchronizeRequest {
                    pods: pods.to_vec(),
                    containers: containers.to_vec(),
                    more: false,
                };
                let timeout = self.request_timeout();
                messages = 1;
                self.measured(method::SYNCHRONIZE, async {
                    match tokio::time::timeout(timeout, b.synchronize(&req)).await {
                        Ok(Ok(r)) => Ok(r),
                        Ok(Err(e)) => Err(PluginError::Builtin(e)),
                        Err(_) => Err(PluginError::Timeout),
                    }
                })
                .await
                .map(|r| {
                    self.record_adjustments(method::SYNCHRONIZE, None, &r.update, 0);
                    r.update
                })
                .map_err(Error::Synchronize)
            }
            Backend::Remote(_) => {
                crate::trace::plugin_call(
                    &self.name,
                    method::SYNCHRONIZE,
                    &crate::trace::NoSubject,
                    None,
                    self.synchronize_split(pods, containers, &mut messages),
                    |result| match result {
                        Ok(_) => "ok",
                        Err(Error::Synchronize(e)) => crate::trace::error_outcome(e),
                        Err(_) => "error",
                    },
                )
                .await
            }
            // As the reference: one message, whatever its size.
            #[cfg(feature = "wasm")]
            Backend::Wasm(w) => {
                let req = SynchronizeRequest {
                    pods: pods.to_vec(),
                    containers: containers.to_vec(),
                    more: false,
                };
                let timeout = self.request_timeout();
                messages = 1;
                self.measured(
                    method::SYNCHRONIZE,
                    w.call::<_, SynchronizeResponse>(
                        nri_wasm::WasmEvent::Synchronize,
                        &req,
                        timeout,
                    ),
                )
                .await
                .map(|r| {
                    self.record_adjustments(method::SYNCHRONIZE, None, &r.update, 0);
                    r.update
                })
                .map_err(Error::Synchronize)
            }
        };
        self.settings
            .metrics
            .record_plugin_synchronize(&crate::metrics::SyncStats {
                plugin: &self.name,
                pods: pods.len(),
                containers: containers.len(),
                messages,
                duration: start.elapsed(),
                ok: result.is_ok(),
            });
        if result.is_err() {
            self.close();
        }
        result
    }

    async fn synchronize_split(
        &self,
        pods: &[PodSandbox],
        containers: &[Container],
        messages: &mut usize,
    ) -> Result<Vec<ContainerUpdate>, Error> {
        let Backend::Remote(remote) = &self.backend else {
            return Err(Error::SplitSyncFailed);
        };
        let deadline = Instant::now() + self.request_timeout();
        let pod_lens: Vec<usize> = pods.iter().map(Message::encoded_len).collect();
        let ctr_lens: Vec<usize> = containers.iter().map(Message::encoded_len).collect();
        let mut budget = MAX_MESSAGE_LEN.saturating_sub(ENVELOPE_RESERVE);
        let (mut pi, mut ci) = (0usize, 0usize);

        loop {
            let rest_pods = pod_lens.get(pi..).unwrap_or_default();
            let rest_ctrs = ctr_lens.get(ci..).unwrap_or_default();
            let (np, nc) = plan(rest_pods, rest_ctrs, budget).ok_or(Error::SplitSyncFailed)?;
            let more = np < rest_pods.len() || nc < rest_ctrs.len();
            let req = SynchronizeRequest {
                pods: pods.get(pi..pi + np).unwrap_or_default().to_vec(),
                containers: containers.get(ci..ci + nc).unwrap_or_default().to_vec(),
                more,
            };
            tracing::debug!(plugin = %self.name, pods = np, containers = nc, more,
                "sending sync message");
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(Error::Synchronize(PluginError::Rpc(
                    nri_ttrpc::Error::Timeout,
                )));
            }
            *messages += 1;
            let reply = self
                .measured(method::SYNCHRONIZE, async {
                    remote
                        .call::<_, SynchronizeResponse>(method::SYNCHRONIZE, &req, remaining)
                        .await
                        .map_err(PluginError::from)
                })
                .await;
            match reply {
                Ok(reply) => {
                    self.record_adjustments(method::SYNCHRONIZE, None, &reply.update, 0);
                    if !more {
                        return Ok(reply.update);
                    }
                    if !reply.update.is_empty() || !reply.more {
                        return Err(Error::SplitSyncUnsupported);
                    }
                    pi += np;
                    ci += nc;
                }
                Err(PluginError::Rpc(e)) if e.code() == Code::ResourceExhausted => {
                    // Sized in advance, so only a peer with a smaller limit
                    // gets here: retry with smaller messages.
                    if np + nc <= MAX_SYNC_SPLIT_MIN {
                        return Err(Error::SplitSyncFailed);
                    }
                    let factor = match e {
                        nri_ttrpc::Error::Oversized { len, max } if len > max && max > 0 => {
                            (max as f64 / len as f64).min(0.9)
                        }
                        _ => 0.5,
                    };
                    let sent = req.encoded_len();
                    budget = ((sent as f64) * factor) as usize;
                    tracing::debug!(plugin = %self.name, budget, "oversized sync message, retrying in smaller chunks");
                }
                Err(e) => return Err(Error::Synchronize(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_fits_everything_when_small() {
        assert_eq!(plan(&[10, 10], &[20], 1000), Some((2, 1)));
        assert_eq!(plan(&[], &[], 1000), Some((0, 0)));
    }

    #[test]
    fn plan_splits_pods_first() {
        // Each entry of 10 bytes costs 12; budget 2 + 3 * 12 = 38.
        assert_eq!(plan(&[10, 10, 10, 10], &[10], 38), Some((3, 0)));
        assert_eq!(plan(&[10], &[10, 10, 10], 38), Some((1, 2)));
    }

    #[test]
    fn plan_refuses_an_object_that_never_fits() {
        assert_eq!(plan(&[100], &[], 50), None);
        assert_eq!(plan(&[], &[100], 50), None);
    }
}
