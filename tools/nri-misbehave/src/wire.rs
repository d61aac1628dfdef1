//! The plugin itself: NRI spoken by hand over a raw socket, so every byte
//! can be broken on purpose.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nri_api::service::{plugin as method, runtime as runtime_method, RUNTIME_SERVICE};
use nri_api::{
    ConfigureResponse, ContainerAdjustment, ContainerUpdate, CreateContainerResponse, EventMask,
    RegisterPluginRequest, SynchronizeRequest, SynchronizeResponse, UpdateContainersRequest,
};
use nri_mux::{MAX_FRAME_PAYLOAD, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_ttrpc::frame::{FrameHeader, MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{Notify, Semaphore};

use crate::fault::{Fault, FaultKind, Trigger};

/// Size of a multiplexer frame header.
const MUX_HEADER: usize = nri_mux::HEADER_LEN;
/// Size of a ttRPC message header.
const TTRPC_HEADER: usize = nri_ttrpc::frame::HEADER_LEN;
/// Largest first frame of a write, as Go peers expect.
const FIRST_FRAME: usize = nri_mux::GO_READ_BUFFER;
/// Stream id of the RegisterPlugin call.
const REGISTER_STREAM: u32 = 1;
/// Bytes written by [`FaultKind::Garbage`].
const GARBAGE_LEN: usize = 256;
/// Frame length announced by [`FaultKind::TruncatedFrame`].
const TRUNCATED_ANNOUNCED: u32 = 4096;
/// Bytes actually written of it.
const TRUNCATED_WRITTEN: usize = 16;

/// Where the plugin's connection comes from.
#[derive(Debug)]
pub enum Target {
    /// Connect to the runtime's socket (an external plugin).
    Socket(PathBuf),
    /// An already connected stream, e.g. the socket handed over in
    /// `NRI_PLUGIN_SOCKET` to a pre-launched plugin.
    Stream(UnixStream),
}

/// A failure of the misbehaving plugin itself (not the faults it injects).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime's socket could not be reached.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Reading from or writing to the runtime failed.
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    /// The runtime sent something this plugin cannot parse.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The runtime refused the registration.
    #[error("registration refused: {0}")]
    Refused(String),
    /// [`FaultKind::DuplicateIdentity`] needs a socket to connect to twice.
    #[error("the {0} fault needs a socket path, not a single connection")]
    NeedsSocket(FaultKind),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The runtime closed the connection.
    Disconnected,
    /// The [`FaultKind::Exit`] fault fired: the connection was dropped in
    /// the middle of a call (the binary exits).
    Exited,
    /// The [`FaultKind::CloseDuringSync`] fault fired.
    ClosedDuringSync,
}

/// What the plugin observed and did, shared with whoever watches it.
///
/// Each change wakes [`Probe::wait_for`].
#[derive(Debug, Clone, Default)]
pub struct Probe(Arc<ProbeInner>);

#[derive(Debug, Default)]
struct ProbeInner {
    connections: AtomicUsize,
    requests: Mutex<Vec<String>>,
    registered: AtomicUsize,
    fired: AtomicBool,
    updates_sent: AtomicU64,
    updates_answered: AtomicU64,
    changed: Notify,
}

impl Probe {
    /// Methods of the requests received, in order. Requests on the second
    /// connection of [`FaultKind::DuplicateIdentity`] end in `@1`.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.0.requests).clone()
    }

    /// Number of connections made to the runtime.
    pub fn connections(&self) -> usize {
        self.0.connections.load(Ordering::SeqCst)
    }

    /// Number of accepted registrations.
    pub fn registered(&self) -> usize {
        self.0.registered.load(Ordering::SeqCst)
    }

    /// Whether the fault fired.
    pub fn fired(&self) -> bool {
        self.0.fired.load(Ordering::SeqCst)
    }

    /// UpdateContainers requests sent.
    pub fn updates_sent(&self) -> u64 {
        self.0.updates_sent.load(Ordering::SeqCst)
    }

    /// UpdateContainers requests answered by the runtime.
    pub fn updates_answered(&self) -> u64 {
        self.0.updates_answered.load(Ordering::SeqCst)
    }

    /// Waits until `cond` holds (checked after every change).
    pub async fn wait_for(&self, cond: impl Fn(&Probe) -> bool) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if cond(self) {
                return;
            }
            changed.await;
        }
    }

    fn changed(&self) {
        self.0.changed.notify_waiters();
    }

    fn request(&self, conn_no: usize, method: &str) {
        let entry = if conn_no == 0 {
            method.to_string()
        } else {
            format!("{method}@{conn_no}")
        };
        lock(&self.0.requests).push(entry);
        self.changed();
    }

    fn fire(&self) {
        self.0.fired.store(true, Ordering::SeqCst);
        self.changed();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A misbehaving plugin: a [`Fault`] and the [`Probe`] reporting on it.
#[derive(Debug, Clone)]
pub struct Misbehave {
    fault: Fault,
    probe: Probe,
}

impl Misbehave {
    /// A plugin injecting `fault`.
    pub fn new(fault: Fault) -> Misbehave {
        Misbehave {
            fault,
            probe: Probe::default(),
        }
    }

    /// The fault.
    pub fn fault(&self) -> &Fault {
        &self.fault
    }

    /// What the plugin observed so far.
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Connects and misbehaves until the fault ends the run or the runtime
    /// closes the connection.
    pub async fn run(&self, target: Target) -> Result<Outcome, Error> {
        if self.fault.kind == FaultKind::DuplicateIdentity {
            let Target::Socket(path) = target else {
                return Err(Error::NeedsSocket(self.fault.kind));
            };
            let first = connect(&path).await?;
            let first = self.session(first, 0);
            let second = async {
                // The second connection registers once the first one has.
                self.probe.wait_for(|p| p.registered() >= 1).await;
                let stream = connect(&path).await?;
                self.session(stream, 1).await
            };
            let (a, b) = tokio::join!(first, second);
            a?;
            return b;
        }
        let stream = match target {
            Target::Socket(path) => connect(&path).await?,
            Target::Stream(stream) => stream,
        };
        self.session(stream, 0).await
    }

    /// One connection.
    async fn session(&self, stream: UnixStream, conn_no: usize) -> Result<Outcome, Error> {
        self.probe.0.connections.fetch_add(1, Ordering::SeqCst);
        self.probe.changed();
        let (read, write) = stream.into_split();
        let mut reader = Reader::new(read);
        let writer = Arc::new(Writer::new(write));
        let fault = &self.fault;
        let probe = &self.probe;
        let flood_permits = Arc::new(Semaphore::new(fault.flood_inflight.max(1)));
        let mut flood: Option<AbortOnDrop> = None;
        let streams = Arc::new(AtomicU32::new(REGISTER_STREAM + 2));

        if fault.kind == FaultKind::NeverRegister {
            while reader.next().await?.is_some() {}
            return Ok(Outcome::Disconnected);
        }
        if fault.kind.uses_trigger() && fault.trigger == Trigger::Connect {
            probe.fire();
            match fault.kind {
                FaultKind::Exit => return Ok(Outcome::Exited),
                FaultKind::Hang => {
                    while reader.next().await?.is_some() {}
                    return Ok(Outcome::Disconnected);
                }
                kind => break_stream(kind, &writer).await,
            }
        }

        let register = RegisterPluginRequest {
            plugin_name: fault.name.clone(),
            plugin_idx: fault.index.clone(),
            nri_version: String::new(),
        };
        writer
            .request(
                RUNTIME_SERVICE_CONN,
                REGISTER_STREAM,
                RUNTIME_SERVICE,
                runtime_method::REGISTER_PLUGIN,
                &register,
            )
            .await?;

        while let Some(msg) = reader.next().await? {
            if msg.conn == RUNTIME_SERVICE_CONN {
                if msg.header.kind != MESSAGE_TYPE_RESPONSE {
                    continue;
                }
                let resp = nri_ttrpc::proto::Response::decode(msg.body.as_slice())
                    .map_err(|e| Error::Protocol(format!("bad response: {e}")))?;
                let failed = resp.status.as_ref().filter(|s| s.code != 0);
                if msg.header.stream_id == REGISTER_STREAM {
                    if let Some(status) = failed {
                        return Err(Error::Refused(status.message.clone()));
                    }
                    probe.0.registered.fetch_add(1, Ordering::SeqCst);
                    probe.changed();
                } else {
                    probe.0.updates_answered.fetch_add(1, Ordering::SeqCst);
                    flood_permits.add_permits(1);
                    probe.changed();
                }
                continue;
            }
            if msg.header.kind != MESSAGE_TYPE_REQUEST {
                continue;
            }
            let req = nri_ttrpc::proto::Request::decode(msg.body.as_slice())
                .map_err(|e| Error::Protocol(format!("bad request: {e}")))?;
            let stream_id = msg.header.stream_id;
            probe.request(conn_no, &req.method);
            tracing::debug!(method = %req.method, "request");

            if fault.kind.uses_trigger() && fault.trigger == Trigger::Request(req.method.clone()) {
                probe.fire();
                tracing::info!(fault = %fault.kind, method = %req.method, "fault fires");
                match fault.kind {
                    FaultKind::Exit => return Ok(Outcome::Exited),
                    FaultKind::Hang => continue,
                    kind => {
                        break_stream(kind, &writer).await;
                        continue;
                    }
                }
            }

            let payload = match req.method.as_str() {
                method::CONFIGURE => ConfigureResponse {
                    events: EventMask::VALID_EVENTS.raw(),
                    ..Default::default()
                }
                .encode_to_vec(),
                method::SYNCHRONIZE => {
                    let sync = SynchronizeRequest::decode(req.payload.as_slice())
                        .map_err(|e| Error::Protocol(format!("bad Synchronize: {e}")))?;
                    let reply = SynchronizeResponse {
                        update: Vec::new(),
                        more: sync.more,
                    }
                    .encode_to_vec();
                    if fault.kind == FaultKind::CloseDuringSync && sync.more {
                        writer.response(stream_id, reply).await?;
                        probe.fire();
                        tracing::info!(fault = %fault.kind, "closing after the first sync message");
                        return Ok(Outcome::ClosedDuringSync);
                    }
                    if fault.kind == FaultKind::FloodUpdates && !sync.more && flood.is_none() {
                        writer.response(stream_id, reply).await?;
                        probe.fire();
                        if fault.flood_ignore_replies {
                            // No more reading: the flood runs until a write
                            // fails (the runtime closed the connection).
                            flood_permits.add_permits(Semaphore::MAX_PERMITS / 2);
                            let _ = tokio::spawn(run_flood(
                                fault.clone(),
                                writer.clone(),
                                flood_permits.clone(),
                                streams.clone(),
                                probe.clone(),
                            ))
                            .await;
                            return Ok(Outcome::Disconnected);
                        }
                        flood = Some(AbortOnDrop(tokio::spawn(run_flood(
                            fault.clone(),
                            writer.clone(),
                            flood_permits.clone(),
                            streams.clone(),
                            probe.clone(),
                        ))));
                        continue;
                    }
                    reply
                }
                method::CREATE_CONTAINER if fault.kind == FaultKind::Conflict => {
                    let mut adjust = ContainerAdjustment::default();
                    adjust.add_annotation(&fault.conflict_key, &fault.conflict_value);
                    probe.fire();
                    CreateContainerResponse {
                        adjust: Some(adjust),
                        ..Default::default()
                    }
                    .encode_to_vec()
                }
                // Every other reply is an empty message (or one whose
                // defaults mean "nothing to change").
                _ => Vec::new(),
            };
            writer.response(stream_id, payload).await?;
        }
        drop(flood);
        Ok(Outcome::Disconnected)
    }
}

async fn connect(path: &PathBuf) -> Result<UnixStream, Error> {
    UnixStream::connect(path)
        .await
        .map_err(|source| Error::Connect {
            path: path.clone(),
            source,
        })
}

/// Writes what the byte-level faults write; afterwards the writer is
/// stalled (it writes nothing more).
async fn break_stream(kind: FaultKind, writer: &Arc<Writer>) {
    let result = match kind {
        FaultKind::Garbage => writer.raw_then_stall(&garbage()).await,
        FaultKind::TruncatedFrame => {
            let mut bytes = mux_header(PLUGIN_SERVICE_CONN, TRUNCATED_ANNOUNCED).to_vec();
            bytes.extend_from_slice(&[0x5a; TRUNCATED_WRITTEN]);
            writer.raw_then_stall(&bytes).await
        }
        FaultKind::OversizedFrame => {
            // The payload may never be read: write it in the background.
            let len = MAX_FRAME_PAYLOAD + 1;
            let header = mux_header(PLUGIN_SERVICE_CONN, len as u32);
            // Nothing else is written from now on, even before this is.
            writer.stalled.store(true, Ordering::SeqCst);
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut bytes = header.to_vec();
                bytes.resize(MUX_HEADER + len, 0);
                let mut half = writer.half.lock().await;
                let _ = half.write_all(&bytes).await;
            });
            Ok(())
        }
        _ => Ok(()),
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "write failed");
    }
}

