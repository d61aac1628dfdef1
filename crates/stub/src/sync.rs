//! Receiving Synchronize: the runtime's pods and containers, in one message
//! or, for a table above the message size limit, in several (each but the
//! last with `more` set).
//!
//! A message arrives as [`SyncMessage`]: a large one with its pods and
//! containers still encoded, one slice of the received frame each, so
//! nothing is decoded before the handler decides where. The last message
//! (and a table in one message) is decoded where it is handled. The earlier messages of a split
//! table are decoded on a thread of their own while the runtime prepares
//! and sends the next one: the stub answers them at once, so decoding a
//! large table overlaps with its encoding and transfer instead of adding to
//! them. Pods and containers keep the order in which they were sent.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use nri_api::{Container, PodSandbox, SynchronizeRequest};
use nri_ttrpc::Status;
use prost::bytes::{Buf, Bytes};
use prost::encoding::{DecodeContext, WireType};
use prost::Message;
use tokio::sync::oneshot;

/// Messages from this size on keep their pods and containers encoded until
/// the handler decides where to decode them; smaller ones are decoded as
/// they are read, by the generated request's own code.
const DEFER_FROM: usize = 64 * 1024;

/// A `SynchronizeRequest` as received: a small one decoded, a large one
/// with its pods (field 1) and containers (field 2) left encoded, each as
/// its field's length and body, a slice of the received frame. Reads every
/// valid `SynchronizeRequest`, unknown fields skipped as the generated type
/// skips them.
#[derive(Debug, Default)]
pub(crate) struct SyncMessage {
    body: Body,
    pub(crate) more: bool,
}

#[derive(Debug)]
enum Body {
    /// Decoded as read; `more` is not used.
    Decoded(SynchronizeRequest),
    /// Field number and length-prefixed body, in the order received.
    Encoded(Vec<(u32, Bytes)>),
}

impl Default for Body {
    fn default() -> Body {
        Body::Decoded(SynchronizeRequest::default())
    }
}

impl Message for SyncMessage {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        match &self.body {
            Body::Decoded(req) => {
                for pod in &req.pods {
                    prost::encoding::message::encode(1, pod, buf);
                }
                for ctr in &req.containers {
                    prost::encoding::message::encode(2, ctr, buf);
                }
            }
            Body::Encoded(fields) => {
                for (tag, raw) in fields {
                    prost::encoding::encode_key(*tag, WireType::LengthDelimited, buf);
                    buf.put_slice(raw);
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
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 | 2 => {}
            3 => return prost::encoding::bool::merge(wire_type, &mut self.more, buf, ctx),
            _ => return prost::encoding::skip_field(wire_type, tag, buf, ctx),
        }
        if let Body::Decoded(req) = &self.body {
            // Decided at the first pod or container.
            if req.pods.is_empty() && req.containers.is_empty() && buf.remaining() >= DEFER_FROM {
                self.body = Body::Encoded(Vec::new());
            }
        }
        let fields = match &mut self.body {
            Body::Decoded(req) => return req.merge_field(tag, wire_type, buf, ctx),
            Body::Encoded(fields) => fields,
        };
        prost::encoding::check_wire_type(WireType::LengthDelimited, wire_type)?;
        // The length and the body, as one slice of the received frame
        // when `buf` is `Bytes` (its first chunk is all of it).
        let mut peek = buf.chunk();
        let available = peek.len();
        let whole = prost::encoding::decode_varint(&mut peek)
            .ok()
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| (available - peek.len()).checked_add(len))
            .filter(|&whole| whole <= available);
        let raw = match whole {
            Some(whole) => buf.copy_to_bytes(whole),
            // Split across chunks or cut short: read it field by field
            // (the error, if any, is the one decoding the request gives).
            None => {
                let mut body = Bytes::new();
                prost::encoding::bytes::merge(wire_type, &mut body, buf, ctx)?;
                let mut raw = Vec::with_capacity(body.len() + 10);
                prost::encoding::encode_varint(body.len() as u64, &mut raw);
                raw.extend_from_slice(&body);
                Bytes::from(raw)
            }
        };
        fields.push((tag, raw));
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        let lists = match &self.body {
            Body::Decoded(req) => {
                prost::encoding::message::encoded_len_repeated(1, &req.pods)
                    + prost::encoding::message::encoded_len_repeated(2, &req.containers)
            }
            Body::Encoded(fields) => fields
                .iter()
                .map(|(tag, raw)| prost::encoding::key_len(*tag) + raw.len())
                .sum(),
        };
        lists
            + if self.more {
                prost::encoding::bool::encoded_len(3, &self.more)
            } else {
                0
            }
    }

