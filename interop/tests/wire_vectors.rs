//! Wire vectors: the bytes the Go reference (`containerd/nri`'s multiplexer
//! and `containerd/ttrpc`) puts on an NRI trunk, checked against nri-mux and
//! nri-ttrpc in both directions.
//!
//! * Go → Rust: `nri-wire-vectors encode` records a Go client calling a Go
//!   server once per case. Go's client bytes are fed through our mux into
//!   our ttRPC server; Go's server bytes through our mux into our client.
//! * Rust → Go: our client's bytes for the same requests go to
//!   `nri-wire-vectors decode`, a Go mux + ttRPC server serving the NRI
//!   Plugin service, which reports what it decoded.
//! * Byte equality: our client and our server write exactly Go's bytes,
//!   frame boundaries included. A message above 4086 bytes goes out as Go's
//!   4 KiB buffered writer sends it: one 4096-byte frame, then one frame with
//!   the whole rest (checked on `synchronize_large`).
//!
//! Legitimate differences between Go and us:
//!
//! * A map entry with an empty value: Go writes the empty value field,
//!   prost leaves it out; both decode to the same map. The vectors hold no
//!   such entry, so it does not show up here.
//! * A call with a deadline carries `timeout_nano`, the time left, which
//!   is not reproducible; the vectors are made without deadlines, and so
//!   are our calls here.
//! * The status of a successful response: Go's ttRPC (v1.2.7) leaves the
//!   `status` field out, and so does nri-ttrpc's server;
//!   `go_server_omits_status_on_success` pins Go's form.

use std::any::type_name;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nri_api::service::{plugin, PLUGIN_SERVICE};
use nri_interop::run_harness;
use nri_mux::{Mux, MuxOptions, GO_READ_BUFFER, PLUGIN_SERVICE_CONN};
use nri_ttrpc::frame::{FrameHeader, HEADER_LEN, MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE};
use nri_ttrpc::{proto, BoxFuture, Client, Code, Error, Server, Status};
use prost::Message;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// Bound on every wait for the peer.
const WAIT: Duration = Duration::from_secs(10);
/// Bound on one run of the Go program.
const GO_TIMEOUT: Duration = Duration::from_secs(120);
/// Mux frame header: conn id and payload length, both u32 big-endian.
const MUX_HEADER_LEN: usize = 8;

// ---------------------------------------------------------------------------
// The Go vectors
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct Vectors {
    cases: Vec<GoCase>,
}

/// One case of `nri-wire-vectors encode`.
#[derive(Debug, Deserialize)]
struct GoCase {
    name: String,
    service: String,
    method: String,
    request_json: Value,
    response_json: Value,
    status: Option<GoStatus>,
    client_to_server_hex: String,
    server_to_client_hex: String,
    client_to_server_frames: Vec<FrameInfo>,
    server_to_client_frames: Vec<FrameInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct GoStatus {
    code: i32,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
struct FrameInfo {
    conn: u32,
    len: u32,
}

impl GoCase {
    fn client_bytes(&self) -> Vec<u8> {
        from_hex(&self.client_to_server_hex)
    }

    fn server_bytes(&self) -> Vec<u8> {
        from_hex(&self.server_to_client_hex)
    }

    /// Whether our ttRPC server knows the method (the vectors also call one
    /// the Plugin service does not have).
    fn is_known_method(&self) -> bool {
        self.service == PLUGIN_SERVICE && plugin::ALL.contains(&self.method.as_str())
    }

    /// The request message, encoded by us from Go's JSON.
    fn our_request_payload(&self) -> Vec<u8> {
        (codecs(&self.method).0.encode)(&self.request_json)
    }

    /// What a server answers in this case: Go's response, or Go's status.
    fn canned_answer(&self) -> Result<Vec<u8>, Status> {
        match &self.status {
            Some(st) => Err(Status::new(Code::from(st.code), st.message.clone())),
            None => Ok((codecs(&self.method).1.encode)(&self.response_json)),
        }
    }
}

/// The Go vectors, produced once per test process.
fn vectors() -> &'static [GoCase] {
    static VECTORS: OnceLock<Vec<GoCase>> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let run = run_harness("nri-wire-vectors", ["encode"], GO_TIMEOUT).unwrap();
        assert!(
            run.status.success(),
            "nri-wire-vectors encode failed ({}): {}",
            run.status,
            run.stderr
        );
        let vectors: Vectors = serde_json::from_slice(&run.stdout).unwrap();
        vectors.cases
    })
}

