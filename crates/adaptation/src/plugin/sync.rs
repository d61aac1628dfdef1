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

/// One message of a split Synchronize, borrowing the runtime's pods and
/// containers: encoded exactly as the `SynchronizeRequest` holding copies of
/// them would be, without copying a table of possibly many megabytes.
/// Encode-only: decoding skips every field.
///
/// With `lens`, the encoded length of every pod and container, measured
/// once for planning the split, is taken from there: the generic encoding
/// would measure each object again for the message's length and once more
/// for its own length prefix, and measuring walks every map and string.
struct SyncChunk<'a> {
    pods: &'a [PodSandbox],
    containers: &'a [Container],
    /// Encoded lengths of `pods` and of `containers`, in order, when known.
    lens: Option<(&'a [usize], &'a [usize])>,
    more: bool,
}

impl<'a> SyncChunk<'a> {
    /// The measured lengths of the pods and of the containers, if there is
    /// one for each.
    fn measured(&self) -> Option<(&'a [usize], &'a [usize])> {
        self.lens.filter(|(pods, ctrs)| {
            pods.len() == self.pods.len() && ctrs.len() == self.containers.len()
        })
    }

    /// A chunk that measures its objects as it encodes them.
    #[cfg(any(test, feature = "wasm"))]
    fn new(pods: &'a [PodSandbox], containers: &'a [Container], more: bool) -> SyncChunk<'a> {
        SyncChunk {
            pods,
            containers,
            lens: None,
            more,
        }
    }
}

/// Encodes `msg` as field `tag` whose body is `len` bytes long, as
/// `prost::encoding::message::encode` does, without measuring it again.
fn encode_measured(tag: u32, msg: &impl Message, len: usize, buf: &mut impl prost::bytes::BufMut) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(len as u64, buf);
    msg.encode_raw(buf);
}

impl prost::Message for SyncChunk<'_> {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        match self.measured() {
            Some((pod_lens, ctr_lens)) => {
                for (pod, len) in self.pods.iter().zip(pod_lens) {
                    encode_measured(1, pod, *len, buf);
                }
                for (ctr, len) in self.containers.iter().zip(ctr_lens) {
                    encode_measured(2, ctr, *len, buf);
                }
            }
            None => {
                for pod in self.pods {
                    prost::encoding::message::encode(1, pod, buf);
                }
                for ctr in self.containers {
                    prost::encoding::message::encode(2, ctr, buf);
                }
            }
        }
        if self.more {
            prost::encoding::bool::encode(3, &self.more, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let lists = match self.measured() {
            Some((pod_lens, ctr_lens)) => pod_lens
                .iter()
                .chain(ctr_lens)
                .map(|len| entry_len(*len))
                .sum(),
            None => {
                prost::encoding::message::encoded_len_repeated(1, self.pods)
                    + prost::encoding::message::encoded_len_repeated(2, self.containers)
            }
        };
        lists
            + if self.more {
                prost::encoding::bool::encoded_len(3, &self.more)
            } else {
                0
            }
    }

    fn clear(&mut self) {
        self.pods = &[];
        self.containers = &[];
        self.lens = None;
        self.more = false;
    }
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
                self.measured(method::SYNCHRONIZE, || async {
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
                    || self.synchronize_split(pods, containers, &mut messages),
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
                let req = SyncChunk::new(pods, containers, false);
                let timeout = self.request_timeout();
                messages = 1;
                self.measured(method::SYNCHRONIZE, || {
                    Box::pin(w.call::<_, SynchronizeResponse>(
                        nri_wasm::WasmEvent::Synchronize,
                        &req,
                        timeout,
                    ))
                })
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
            let req = SyncChunk {
                pods: pods.get(pi..pi + np).unwrap_or_default(),
                containers: containers.get(ci..ci + nc).unwrap_or_default(),
                lens: Some((
                    pod_lens.get(pi..pi + np).unwrap_or_default(),
                    ctr_lens.get(ci..ci + nc).unwrap_or_default(),
                )),
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
                .measured(method::SYNCHRONIZE, || async {
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

    /// A borrowed chunk encodes byte for byte as the request owning copies.
    #[test]
    fn chunk_encodes_as_the_request() {
        let pods: Vec<PodSandbox> = (0..3)
            .map(|i| PodSandbox {
                id: format!("pod{i}"),
                name: format!("name{i}"),
                ..Default::default()
            })
            .collect();
        let ctrs: Vec<Container> = (0..5)
            .map(|i| Container {
                id: format!("ctr{i}"),
                pod_sandbox_id: format!("pod{}", i % 3),
                annotations: [("k".to_string(), "v".repeat(i))].into(),
                ..Default::default()
            })
            .collect();
        for (np, nc, more) in [(3, 5, false), (2, 0, true), (0, 4, true), (0, 0, false)] {
            let owned = SynchronizeRequest {
                pods: pods[..np].to_vec(),
                containers: ctrs[..nc].to_vec(),
                more,
            };
            let pod_lens: Vec<usize> = pods[..np].iter().map(Message::encoded_len).collect();
            let ctr_lens: Vec<usize> = ctrs[..nc].iter().map(Message::encoded_len).collect();
            let measured = SyncChunk {
                lens: Some((&pod_lens, &ctr_lens)),
                ..SyncChunk::new(&pods[..np], &ctrs[..nc], more)
            };
            for chunk in [SyncChunk::new(&pods[..np], &ctrs[..nc], more), measured] {
                let encoded = chunk.encode_to_vec();
                assert_eq!(encoded, owned.encode_to_vec(), "{np} {nc} {more}");
                assert_eq!(chunk.encoded_len(), encoded.len());
                assert_eq!(
                    SynchronizeRequest::decode(&encoded[..]).ok().as_ref(),
                    Some(&owned)
                );
            }
        }
    }

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