    fn clear(&mut self) {
        self.body = Body::default();
        self.more = false;
    }
}

impl nri_api::Subject for SyncMessage {}

/// Pods and containers, decoded.
pub(crate) type Tables = (Vec<PodSandbox>, Vec<Container>);

impl SyncMessage {
    /// Decodes this message's pods and containers (if still encoded),
    /// appending them to `into`.
    ///
    /// `Site` (here and in [`Pending`]) is the plugin's type or any type of
    /// the plugin's crate: it only makes the decoding generic, so that it is
    /// compiled into the plugin's crate together with the decoding of every
    /// other request, which already holds the code for these messages,
    /// rather than a second copy of that code in this crate.
    pub(crate) fn decode_into<Site>(self, into: &mut Tables) -> Result<(), Status> {
        self.body.decode_into::<Site>(into).map_err(decode_status)
    }
}

impl Body {
    // `Site` only decides which crate this is compiled into (see
    // `SyncMessage::decode_into`).
    #[allow(clippy::extra_unused_type_parameters)]
    fn decode_into<Site>(self, into: &mut Tables) -> Result<(), prost::DecodeError> {
        let mut req = match self {
            Body::Decoded(req) => req,
            Body::Encoded(fields) => {
                // The generated request's own field decoding, fed as the
                // ttRPC server feeds a request it decodes.
                let mut req = SynchronizeRequest::default();
                for (tag, mut raw) in fields {
                    let mut buf = &mut raw;
                    req.merge_field(
                        tag,
                        WireType::LengthDelimited,
                        &mut buf,
                        DecodeContext::default(),
                    )?;
                }
                req
            }
        };
        if into.0.is_empty() && into.1.is_empty() {
            *into = (req.pods, req.containers);
        } else {
            into.0.append(&mut req.pods);
            into.1.append(&mut req.containers);
        }
        Ok(())
    }
}

/// The status for a message that does not decode, as the ttRPC server
/// answers any request that does not.
fn decode_status(err: prost::DecodeError) -> Status {
    Status::internal(format!("ttrpc: error unmarshalling payload: {err}"))
}

/// Messages waiting for the decoding thread.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<Queued>,
    ready: Condvar,
}