fn case(name: &str) -> &'static GoCase {
    vectors()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("Go vectors have no case {name:?}"))
}

// ---------------------------------------------------------------------------
// Hex, mux frames and ttRPC messages
// ---------------------------------------------------------------------------

fn from_hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd-length hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MuxFrame {
    conn: u32,
    payload: Vec<u8>,
}

/// The complete mux frames at the start of `bytes`, and how many bytes they
/// take.
fn parse_mux(bytes: &[u8]) -> (Vec<MuxFrame>, usize) {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= MUX_HEADER_LEN {
        let conn = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if bytes.len() - at - MUX_HEADER_LEN < len {
            break;
        }
        let start = at + MUX_HEADER_LEN;
        frames.push(MuxFrame {
            conn,
            payload: bytes[start..start + len].to_vec(),
        });
        at = start + len;
    }
    (frames, at)
}

/// All mux frames of a complete trunk recording.
fn mux_frames(bytes: &[u8]) -> Vec<MuxFrame> {
    let (frames, used) = parse_mux(bytes);
    assert_eq!(used, bytes.len(), "trunk bytes end in a partial mux frame");
    frames
}

fn frame_infos(frames: &[MuxFrame]) -> Vec<FrameInfo> {
    frames
        .iter()
        .map(|f| FrameInfo {
            conn: f.conn,
            len: f.payload.len() as u32,
        })
        .collect()
}

/// The byte stream of one logical connection.
fn conn_stream(frames: &[MuxFrame], conn: u32) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.conn == conn)
        .flat_map(|f| f.payload.iter().copied())
        .collect()
}

#[derive(Debug)]
struct TtrpcMessage {
    header: FrameHeader,
    payload: Vec<u8>,
}

/// The complete ttRPC messages at the start of a connection's byte stream,
/// and how many bytes they take.
fn parse_ttrpc(stream: &[u8]) -> (Vec<TtrpcMessage>, usize) {
    let mut msgs = Vec::new();
    let mut at = 0;
    while stream.len() - at >= HEADER_LEN {
        let header = FrameHeader::decode(stream[at..at + HEADER_LEN].try_into().unwrap());
        let len = header.length as usize;
        let start = at + HEADER_LEN;
        if stream.len() - start < len {
            break;
        }
        msgs.push(TtrpcMessage {
            header,
            payload: stream[start..start + len].to_vec(),
        });
        at = start + len;
    }
    (msgs, at)
}

/// The ttRPC messages of a complete trunk recording, which must all be on
/// the Plugin service connection (1).
fn messages(trunk: &[u8]) -> Vec<TtrpcMessage> {
    let frames = mux_frames(trunk);
    for f in &frames {
        assert_eq!(f.conn, PLUGIN_SERVICE_CONN, "frame on an unexpected conn");
    }
    let stream = conn_stream(&frames, PLUGIN_SERVICE_CONN);
    let (msgs, used) = parse_ttrpc(&stream);
    assert_eq!(used, stream.len(), "conn stream ends in a partial message");
    msgs
}

