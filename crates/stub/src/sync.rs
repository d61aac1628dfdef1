//! Receiving Synchronize: the runtime's pods and containers, in one message
//! or, for a table above the message size limit, in several (each but the
//! last with `more` set).
//!
//! A message arrives as [`SyncMessage`]: its pods and containers still
//! encoded, one slice of the received frame each, so nothing is decoded
//! before the handler decides where. The last message (and a table in one
//! message) is decoded where it is handled. The earlier messages of a split
//! table are decoded on a thread of their own while the runtime prepares
//! and sends the next one: the stub answers them at once, so decoding a
//! large table overlaps with its encoding and transfer instead of adding to
//! them. Pods and containers keep the order in which they were sent.

use nri_api::{Container, PodSandbox};
use nri_ttrpc::Status;
use prost::bytes::{Buf, Bytes};
use prost::encoding::{DecodeContext, WireType};
use prost::Message;
use tokio::sync::oneshot;

/// A `SynchronizeRequest` with its pods (field 1) and containers (field 2)
/// left encoded. Decodes every valid `SynchronizeRequest`, unknown fields
/// skipped as the generated type skips them.
#[derive(Debug, Default)]
pub(crate) struct SyncMessage {
    pods: Vec<Bytes>,
    containers: Vec<Bytes>,
    pub(crate) more: bool,
}

impl Message for SyncMessage {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        for pod in &self.pods {
            prost::encoding::bytes::encode(1, pod, buf);
        }
        for ctr in &self.containers {
            prost::encoding::bytes::encode(2, ctr, buf);
        }
        if self.more {
            prost::encoding::bool::encode(3, &self.more, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        let list = match tag {
            1 => &mut self.pods,
            2 => &mut self.containers,
            3 => return prost::encoding::bool::merge(wire_type, &mut self.more, buf, ctx),
            _ => return prost::encoding::skip_field(wire_type, tag, buf, ctx),
        };
        // A slice of the received frame, not a copy, when `buf` is `Bytes`.
        let mut part = Bytes::new();
        prost::encoding::bytes::merge(wire_type, &mut part, buf, ctx)?;
        list.push(part);
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        prost::encoding::bytes::encoded_len_repeated(1, &self.pods)
            + prost::encoding::bytes::encoded_len_repeated(2, &self.containers)
            + if self.more {
                prost::encoding::bool::encoded_len(3, &self.more)
            } else {
                0
            }
    }

    fn clear(&mut self) {
        self.pods.clear();
        self.containers.clear();
        self.more = false;
    }
}

impl nri_api::Subject for SyncMessage {}

/// Pods and containers, decoded.
pub(crate) type Tables = (Vec<PodSandbox>, Vec<Container>);

/// Encoded pods and containers of one message.
type Parts = (Vec<Bytes>, Vec<Bytes>);

impl SyncMessage {
    fn into_parts(self) -> Parts {
        (self.pods, self.containers)
    }

    /// Decodes this message's pods and containers, appending them to `into`.
    pub(crate) fn decode_into(self, into: &mut Tables) -> Result<(), Status> {
        decode_parts(self.into_parts(), into).map_err(decode_status)
    }
}

fn decode_parts((pods, containers): Parts, into: &mut Tables) -> Result<(), prost::DecodeError> {
    into.0.reserve(pods.len());
    for pod in pods {
        into.0.push(PodSandbox::decode(pod)?);
    }
    into.1.reserve(containers.len());
    for ctr in containers {
        into.1.push(Container::decode(ctr)?);
    }
    Ok(())
}

/// The status for a message that does not decode, as the ttRPC server
/// answers any request that does not.
fn decode_status(err: prost::DecodeError) -> Status {
    Status::internal(format!("ttrpc: error unmarshalling payload: {err}"))
}

/// The messages of a split table received so far, and where they are
/// decoded.
pub(crate) enum Pending {
    /// Decoded here (no thread could be started).
    Decoded(Tables),
    /// Decoded by a thread of their own, which gets every further message
    /// but the last through `parts` and answers on `done` once `parts` is
    /// closed (or at the first message that does not decode).
    Decoding {
        parts: std::sync::mpsc::Sender<Parts>,
        done: oneshot::Receiver<Result<Tables, prost::DecodeError>>,
    },
}

impl Pending {
    /// Starts collecting a split table with its first message.
    pub(crate) fn start(first: SyncMessage) -> Result<Pending, Status> {
        let (parts, queue) = std::sync::mpsc::channel::<Parts>();
        let (answer, done) = oneshot::channel();
        let decoder = std::thread::Builder::new()
            .name("nri-stub-sync".into())
            .spawn(move || {
                let mut tables = Tables::default();
                let outcome = queue
                    .iter()
                    .try_for_each(|message| decode_parts(message, &mut tables))
                    .map(|()| tables);
                let _ = answer.send(outcome);
            });
        let mut pending = match decoder {
            Ok(_) => Pending::Decoding { parts, done },
            Err(err) => {
                tracing::debug!(
                    "no thread to decode a split synchronize on ({err}): decoding here"
                );
                Pending::Decoded(Tables::default())
            }
        };
        pending.add(first)?;
        Ok(pending)
    }