#[derive(Default)]
struct Queued {
    messages: VecDeque<Body>,
    /// No more messages will come.
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, message: Body) {
        self.lock().messages.push_back(message);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
    }

    /// The next message, or `None` once the queue is closed and empty.
    fn next(&self) -> Option<Body> {
        let mut queued = self.lock();
        loop {
            if let Some(message) = queued.messages.pop_front() {
                return Some(message);
            }
            if queued.closed {
                return None;
            }
            queued = self
                .ready
                .wait(queued)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Decodes every message until the queue is closed. After the first
    /// that does not decode, or once `wanted` says nobody waits for the
    /// result any more (the connection is gone), the rest are dropped
    /// unread.
    fn decode_all<Site>(&self, wanted: impl Fn() -> bool) -> Result<Tables, prost::DecodeError> {
        let mut tables = Tables::default();
        let mut outcome = Ok(());
        while let Some(message) = self.next() {
            if outcome.is_ok() && wanted() {
                if let Body::Encoded(fields) = &message {
                    let encoded: usize = fields.iter().map(|(_, raw)| raw.len()).sum();
                    reserve_heap(encoded.saturating_mul(2));
                }
                outcome = message.decode_into::<Site>(&mut tables);
            }
        }
        outcome.map(|()| tables)
    }
}

/// Opens room for about `bytes` of allocations in the calling thread's
/// heap, ahead of decoding a message of the table into it.
///
/// glibc gives each thread but the main one a heap of its own and opens it
/// to writing only as far as allocations reach, one `mprotect` call each
/// time they pass its end: decoding tens of megabytes of table into many
/// small strings there took about 7,000 of those calls for 10,000
/// containers, each of which also rewrites the process's memory map. Room
/// allocated in large blocks and freed at once is opened in a few hundred
/// calls, and glibc does not close it again (it hands freed pages back
/// with `MADV_DONTNEED`, keeping them open), so what is decoded next
/// allocates there without a system call. The blocks are below glibc's
/// smallest threshold for giving an allocation a mapping of its own
/// (128 KiB, so they come from the heap) and their contents are never
/// written: they take address space, not memory. With another C library
/// it does nothing; under another global allocator it only allocates and
/// frees the blocks.
fn reserve_heap(bytes: usize) {
    const BLOCK: usize = 120 * 1024;
    if cfg!(not(all(target_os = "linux", target_env = "gnu"))) {
        return;
    }
    let blocks: Vec<Vec<u8>> = (0..bytes / BLOCK)
        .map(|_| Vec::with_capacity(BLOCK))
        .collect();
    // Kept opaque so that the allocations are not optimized away.
    drop(std::hint::black_box(blocks));
}

/// The sending side of a [`Queue`]: closes it when dropped, so the thread
/// ends with the connection even when the last message never comes.
pub(crate) struct Feed(Arc<Queue>);

impl Drop for Feed {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The messages of a split table received so far, and where they are
/// decoded.
pub(crate) enum Pending {
    /// Decoded here (no thread could be started).
    Decoded(Tables),
    /// Decoded by a thread of their own, which gets every further message
    /// but the last through `feed` and answers on `done` once it is closed.
    Decoding {
        feed: Feed,
        done: oneshot::Receiver<Result<Tables, prost::DecodeError>>,
    },
}

impl Pending {
    /// Starts collecting a split table with its first message.
    pub(crate) fn start<Site>(first: SyncMessage) -> Result<Pending, Status> {
        let queue = Arc::new(Queue::default());
        let (answer, done) = oneshot::channel();
        let decoder = {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name("nri-stub-sync".into())
                .spawn(move || {
                    let outcome = queue.decode_all::<Site>(|| !answer.is_closed());
                    let _ = answer.send(outcome);
                })
        };
        let mut pending = match decoder {
            Ok(_) => Pending::Decoding {
                feed: Feed(queue),
                done,
            },
            Err(err) => {
                tracing::debug!(
                    "no thread to decode a split synchronize on ({err}): decoding here"
                );
                Pending::Decoded(Tables::default())
            }
        };
        pending.add::<Site>(first)?;
        Ok(pending)
    }

    /// Adds a message that is not the last.
    pub(crate) fn add<Site>(&mut self, message: SyncMessage) -> Result<(), Status> {
        match self {
            Pending::Decoded(tables) => message.decode_into::<Site>(tables),
            Pending::Decoding { feed, .. } => {
                feed.0.push(message.body);
                Ok(())
            }
        }
    }

    /// Completes the table with its last message: every pod and container
    /// in the order sent, or the first decoding error.
    pub(crate) async fn finish<Site>(self, last: SyncMessage) -> Result<Tables, Status> {
        match self {
            Pending::Decoded(mut tables) => {
                last.decode_into::<Site>(&mut tables)?;
                Ok(tables)
            }
            Pending::Decoding { feed, done } => {
                drop(feed);
                // The last message is decoded here while the thread
                // finishes the ones before.
                let mut tail = Tables::default();
                let decoded = last.decode_into::<Site>(&mut tail);
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

    /// A request of more than [`DEFER_FROM`] bytes: `count` pods with a
    /// 1 KiB annotation each, named `{prefix}{i}`.
    fn large(prefix: &str, count: usize, more: bool) -> SynchronizeRequest {
        SynchronizeRequest {
            pods: (0..count)
                .map(|i| PodSandbox {
                    id: format!("{prefix}{i}"),
                    annotations: [("a".to_string(), "x".repeat(1024))].into(),
                    ..Default::default()
                })
                .collect(),
            containers: Vec::new(),
            more,
        }
    }

    #[test]
    fn a_large_message_keeps_its_lists_encoded_until_decoded() {
        let req = large("p", 80, true);
        assert!(req.encoded_len() > DEFER_FROM);
        let msg = message(&req);
        assert!(matches!(&msg.body, Body::Encoded(fields) if fields.len() == 80));
        assert!(msg.more);
        assert_eq!(msg.encode_to_vec(), req.encode_to_vec());
        assert_eq!(msg.encoded_len(), req.encoded_len());
        let mut tables = Tables::default();
        msg.decode_into::<()>(&mut tables).unwrap();
        assert_eq!(tables.0, req.pods);
    }

    #[test]
    fn a_small_message_is_decoded_as_read() {
        let msg = message(&request(&["p"], &["c"], false));
        assert!(matches!(&msg.body, Body::Decoded(req) if req.pods.len() == 1));
    }

    #[tokio::test]
    async fn large_and_small_messages_keep_the_order_sent() {
        let mut pending = Pending::start::<()>(message(&large("a", 70, true))).unwrap();
        pending
            .add::<()>(message(&request(&["b"], &["c1"], true)))
            .unwrap();
        pending.add::<()>(message(&large("d", 70, true))).unwrap();
        let mut last = large("e", 70, false);
        last.containers = vec![Container {
            id: "c2".into(),
            ..Default::default()
        }];
        let tables = pending.finish::<()>(message(&last)).await.unwrap();
        let expected: Vec<String> = (0..70)
            .map(|i| format!("a{i}"))
            .chain(["b".to_string()])
            .chain((0..70).map(|i| format!("d{i}")))
            .chain((0..70).map(|i| format!("e{i}")))
            .collect();
        let (pods, ctrs) = ids(&tables);
        assert_eq!(pods, expected);
        assert_eq!(ctrs, vec!["c1", "c2"]);
    }

    #[test]
    fn nothing_more_is_decoded_once_nobody_waits() {
        let queue = Queue::default();
        queue.push(message(&large("a", 70, true)).body);
        queue.push(message(&large("b", 70, true)).body);
        queue.close();
        let tables = queue.decode_all::<()>(|| false).unwrap();
        assert!(tables.0.is_empty() && tables.1.is_empty());
        assert!(queue.next().is_none());
    }

    #[tokio::test]
    async fn a_dropped_collection_ends_its_thread() {
        let pending = Pending::start::<()>(message(&large("a", 70, true))).unwrap();
        let Pending::Decoding { feed, done } = pending else {
            panic!("no decoding thread");
        };
        let queue = Arc::clone(&feed.0);
        drop(done);
        drop(feed);
        // The thread holds the other reference until it ends.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&queue) > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the thread did not end"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut bytes = request(&["p"], &["c"], false).encode_to_vec();
        // Field 9, varint 7.
        bytes.extend_from_slice(&[9 << 3, 7]);
        let mut tables = Tables::default();
        SyncMessage::decode(Bytes::from(bytes))
            .expect("decodes")
            .decode_into::<()>(&mut tables)
            .expect("parts decode");
        assert_eq!(ids(&tables), (vec!["p"], vec!["c"]));
    }

    #[tokio::test]
    async fn a_split_table_keeps_the_order_sent() {
        let mut pending =
            Pending::start::<()>(message(&request(&["p1", "p2"], &[], true))).unwrap();
        pending
            .add::<()>(message(&request(&["p3"], &["c1", "c2"], true)))
            .unwrap();
        let tables = pending
            .finish::<()>(message(&request(&[], &["c3"], false)))
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
        let broken = SyncMessage {
            body: Body::Encoded(vec![(1, Bytes::from_static(&[3, 0x0a, 0x05, b'x']))]),
            more: true,
        };
        let mut pending = Pending::start::<()>(message(&request(&["p1"], &[], true))).unwrap();
        pending.add::<()>(broken).unwrap();
        pending
            .add::<()>(message(&request(&["p2"], &[], true)))
            .unwrap();
        let err = pending
            .finish::<()>(message(&request(&[], &["c"], false)))
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
        let broken = SyncMessage {
            body: Body::Encoded(vec![(2, Bytes::from_static(&[2, 0x0a, 0x05]))]),
            more: false,
        };
        let pending = Pending::start::<()>(message(&request(&["p1"], &[], true))).unwrap();
        let err = pending.finish::<()>(broken).await.unwrap_err();
        assert_eq!(err.code(), nri_ttrpc::Code::Internal);
    }
}
