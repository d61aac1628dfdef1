//! The tap between our runtime (an in-process adaptation) and an nri-stub
//! plugin: the same results as without it, a decoded recording (split
//! synchronize included), filters; garbage forwarded unchanged and
//! recorded; `nri-tap wrap` handing a launched plugin its own socket.

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nri_adaptation::{Adaptation, BoxError, RuntimeHooks, Synchronizer};
use nri_api::*;
use nri_stub::{Context, CreateContainerResult, Plugin};
use nri_tap::record::{Filter, Options, Recorder};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(30);

async fn bounded<F: std::future::Future>(fut: F) -> F::Output {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("operation did not finish in time")
}

/// A runtime with one pod and `ctrs` containers carrying 100 KiB
/// annotations each (more than one 4 MiB message in all from 45 on).
struct Runtime {
    ctrs: usize,
}

#[nri_adaptation::async_trait]
impl RuntimeHooks for Runtime {
    async fn synchronize(&self, sync: &mut dyn Synchronizer) -> Result<(), BoxError> {
        let big = "x".repeat(100 * 1024);
        let ctrs: Vec<Container> = (0..self.ctrs)
            .map(|i| {
                let mut c = ctr(&format!("old{i}"));
                c.annotations.insert("big".into(), big.clone());
                c
            })
            .collect();
        sync.synchronize(&[pod()], &ctrs).await?;
        Ok(())
    }
}

fn pod() -> PodSandbox {
    PodSandbox {
        id: "pod0".into(),
        name: "web".into(),
        ..Default::default()
    }
}

fn ctr(id: &str) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "pod0".into(),
        name: format!("{id}-name"),
        ..Default::default()
    }
}

/// Annotates and limits memory at creation.
struct Adjuster;

#[nri_stub::plugin]
impl Plugin for Adjuster {
    async fn create_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("seen", &ctr.id);
        adjust.set_linux_memory_limit(1 << 28);
        Ok(adjust.into())
    }
    async fn stop_container(
        &self,
        _c: &Context,
        _p: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        Ok(Vec::new())
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    nri: Adaptation,
    plugin_socket: PathBuf,
    recording: PathBuf,
    writer: Option<nri_tap::record::WriterTask>,
}

/// Our runtime on a socket; with `tap`, a tap in front of it recording
/// with `options`.
async fn setup(ctrs: usize, tap: Option<Options>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let runtime_socket = dir.path().join("nri.sock");
    let nri = Adaptation::builder("test-runtime", "v1", Arc::new(Runtime { ctrs }))
        .plugin_path(dir.path().join("plugins"))
        .plugin_config_path(dir.path().join("conf.d"))
        .socket_path(&runtime_socket)
        .request_timeout(Duration::from_secs(20))
        .build();
    bounded(nri.start()).await.unwrap();
    let recording = dir.path().join("rec.jsonl");
    let (plugin_socket, writer) = match tap {
        None => (runtime_socket, None),
        Some(options) => {
            let tap_socket = dir.path().join("tap.sock");
            let listener = nri_tap::proxy::listen(&tap_socket).unwrap();
            let (rec, writer) = Recorder::to_path(&recording, options).await.unwrap();
            tokio::spawn(nri_tap::proxy::serve(listener, runtime_socket, rec));
            (tap_socket, Some(writer))
        }
    };
    Setup {
        _dir: dir,
        nri,
        plugin_socket,
        recording,
        writer,
    }
}

fn run_stub(socket: &Path) -> tokio::task::JoinHandle<()> {
    let stub = nri_stub::Stub::builder(Adjuster)
        .name("adjuster")
        .index("10")
        .socket_path(socket)
        .build()
        .unwrap();
    tokio::spawn(async move {
        let _ = stub.run().await;
    })
}