/// Deterministic junk (xorshift).
fn garbage() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..GARBAGE_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Sends UpdateContainers requests while permits last.
async fn run_flood(
    fault: Fault,
    writer: Arc<Writer>,
    permits: Arc<Semaphore>,
    streams: Arc<AtomicU32>,
    probe: Probe,
) {
    let mut n: u64 = 0;
    while fault.flood_count.is_none_or(|max| n < max) {
        match permits.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return,
        }
        let mut update = ContainerUpdate {
            container_id: fault.flood_container.clone(),
            ..Default::default()
        };
        update.set_linux_cpu_shares(2 + n % 1024);
        let req = UpdateContainersRequest {
            update: vec![update],
            evict: Vec::new(),
        };
        let stream = streams.fetch_add(2, Ordering::SeqCst);
        let sent = writer
            .request(
                RUNTIME_SERVICE_CONN,
                stream,
                RUNTIME_SERVICE,
                runtime_method::UPDATE_CONTAINERS,
                &req,
            )
            .await;
        if sent.is_err() {
            return;
        }
        n += 1;
        probe.0.updates_sent.fetch_add(1, Ordering::SeqCst);
        probe.changed();
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn mux_header(conn: u32, len: u32) -> [u8; MUX_HEADER] {
    let mut out = [0u8; MUX_HEADER];
    out[..4].copy_from_slice(&conn.to_be_bytes());
    out[4..].copy_from_slice(&len.to_be_bytes());
    out
}

/// The writing half: whole ttRPC messages framed as Go peers frame them
/// (a first frame of at most 4096 bytes, then the rest), or raw bytes.
struct Writer {
    half: tokio::sync::Mutex<OwnedWriteHalf>,
    stalled: AtomicBool,
}

impl Writer {
    fn new(half: OwnedWriteHalf) -> Writer {
        Writer {
            half: tokio::sync::Mutex::new(half),
            stalled: AtomicBool::new(false),
        }
    }

    async fn write(&self, bytes: &[u8], stall: bool) -> io::Result<()> {
        let mut half = self.half.lock().await;
        if self.stalled.load(Ordering::SeqCst) {
            return Ok(());
        }
        if stall {
            self.stalled.store(true, Ordering::SeqCst);
        }
        half.write_all(bytes).await?;
        half.flush().await
    }

    async fn raw_then_stall(&self, bytes: &[u8]) -> io::Result<()> {
        self.write(bytes, true).await
    }

    async fn message(&self, conn: u32, stream: u32, kind: u8, body: &[u8]) -> io::Result<()> {
        let header = FrameHeader {
            length: body.len() as u32,
            stream_id: stream,
            kind,
            flags: 0,
        };
        let mut msg = header.encode().to_vec();
        msg.extend_from_slice(body);
        let mut out = Vec::with_capacity(msg.len() + 2 * MUX_HEADER);
        let (first, mut rest) = msg.split_at(msg.len().min(FIRST_FRAME));
        out.extend_from_slice(&mux_header(conn, first.len() as u32));
        out.extend_from_slice(first);
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME_PAYLOAD));
            out.extend_from_slice(&mux_header(conn, chunk.len() as u32));
            out.extend_from_slice(chunk);
            rest = tail;
        }
        self.write(&out, false).await
    }

    async fn request<M: Message>(
        &self,
        conn: u32,
        stream: u32,
        service: &str,
        method: &str,
        msg: &M,
    ) -> io::Result<()> {
        let req = nri_ttrpc::proto::Request {
            service: service.to_string(),
            method: method.to_string(),
            payload: msg.encode_to_vec(),
            timeout_nano: 0,
            metadata: Vec::new(),
        };
        self.message(conn, stream, MESSAGE_TYPE_REQUEST, &req.encode_to_vec())
            .await
    }

    async fn response(&self, stream: u32, payload: Vec<u8>) -> io::Result<()> {
        let resp = nri_ttrpc::proto::Response {
            status: Some(nri_ttrpc::proto::Status::default()),
            payload,
        };
        self.message(
            PLUGIN_SERVICE_CONN,
            stream,
            MESSAGE_TYPE_RESPONSE,
            &resp.encode_to_vec(),
        )
        .await
    }
}