    /// Adds a message that is not the last.
    pub(crate) fn add(&mut self, message: SyncMessage) -> Result<(), Status> {
        match self {
            Pending::Decoded(tables) => message.decode_into(tables),
            // If the thread has stopped at a message that does not decode,
            // this one is dropped: the error is reported with the last.
            Pending::Decoding { parts, .. } => {
                let _ = parts.send(message.into_parts());
                Ok(())
            }
        }
    }

    /// Completes the table with its last message: every pod and container
    /// in the order sent, or the first decoding error.
    pub(crate) async fn finish(self, last: SyncMessage) -> Result<Tables, Status> {
        match self {
            Pending::Decoded(mut tables) => {
                last.decode_into(&mut tables)?;
                Ok(tables)
            }
            Pending::Decoding { parts, done } => {
                // The last message is decoded here while the thread
                // finishes the one before.
                let mut tail = Tables::default();
                let decoded = last.decode_into(&mut tail);
                drop(parts);
                let mut tables = done
                    .await
                    .map_err(|_| Status::internal("split synchronize: decoding thread lost"))?
                    .map_err(decode_status)?;
                decoded?;
                tables.0.append(&mut tail.0);
                tables.1.append(&mut tail.1);
                Ok(tables)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::SynchronizeRequest;

    fn request(pods: &[&str], ctrs: &[&str], more: bool) -> SynchronizeRequest {
        SynchronizeRequest {
            pods: pods
                .iter()
                .map(|id| PodSandbox {
                    id: (*id).into(),
                    ..Default::default()
                })
                .collect(),
            containers: ctrs
                .iter()
                .map(|id| Container {
                    id: (*id).into(),
                    ..Default::default()
                })
                .collect(),
            more,
        }
    }

    fn message(req: &SynchronizeRequest) -> SyncMessage {
        SyncMessage::decode(Bytes::from(req.encode_to_vec())).expect("decodes")
    }

    fn ids(tables: &Tables) -> (Vec<&str>, Vec<&str>) {
        (
            tables.0.iter().map(|p| p.id.as_str()).collect(),
            tables.1.iter().map(|c| c.id.as_str()).collect(),
        )
    }

    #[test]
    fn a_message_encodes_back_to_the_request_it_was_read_from() {
        let req = request(&["p1", "p2"], &["c1"], true);
        let msg = message(&req);
        assert!(msg.more);
        assert_eq!(msg.encode_to_vec(), req.encode_to_vec());
        assert_eq!(msg.encoded_len(), req.encoded_len());
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut bytes = request(&["p"], &["c"], false).encode_to_vec();
        // Field 9, varint 7.
        bytes.extend_from_slice(&[9 << 3, 7]);
        let mut tables = Tables::default();
        SyncMessage::decode(Bytes::from(bytes))
            .expect("decodes")
            .decode_into(&mut tables)
            .expect("parts decode");
        assert_eq!(ids(&tables), (vec!["p"], vec!["c"]));
    }

    #[tokio::test]
    async fn a_split_table_keeps_the_order_sent() {
        let mut pending = Pending::start(message(&request(&["p1", "p2"], &[], true))).unwrap();
        pending
            .add(message(&request(&["p3"], &["c1", "c2"], true)))
            .unwrap();
        let tables = pending
            .finish(message(&request(&[], &["c3"], false)))
            .await
            .unwrap();
        assert_eq!(
            ids(&tables),
            (vec!["p1", "p2", "p3"], vec!["c1", "c2", "c3"])
        );
    }

    #[tokio::test]
    async fn an_earlier_message_that_does_not_decode_fails_the_last() {
        // A pod whose field 1 (id) claims more bytes than it has.
        let mut broken = SyncMessage::default();
        broken.pods.push(Bytes::from_static(&[0x0a, 0x05, b'x']));
        broken.more = true;
        let mut pending = Pending::start(message(&request(&["p1"], &[], true))).unwrap();
        pending.add(broken).unwrap();
        pending.add(message(&request(&["p2"], &[], true))).unwrap();
        let err = pending
            .finish(message(&request(&[], &["c"], false)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), nri_ttrpc::Code::Internal);
        assert!(
            err.message()
                .starts_with("ttrpc: error unmarshalling payload:"),
            "{}",
            err.message()
        );
    }

    #[tokio::test]
    async fn a_last_message_that_does_not_decode_fails() {
        let mut broken = SyncMessage::default();
        broken.containers.push(Bytes::from_static(&[0x0a, 0x05]));
        let pending = Pending::start(message(&request(&["p1"], &[], true))).unwrap();
        let err = pending.finish(broken).await.unwrap_err();
        assert_eq!(err.code(), nri_ttrpc::Code::Internal);
    }
}