async fn wait_plugin(nri: &Adaptation) {
    bounded(async {
        while nri.plugins().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Connects the plugin, creates and stops a container; returns the
/// adaptation's answers.
async fn scenario(s: &Setup) -> (CreateContainerResponse, StopContainerResponse) {
    let plugin = run_stub(&s.plugin_socket);
    wait_plugin(&s.nri).await;
    let created = bounded(s.nri.create_container(CreateContainerRequest {
        pod: Some(pod()),
        container: Some(ctr("ctr0")),
    }))
    .await
    .unwrap();
    let stopped = bounded(s.nri.stop_container(StopContainerRequest {
        pod: Some(pod()),
        container: Some(ctr("ctr0")),
    }))
    .await
    .unwrap();
    bounded(s.nri.stop()).await;
    let _ = bounded(plugin).await;
    (created, stopped)
}

/// Waits for the recording to hold a line containing `until` and parses
/// it.
async fn recording(s: &mut Setup, until: &str) -> Vec<Value> {
    bounded(async {
        loop {
            let text = tokio::fs::read_to_string(&s.recording)
                .await
                .unwrap_or_default();
            if text.lines().any(|l| l.contains(until)) {
                return text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tapped_run_matches_direct_run_and_is_recorded() {
    let direct = setup(50, None).await;
    let want = scenario(&direct).await;
    let mut tapped = setup(50, Some(Options::default())).await;
    let got = scenario(&tapped).await;
    assert_eq!(got, want);
    assert_eq!(
        got.0.adjust.as_ref().unwrap().annotations["seen"],
        "ctr0",
        "{got:?}"
    );
    drop(tapped.writer.take());

    let lines = recording(
        &mut tapped,
        r#""method":"StopContainer","plugin":"10-adjuster","response""#,
    )
    .await;
    let of = |kind: &str, method: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["type"] == kind && l["method"] == method)
            .collect()
    };
    let register = of("request", "RegisterPlugin");
    assert_eq!(register.len(), 1, "{lines:#?}");
    assert_eq!(register[0]["request"]["plugin_name"], "adjuster");
    assert_eq!(register[0]["dir"], "plugin->runtime");
    assert_eq!(register[0]["conn"], 2);
    // 50 containers of 100 KiB: split in several Synchronize messages, each
    // recorded and answered.
    let syncs = of("request", "Synchronize");
    assert!(syncs.len() >= 2, "{}", syncs.len());
    assert_eq!(syncs[0]["request"]["more"], true);
    let sent: usize = syncs
        .iter()
        .map(|s| s["request"]["containers"].as_array().map_or(0, |a| a.len()))
        .sum();
    assert_eq!(sent, 50);
    assert_eq!(of("response", "Synchronize").len(), syncs.len());
    let create = of("request", "CreateContainer");
    assert_eq!(create.len(), 1);
    assert_eq!(create[0]["plugin"], "10-adjuster");
    assert_eq!(create[0]["dir"], "runtime->plugin");
    assert_eq!(create[0]["request"]["container"]["id"], "ctr0");
    let reply = of("response", "CreateContainer");
    assert_eq!(reply.len(), 1);
    assert_eq!(reply[0]["status"]["code"], 0);
    assert_eq!(
        reply[0]["response"]["adjust"]["annotations"]["seen"],
        "ctr0"
    );
    assert!(reply[0]["elapsed_us"].as_u64().is_some(), "{:?}", reply[0]);
    assert_eq!(of("request", "StopContainer").len(), 1);
    assert!(lines.iter().all(|l| l["type"] != "malformed"), "{lines:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_keep_only_the_asked_messages() {
    let options = Options {
        filter: Filter {
            containers: vec!["ctr0-name".into()],
            events: vec!["CreateContainer".into()],
            plugins: vec!["adjuster".into()],
            ..Default::default()
        },
        raw: true,
    };
    let mut s = setup(1, Some(options)).await;
    scenario(&s).await;
    drop(s.writer.take());
    let lines = recording(&mut s, r#""type":"response""#).await;
    let messages: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l["method"].is_string())
        .map(|l| (l["type"].as_str().unwrap(), l["method"].as_str().unwrap()))
        .collect();
    assert_eq!(
        messages,
        [
            ("request", "CreateContainer"),
            ("response", "CreateContainer")
        ]
    );
    // Raw bytes: the ttRPC header (10 bytes) and the body.
    let req = lines.iter().find(|l| l["type"] == "request").unwrap();
    let raw = req["raw"].as_str().unwrap();
    assert_eq!(
        raw.len(),
        2 * (10 + req["bytes"].as_u64().unwrap() as usize)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_forwarded_unchanged_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let echo_path = dir.path().join("echo.sock");
    let echo = tokio::net::UnixListener::bind(&echo_path).unwrap();
    // The "runtime" echoes every byte back.
    tokio::spawn(async move {
        let (s, _) = echo.accept().await.unwrap();
        let (mut r, mut w) = s.into_split();
        let _ = tokio::io::copy(&mut r, &mut w).await;
    });
    let tap_path = dir.path().join("tap.sock");
    let recording = dir.path().join("rec.jsonl");
    let (rec, writer) = Recorder::to_path(&recording, Options::default())
        .await
        .unwrap();
    let listener = nri_tap::proxy::listen(&tap_path).unwrap();
    let server = tokio::spawn(nri_tap::proxy::serve(listener, echo_path, rec));

    let garbage: Vec<u8> = (0..200_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let mut c = tokio::net::UnixStream::connect(&tap_path).await.unwrap();
    let (mut r, mut w) = c.split();
    let send = async {
        w.write_all(&garbage).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let mut back = Vec::new();
    let recv = r.read_to_end(&mut back);
    let (_, n) = bounded(async { tokio::join!(send, recv) }).await;
    assert_eq!(n.unwrap(), garbage.len());
    assert!(back == garbage, "bytes changed");
    drop(c);
    server.abort();
    let _ = server.await;
    bounded(writer).await.unwrap().unwrap();
    let text = std::fs::read_to_string(&recording).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let malformed: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "malformed")
        .map(|l| l["dir"].as_str().unwrap())
        .collect();
    assert_eq!(malformed, ["plugin->runtime", "runtime->plugin"], "{text}");
    let close = lines.iter().find(|l| l["type"] == "close").unwrap();
    assert_eq!(close["bytes_to_runtime"], garbage.len());
    assert_eq!(close["bytes_to_plugin"], garbage.len());
}

/// One mux frame on conn 2 holding a ttRPC RegisterPlugin request.
fn register_frame() -> Vec<u8> {
    use prost::Message;
    let payload = RegisterPluginRequest {
        plugin_name: "echo".into(),
        plugin_idx: "42".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let body = nri_ttrpc::proto::Request {
        service: nri_api::service::RUNTIME_SERVICE.into(),
        method: "RegisterPlugin".into(),
        payload,
        ..Default::default()
    }
    .encode_to_vec();
    let mut msg = nri_ttrpc::frame::FrameHeader {
        length: body.len() as u32,
        stream_id: 1,
        kind: nri_ttrpc::frame::MESSAGE_TYPE_REQUEST,
        flags: 0,
    }
    .encode()
    .to_vec();
    msg.extend(body);
    let mut frame = 2u32.to_be_bytes().to_vec();
    frame.extend((msg.len() as u32).to_be_bytes());
    frame.extend(msg);
    frame
}

#[test]
fn wrap_gives_the_plugin_its_own_socket() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("rec.jsonl");
    let (mut runtime_end, tap_end) = std::os::unix::net::UnixStream::pair().unwrap();
    rustix::io::fcntl_setfd(tap_end.as_fd(), rustix::io::FdFlags::empty()).unwrap();
    // The "plugin" echoes what arrives on its NRI_PLUGIN_SOCKET.
    let mut tap = std::process::Command::new(env!("CARGO_BIN_EXE_nri-tap"))
        .args(["wrap", "--record"])
        .arg(&recording)
        .args([
            "--",
            "bash",
            "-c",
            r#"exec cat <&"$NRI_PLUGIN_SOCKET" >&"$NRI_PLUGIN_SOCKET""#,
        ])
        .env("NRI_PLUGIN_SOCKET", tap_end.as_raw_fd().to_string())
        .env("NRI_PLUGIN_IDX", "42")
        .env("NRI_PLUGIN_NAME", "echo")
        .spawn()
        .unwrap();
    drop(tap_end);
    use std::io::{Read, Write};
    let frame = register_frame();
    runtime_end
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    runtime_end.write_all(&frame).unwrap();
    let mut back = vec![0u8; frame.len()];
    runtime_end.read_exact(&mut back).unwrap();
    assert_eq!(back, frame);
    runtime_end.shutdown(std::net::Shutdown::Write).unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = tap.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "nri-tap did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&recording).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reqs: Vec<&Value> = lines.iter().filter(|l| l["type"] == "request").collect();
    // Once each way: the echo makes the plugin "send" it back.
    assert_eq!(reqs.len(), 2, "{text}");
    assert_eq!(reqs[0]["plugin"], "42-echo");
    assert_eq!(reqs[0]["request"]["plugin_name"], "echo");
    assert_eq!(reqs[0]["dir"], "runtime->plugin");
    assert_eq!(reqs[1]["dir"], "plugin->runtime");
}

/// Median and 99th percentile of `samples`, in microseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    (at(0.5), at(0.99))
}

/// CreateContainer latency through one plugin, direct and through the tap
/// (recording to a file). A measurement, not a check: run it optimized,
/// `cargo test --release -p nri-tap --test transparent -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --release --ignored --nocapture"]
async fn added_latency() {
    const N: usize = 3000;
    let mut results = Vec::new();
    for tap in [false, true, false, true] {
        let s = setup(0, tap.then(Options::default)).await;
        let _plugin = run_stub(&s.plugin_socket);
        wait_plugin(&s.nri).await;
        let mut samples = Vec::with_capacity(N);
        for i in 0..N + 200 {
            let req = CreateContainerRequest {
                pod: Some(pod()),
                container: Some(ctr(&format!("c{i}"))),
            };
            let start = Instant::now();
            s.nri.create_container(req).await.unwrap();
            if i >= 200 {
                samples.push(start.elapsed());
            }
        }
        let (p50, p99) = percentiles(samples);
        println!("tap={tap} CreateContainer 1 plugin: median {p50:.1} us, p99 {p99:.1} us");
        results.push((tap, p50));
        bounded(s.nri.stop()).await;
    }
    let mean = |t: bool| {
        let v: Vec<f64> = results.iter().filter(|r| r.0 == t).map(|r| r.1).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    println!(
        "added by the tap: {:.1} us per call at the median",
        mean(true) - mean(false)
    );
}