/// Reads from the raw end of a trunk until `count` complete ttRPC messages
/// arrived on conn 1.
async fn read_messages(raw: &mut UnixStream, buf: &mut Vec<u8>, count: usize) {
    let complete = |buf: &[u8]| {
        let (frames, _) = parse_mux(buf);
        parse_ttrpc(&conn_stream(&frames, PLUGIN_SERVICE_CONN))
            .0
            .len()
    };
    let reading = async {
        let mut chunk = vec![0u8; 64 * 1024];
        while complete(buf) < count {
            let n = raw.read(&mut chunk).await.unwrap();
            assert!(n > 0, "trunk closed after {} bytes", buf.len());
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(WAIT, reading)
        .await
        .unwrap_or_else(|_| panic!("waited {WAIT:?} for {count} ttRPC messages"));
}

// ---------------------------------------------------------------------------
// Typed views of the NRI messages
// ---------------------------------------------------------------------------

/// How to check and build one NRI message type from Go's JSON.
#[derive(Clone, Copy)]
struct Codec {
    /// Asserts that protobuf bytes decode to the value Go's JSON describes.
    check_bytes: fn(&str, &[u8], &Value),
    /// Asserts that two JSON documents describe the same value.
    check_json: fn(&str, &Value, &Value),
    /// Our protobuf encoding of the value Go's JSON describes.
    encode: fn(&Value) -> Vec<u8>,
}

fn typed<T: DeserializeOwned>(what: &str, json: &Value) -> T {
    serde_json::from_value(json.clone())
        .unwrap_or_else(|e| panic!("{what}: JSON is no {}: {e}\n{json}", type_name::<T>()))
}

fn check_bytes<T>(what: &str, bytes: &[u8], json: &Value)
where
    T: Message + Default + DeserializeOwned + PartialEq + Debug,
{
    let got = T::decode(bytes)
        .unwrap_or_else(|e| panic!("{what}: bytes are no {}: {e}", type_name::<T>()));
    let want: T = typed(what, json);
    assert_eq!(got, want, "{what}");
}

fn check_json<T>(what: &str, got: &Value, want: &Value)
where
    T: DeserializeOwned + PartialEq + Debug,
{
    assert_eq!(typed::<T>(what, got), typed::<T>(what, want), "{what}");
}

fn encode<T>(json: &Value) -> Vec<u8>
where
    T: Message + DeserializeOwned,
{
    typed::<T>("encode", json).encode_to_vec()
}

fn codec<T>() -> Codec
where
    T: Message + Default + DeserializeOwned + PartialEq + Debug,
{
    Codec {
        check_bytes: check_bytes::<T>,
        check_json: check_json::<T>,
        encode: encode::<T>,
    }
}

/// Request and response types of a Plugin method. Methods the service does
/// not have carry `Empty` in the vectors.
fn codecs(method: &str) -> (Codec, Codec) {
    use nri_api::service::plugin;
    use nri_api::*;
    match method {
        plugin::CONFIGURE => (codec::<ConfigureRequest>(), codec::<ConfigureResponse>()),
        plugin::SYNCHRONIZE => (
            codec::<SynchronizeRequest>(),
            codec::<SynchronizeResponse>(),
        ),
        plugin::SHUTDOWN => (codec::<Empty>(), codec::<Empty>()),
        plugin::RUN_POD_SANDBOX => (
            codec::<RunPodSandboxRequest>(),
            codec::<RunPodSandboxResponse>(),
        ),
        plugin::UPDATE_POD_SANDBOX => (
            codec::<UpdatePodSandboxRequest>(),
            codec::<UpdatePodSandboxResponse>(),
        ),
        plugin::POST_UPDATE_POD_SANDBOX => (
            codec::<PostUpdatePodSandboxRequest>(),
            codec::<PostUpdatePodSandboxResponse>(),
        ),
        plugin::STOP_POD_SANDBOX => (
            codec::<StopPodSandboxRequest>(),
            codec::<StopPodSandboxResponse>(),
        ),
        plugin::REMOVE_POD_SANDBOX => (
            codec::<RemovePodSandboxRequest>(),
            codec::<RemovePodSandboxResponse>(),
        ),
        plugin::CREATE_CONTAINER => (
            codec::<CreateContainerRequest>(),
            codec::<CreateContainerResponse>(),
        ),
        plugin::POST_CREATE_CONTAINER => (
            codec::<PostCreateContainerRequest>(),
            codec::<PostCreateContainerResponse>(),
        ),
        plugin::START_CONTAINER => (
            codec::<StartContainerRequest>(),
            codec::<StartContainerResponse>(),
        ),
        plugin::POST_START_CONTAINER => (
            codec::<PostStartContainerRequest>(),
            codec::<PostStartContainerResponse>(),
        ),
        plugin::UPDATE_CONTAINER => (
            codec::<UpdateContainerRequest>(),
            codec::<UpdateContainerResponse>(),
        ),
        plugin::POST_UPDATE_CONTAINER => (
            codec::<PostUpdateContainerRequest>(),
            codec::<PostUpdateContainerResponse>(),
        ),
        plugin::STOP_CONTAINER => (
            codec::<StopContainerRequest>(),
            codec::<StopContainerResponse>(),
        ),
        plugin::REMOVE_CONTAINER => (
            codec::<RemoveContainerRequest>(),
            codec::<RemoveContainerResponse>(),
        ),
        plugin::STATE_CHANGE => (codec::<StateChangeEvent>(), codec::<Empty>()),
        plugin::VALIDATE_CONTAINER_ADJUSTMENT => (
            codec::<ValidateContainerAdjustmentRequest>(),
            codec::<ValidateContainerAdjustmentResponse>(),
        ),
        _ => (codec::<Empty>(), codec::<Empty>()),
    }
}

// ---------------------------------------------------------------------------
// Our side of the wire
// ---------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A request our server received: service, method, payload.
type Received = (String, String, Vec<u8>);

/// A ttRPC server with every Plugin method: `method` gets `answer`, the
/// others an empty reply. Each request is reported on `received`.
fn plugin_server(
    method: &str,
    answer: Result<Vec<u8>, Status>,
    received: mpsc::UnboundedSender<Received>,
) -> Server {
    let mut server = Server::new();
    for &name in plugin::ALL {
        let received = received.clone();
        let answer = if name == method {
            answer.clone()
        } else {
            Ok(Vec::new())
        };
        server.register(PLUGIN_SERVICE, name, move |ctx, payload| {
            let _ = received.send((ctx.service.clone(), ctx.method.clone(), payload));
            let answer = answer.clone();
            Box::pin(async move { answer }) as BoxFuture<'static, _>
        });
    }
    server
}

/// Feeds Go's client bytes of `case` to our mux + Plugin server; returns what
/// the server received and everything it wrote back to the trunk.
async fn serve_go_request(case: &GoCase) -> (Vec<Received>, Vec<u8>) {
    let (mut raw, trunk) = UnixStream::pair().unwrap();
    let mux = Mux::new(trunk, MuxOptions::default());
    let conn = mux.open(PLUGIN_SERVICE_CONN).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let server = Arc::new(plugin_server(&case.method, case.canned_answer(), tx));
    let serving = tokio::spawn(server.serve(conn));

    raw.write_all(&case.client_bytes()).await.unwrap();
    let mut back = Vec::new();
    read_messages(&mut raw, &mut back, 1).await;

    let mut received = Vec::new();
    while let Ok(r) = rx.try_recv() {
        received.push(r);
    }
    serving.abort();
    mux.close();
    (received, back)
}

/// Has our client (over our mux) call the method of `case` with its request,
/// and answers with `reply` (raw trunk bytes) once the request is complete.
/// Returns the bytes our side wrote to the trunk and the call's outcome.
async fn our_client_call(case: &GoCase, reply: &[u8]) -> (Vec<u8>, Result<Vec<u8>, Error>) {
    let (mut raw, trunk) = UnixStream::pair().unwrap();
    let mux = Mux::new(trunk, MuxOptions::default());
    let client = Client::new(mux.open(PLUGIN_SERVICE_CONN).unwrap());

    let call = {
        let client = client.clone();
        let (service, method) = (case.service.clone(), case.method.clone());
        let payload = case.our_request_payload();
        tokio::spawn(async move { client.call(&service, &method, payload, None).await })
    };
    let mut sent = Vec::new();
    read_messages(&mut raw, &mut sent, 1).await;
    raw.write_all(reply).await.unwrap();
    let outcome = tokio::time::timeout(WAIT, call)
        .await
        .unwrap_or_else(|_| panic!("{}: our client got no answer", case.name))
        .unwrap();
    mux.close();
    (sent, outcome)
}

/// Has one client of ours send the requests of all `cases` in order on one
/// connection (stream ids 1, 3, 5, ...), without answering any; returns the
/// trunk bytes.
async fn our_client_sequence(cases: &[GoCase]) -> Vec<u8> {
    let (mut raw, trunk) = UnixStream::pair().unwrap();
    let mux = Mux::new(trunk, MuxOptions::default());
    let client = Client::new(mux.open(PLUGIN_SERVICE_CONN).unwrap());
    let mut sent = Vec::new();
    let mut calls = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let client = client.clone();
        let (service, method) = (case.service.clone(), case.method.clone());
        let payload = case.our_request_payload();
        calls.push(tokio::spawn(async move {
            client.call(&service, &method, payload, None).await
        }));
        read_messages(&mut raw, &mut sent, i + 1).await;
    }
    for call in calls {
        call.abort();
    }
    mux.close();
    sent
}

/// Asserts the outcome of a call against the case's response or status.
fn check_outcome(case: &GoCase, what: &str, outcome: &Result<Vec<u8>, Error>) {
    match (&case.status, outcome) {
        (None, Ok(payload)) => {
            (codecs(&case.method).1.check_bytes)(what, payload, &case.response_json)
        }
        (Some(want), Err(Error::Status(got))) => {
            assert_eq!(got.code(), Code::from(want.code), "{what}: status code");
            assert_eq!(got.message(), want.message, "{what}: status message");
        }
        (want, got) => panic!("{what}: expected {want:?}, got {got:?}"),
    }
}

/// Asserts that every frame our side wrote is on conn 1 and follows the
/// pattern Go readers need: a frame larger than Go's 4096-byte read buffer
/// only ever follows a full 4096-byte frame (the rest of a large message,
/// read straight into the message buffer).
fn assert_go_sized_frames(what: &str, trunk: &[u8]) {
    let mut previous = 0;
    for f in mux_frames(trunk) {
        assert_eq!(f.conn, PLUGIN_SERVICE_CONN, "{what}: frame conn");
        assert!(
            f.payload.len() <= GO_READ_BUFFER || previous == GO_READ_BUFFER,
            "{what}: frame of {} bytes does not follow a {GO_READ_BUFFER}-byte frame",
            f.payload.len()
        );
        previous = f.payload.len();
    }
}

// ---------------------------------------------------------------------------
// The vectors themselves
// ---------------------------------------------------------------------------

#[test]
fn go_vectors_cover_the_expected_cases() {
    let names: Vec<&str> = vectors().iter().map(|c| c.name.as_str()).collect();
    for want in [
        "configure",
        "create_container_adjust",
        "synchronize_large",
        "shutdown_empty",
        "error_status",
        "error_status_code",
        "unknown_method",
    ] {
        assert!(names.contains(&want), "missing case {want}: {names:?}");
    }
    for c in vectors() {
        // The frame lists Go reports agree with our own parse of its bytes.
        assert_eq!(
            frame_infos(&mux_frames(&c.client_bytes())),
            c.client_to_server_frames,
            "{}: client frames",
            c.name
        );
        assert_eq!(
            frame_infos(&mux_frames(&c.server_bytes())),
            c.server_to_client_frames,
            "{}: server frames",
            c.name
        );
    }
    // Go sends a large message as one 4096-byte frame and one frame with
    // the whole rest.
    let sync = case("synchronize_large");
    let lens: Vec<u32> = sync.client_to_server_frames.iter().map(|f| f.len).collect();
    assert_eq!(lens.len(), 2, "{lens:?}");
    assert_eq!(lens[0] as usize, GO_READ_BUFFER);
    assert!(lens[1] as usize > GO_READ_BUFFER, "{lens:?}");
}

// ---------------------------------------------------------------------------
// Go → Rust
// ---------------------------------------------------------------------------

#[test]
fn go_client_bytes_decode_in_our_server() {
    let cases = vectors();
    runtime().block_on(async {
        for case in cases {
            let what = format!("{}: our server", case.name);
            // What Go sent: one request on stream 1.
            let sent = messages(&case.client_bytes());
            assert_eq!(sent.len(), 1, "{what}");
            assert_eq!(sent[0].header.stream_id, 1, "{what}: Go stream id");
            assert_eq!(sent[0].header.kind, MESSAGE_TYPE_REQUEST, "{what}");

            let (received, back) = serve_go_request(case).await;
            if case.is_known_method() {
                assert_eq!(received.len(), 1, "{what}: requests received");
                let (service, method, payload) = &received[0];
                assert_eq!(service, &case.service, "{what}: service");
                assert_eq!(method, &case.method, "{what}: method");
                (codecs(method).0.check_bytes)(&what, payload, &case.request_json);
            } else {
                assert!(received.is_empty(), "{what}: {received:?}");
            }

            let answers = messages(&back);
            assert_eq!(answers.len(), 1, "{what}: answers");
            assert_eq!(answers[0].header.stream_id, 1, "{what}: answer stream id");
            assert_eq!(answers[0].header.kind, MESSAGE_TYPE_RESPONSE, "{what}");
            let resp = proto::Response::decode(answers[0].payload.as_slice()).unwrap();
            let outcome = match resp.status {
                Some(st) if st.code != 0 => Err(Error::Status(st.into())),
                _ => Ok(resp.payload),
            };
            check_outcome(case, &what, &outcome);

            // Byte for byte what Go's server wrote for the same request.
            assert_eq!(
                to_hex(&back),
                case.server_to_client_hex,
                "{what}: answer differs from Go's"
            );
        }
    });
}

#[test]
fn go_server_bytes_decode_in_our_client() {
    let cases = vectors();
    runtime().block_on(async {
        for case in cases {
            let what = format!("{}: our client", case.name);
            let answers = messages(&case.server_bytes());
            assert_eq!(answers.len(), 1, "{what}");
            assert_eq!(answers[0].header.stream_id, 1, "{what}: Go stream id");
            assert_eq!(answers[0].header.kind, MESSAGE_TYPE_RESPONSE, "{what}");

            let (_, outcome) = our_client_call(case, &case.server_bytes()).await;
            check_outcome(case, &what, &outcome);
        }
    });
}

#[test]
fn go_server_omits_status_on_success() {
    for case in vectors() {
        let answers = messages(&case.server_bytes());
        let resp = proto::Response::decode(answers[0].payload.as_slice()).unwrap();
        match &case.status {
            None => assert_eq!(resp.status, None, "{}", case.name),
            Some(want) => {
                let got = resp.status.unwrap();
                assert_eq!((got.code, got.message), (want.code, want.message.clone()));
            }
        }
    }
}

#[test]
fn unknown_method_reaches_our_client_as_unimplemented() {
    let case = case("unknown_method");
    let (_, outcome) = runtime().block_on(our_client_call(case, &case.server_bytes()));
    let err = outcome.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert_eq!(err.status().unwrap().message(), "method NoSuchMethod");
}

// ---------------------------------------------------------------------------
// Rust → Go
// ---------------------------------------------------------------------------

/// One case of `nri-wire-vectors decode` output.
#[derive(Debug, Deserialize)]
struct DecodedCase {
    name: String,
    requests: Vec<DecodedRequest>,
    responses: Vec<DecodedResponse>,
    client_to_server_frames: Vec<FrameInfo>,
    error: String,
}

#[derive(Debug, Deserialize)]
struct DecodedRequest {
    service: String,
    method: String,
    request_json: Value,
}

#[derive(Debug, Deserialize)]
struct DecodedResponse {
    stream_id: u32,
    status: Option<GoStatus>,
}

#[derive(Debug, Deserialize)]
struct Decoded {
    cases: Vec<DecodedCase>,
}

/// The status Go's decode server (empty answers) gives a request of `case`.
fn decode_server_status(case: &GoCase) -> Option<GoStatus> {
    (!case.is_known_method()).then(|| GoStatus {
        code: i32::from(Code::Unimplemented),
        message: format!("method {}", case.method),
    })
}

fn check_decoded_request(what: &str, case: &GoCase, got: &DecodedRequest) {
    assert_eq!(got.service, case.service, "{what}: service");
    assert_eq!(got.method, case.method, "{what}: method");
    (codecs(&case.method).0.check_json)(what, &got.request_json, &case.request_json);
}

const SEQUENCE: &str = "all_requests_on_one_connection";

#[test]
fn go_decodes_our_client_requests() {
    let cases = vectors();
    let rt = runtime();
    let mut inputs = Vec::new();
    let mut ours = Vec::new();
    for case in cases {
        let (sent, outcome) = rt.block_on(our_client_call(case, &case.server_bytes()));
        check_outcome(case, &case.name, &outcome);
        assert_go_sized_frames(&case.name, &sent);
        inputs.push(json!({"name": case.name, "client_to_server_hex": to_hex(&sent)}));
        ours.push(sent);
    }
    let sequence = rt.block_on(our_client_sequence(cases));
    assert_go_sized_frames(SEQUENCE, &sequence);
    let ids: Vec<u32> = messages(&sequence)
        .iter()
        .map(|m| m.header.stream_id)
        .collect();
    let want_ids: Vec<u32> = (0..cases.len() as u32).map(|i| 2 * i + 1).collect();
    assert_eq!(ids, want_ids, "our stream ids");
    inputs.push(json!({"name": SEQUENCE, "client_to_server_hex": to_hex(&sequence)}));

    let dir = tempfile::tempdir().unwrap();
    let file =
        nri_interop::write_json(dir.path(), "decode.json", &json!({"cases": inputs})).unwrap();
    let run = run_harness(
        "nri-wire-vectors",
        ["decode".as_ref(), file.as_os_str()],
        GO_TIMEOUT,
    )
    .unwrap();
    assert!(
        run.status.success(),
        "nri-wire-vectors decode failed ({}): {}",
        run.status,
        run.stderr
    );
    let decoded: Decoded = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(decoded.cases.len(), cases.len() + 1);

    for ((case, got), sent) in cases.iter().zip(&decoded.cases).zip(&ours) {
        let what = format!("{}: Go decoding our bytes", case.name);
        assert_eq!(got.name, case.name);
        assert_eq!(got.error, "", "{what}");
        assert_eq!(
            got.client_to_server_frames,
            frame_infos(&mux_frames(sent)),
            "{what}: frames"
        );
        if case.is_known_method() {
            assert_eq!(got.requests.len(), 1, "{what}: {:?}", got.requests);
            check_decoded_request(&what, case, &got.requests[0]);
        } else {
            // Go's server rejects unknown methods before its interceptor.
            assert!(got.requests.is_empty(), "{what}: {:?}", got.requests);
        }
        assert_eq!(got.responses.len(), 1, "{what}: {:?}", got.responses);
        assert_eq!(got.responses[0].stream_id, 1, "{what}");
        assert_eq!(
            got.responses[0].status,
            decode_server_status(case),
            "{what}"
        );
    }

    // All requests on one connection: Go's server handles them concurrently,
    // so match them by method and stream id rather than by order.
    let seq = &decoded.cases[cases.len()];
    assert_eq!(seq.name, SEQUENCE);
    assert_eq!(seq.error, "", "{SEQUENCE}");
    let known: Vec<&GoCase> = cases.iter().filter(|c| c.is_known_method()).collect();
    assert_eq!(seq.requests.len(), known.len(), "{:?}", seq.requests);
    for case in known {
        let matching: Vec<&DecodedRequest> = seq
            .requests
            .iter()
            .filter(|r| r.method == case.method)
            .collect();
        assert_eq!(matching.len(), 1, "{SEQUENCE}: {}", case.method);
        check_decoded_request(&format!("{SEQUENCE}: {}", case.name), case, matching[0]);
    }
    let mut responses: Vec<(u32, Option<GoStatus>)> = seq
        .responses
        .iter()
        .map(|r| (r.stream_id, r.status.clone()))
        .collect();
    responses.sort_by_key(|r| r.0);
    let want: Vec<(u32, Option<GoStatus>)> = cases
        .iter()
        .zip(&want_ids)
        .map(|(c, &id)| (id, decode_server_status(c)))
        .collect();
    assert_eq!(responses, want, "{SEQUENCE}: responses");
}

// ---------------------------------------------------------------------------
// Byte equality of our client with Go's client
// ---------------------------------------------------------------------------

#[test]
fn configure_bytes_equal_go_bytes() {
    let case = case("configure");
    let (sent, outcome) = runtime().block_on(our_client_call(case, &case.server_bytes()));
    check_outcome(case, "configure", &outcome);
    assert_eq!(case.client_to_server_frames.len(), 1, "one frame");
    assert_eq!(to_hex(&sent), case.client_to_server_hex);
}

#[test]
fn our_client_bytes_equal_go_client_bytes() {
    let cases = vectors();
    let rt = runtime();
    for case in cases {
        let (sent, _) = rt.block_on(our_client_call(case, &case.server_bytes()));
        // Byte for byte, frame boundaries included: a large message goes out
        // as Go sends it, one 4096-byte frame and then one with the rest.
        assert_eq!(to_hex(&sent), case.client_to_server_hex, "{}", case.name);
    }
}