/// One ttRPC message received on a mux connection.
struct Msg {
    conn: u32,
    header: FrameHeader,
    body: Vec<u8>,
}

/// The reading half: reassembles ttRPC messages from mux frames of
/// connections 1 and 2 (frames of other connections are dropped).
struct Reader {
    half: OwnedReadHalf,
    plugin_conn: Vec<u8>,
    runtime_conn: Vec<u8>,
}

impl Reader {
    fn new(half: OwnedReadHalf) -> Reader {
        Reader {
            half,
            plugin_conn: Vec::new(),
            runtime_conn: Vec::new(),
        }
    }

    /// The next complete message, `None` at end of stream.
    async fn next(&mut self) -> Result<Option<Msg>, Error> {
        loop {
            for conn in [PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN] {
                if let Some(msg) = self.take(conn)? {
                    return Ok(Some(msg));
                }
            }
            let mut header = [0u8; MUX_HEADER];
            match self.half.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if is_closed(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            let [a, b, c, d, e, f, g, h] = header;
            let conn = u32::from_be_bytes([a, b, c, d]);
            let len = u32::from_be_bytes([e, f, g, h]) as usize;
            if len > MAX_FRAME_PAYLOAD {
                return Err(Error::Protocol(format!("frame of {len} bytes")));
            }
            let mut payload = vec![0u8; len];
            match self.half.read_exact(&mut payload).await {
                Ok(_) => {}
                Err(e) if is_closed(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            match conn {
                PLUGIN_SERVICE_CONN => self.plugin_conn.extend_from_slice(&payload),
                RUNTIME_SERVICE_CONN => self.runtime_conn.extend_from_slice(&payload),
                _ => {}
            }
        }
    }

    fn take(&mut self, conn: u32) -> Result<Option<Msg>, Error> {
        let buf = if conn == PLUGIN_SERVICE_CONN {
            &mut self.plugin_conn
        } else {
            &mut self.runtime_conn
        };
        let Some(raw) = buf.first_chunk::<TTRPC_HEADER>() else {
            return Ok(None);
        };
        let header = FrameHeader::decode(raw);
        let len = header.length as usize;
        if len > nri_ttrpc::MAX_MESSAGE_LEN {
            return Err(Error::Protocol(format!("message of {len} bytes")));
        }
        if buf.len() < TTRPC_HEADER + len {
            return Ok(None);
        }
        let body = buf[TTRPC_HEADER..TTRPC_HEADER + len].to_vec();
        buf.drain(..TTRPC_HEADER + len);
        Ok(Some(Msg { conn, header, body }))
    }
}

fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_are_framed_like_go_peers_and_read_back() {
        let (a, b) = UnixStream::pair().unwrap();
        let (_, w) = a.into_split();
        let (r, _w2) = b.into_split();
        let writer = Writer::new(w);
        let mut reader = Reader::new(r);
        let big = vec![7u8; 10_000];
        writer.response(5, big.clone()).await.unwrap();
        let msg = reader.next().await.unwrap().unwrap();
        assert_eq!(msg.conn, PLUGIN_SERVICE_CONN);
        assert_eq!(msg.header.stream_id, 5);
        assert_eq!(msg.header.kind, MESSAGE_TYPE_RESPONSE);
        let resp = nri_ttrpc::proto::Response::decode(msg.body.as_slice()).unwrap();
        assert_eq!(resp.payload, big);
    }

    #[tokio::test]
    async fn a_stalled_writer_writes_nothing_more() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (_, w) = a.into_split();
        let writer = Writer::new(w);
        writer.raw_then_stall(b"xy").await.unwrap();
        writer.response(1, Vec::new()).await.unwrap();
        drop(writer);
        let mut all = Vec::new();
        b.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"xy");
    }

    #[test]
    fn garbage_is_deterministic() {
        assert_eq!(garbage(), garbage());
        assert_eq!(garbage().len(), GARBAGE_LEN);
    }
}
