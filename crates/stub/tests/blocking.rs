//! The blocking stub (`nri_stub::blocking`) against the in-process fake
//! runtime: a whole session on a thread of its own, and each way a run ends.

use crate::support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nri_api::service::plugin as method;
use nri_api::*;
use nri_stub::blocking::{Plugin, Stub};
use nri_stub::{ConfigureInfo, CreateContainerResult, HandlerResult, PLUGIN_NRI_VERSION};
use nri_ttrpc::Code;
use support::*;

/// A blocking plugin that handles the events `EVENTS` (raw mask) and
/// records its calls.
#[derive(Clone)]
struct Recorder<const EVENTS: i32> {
    calls: Arc<Mutex<Vec<String>>>,
    configured: Arc<Mutex<Option<ConfigureInfo>>>,
    /// Returned from configure; `Err` fails it.
    subscribe: Result<EventMask, &'static str>,
}

/// Handles every event.
type Full = Recorder<{ EventMask::VALID_EVENTS.raw() }>;

/// Handles only CreateContainer.
const CREATE_ONLY: i32 = EventMask::from_events(&[Event::CreateContainer]).raw();

impl<const EVENTS: i32> Default for Recorder<EVENTS> {
    fn default() -> Self {
        Recorder {
            calls: Arc::default(),
            configured: Arc::default(),
            subscribe: Ok(EventMask::default()),
        }
    }
}

impl<const EVENTS: i32> Recorder<EVENTS> {
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

fn shares(r: Option<&LinuxResources>) -> String {
    r.and_then(|r| r.cpu.as_ref())
        .and_then(|c| c.shares.as_ref())
        .map_or_else(|| "-".into(), |s| s.value.to_string())
}

impl<const EVENTS: i32> Plugin for Recorder<EVENTS> {
    const EVENTS: EventMask = EventMask(EVENTS);

    fn configure(&mut self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        *self.configured.lock().unwrap() = Some(info.clone());
        self.subscribe.map_err(Into::into)
    }

    fn synchronize(
        &mut self,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.record(synchronize_call(pods, containers));
        Ok(vec![ContainerUpdate::for_container("synced")])
    }

    fn shutdown(&mut self) {
        self.record("shutdown".into());
    }

    fn run_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record(format!("run_pod_sandbox {}", pod.id));
        if pod.id == "fail" {
            return Err("pod fail refused".into());
        }
        Ok(())
    }

    fn update_pod_sandbox(
        &mut self,
        pod: &PodSandbox,
        overhead: Option<&LinuxResources>,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<()> {
        self.record(format!(
            "update_pod_sandbox {} {} {}",
            pod.id,
            shares(overhead),
            shares(resources)
        ));
        Ok(())
    }

    fn post_update_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record(format!("post_update_pod_sandbox {}", pod.id));
        Ok(())
    }

    fn stop_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record(format!("stop_pod_sandbox {}", pod.id));
        Ok(())
    }

    fn remove_pod_sandbox(&mut self, pod: &PodSandbox) -> HandlerResult<()> {
        self.record(format!("remove_pod_sandbox {}", pod.id));
        Ok(())
    }

    fn create_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        self.record(format!("create_container {} {}", pod.id, ctr.id));
        if ctr.id == "boom" {
            panic!("create_container of {} went wrong", ctr.id);
        }
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("recorder", ctr.id.clone());
        Ok(CreateContainerResult {
            adjust: Some(adjust),
            updates: vec![ContainerUpdate::for_container("other")],
            evictions: vec![ContainerEviction {
                container_id: "victim".into(),
                reason: "room".into(),
            }],
        })
    }

    fn post_create_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record(format!("post_create_container {} {}", pod.id, ctr.id));
        Ok(())
    }

    fn start_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record(format!("start_container {} {}", pod.id, ctr.id));
        Ok(())
    }

    fn post_start_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record(format!("post_start_container {} {}", pod.id, ctr.id));
        Ok(())
    }

    fn update_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
        resources: Option<&LinuxResources>,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.record(format!(
            "update_container {} {} {}",
            pod.id,
            ctr.id,
            shares(resources)
        ));
        Ok(vec![ContainerUpdate::for_container("updated")])
    }

    fn post_update_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record(format!("post_update_container {} {}", pod.id, ctr.id));
        Ok(())
    }

    fn stop_container(
        &mut self,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.record(format!("stop_container {} {}", pod.id, ctr.id));
        Ok(vec![ContainerUpdate::for_container("stopped")])
    }

    fn remove_container(&mut self, pod: &PodSandbox, ctr: &Container) -> HandlerResult<()> {
        self.record(format!("remove_container {} {}", pod.id, ctr.id));
        Ok(())
    }

    fn validate_container_adjustment(
        &mut self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> HandlerResult<()> {
        let id = req.container.as_ref().map_or("", |c| c.id.as_str());
        self.record(format!("validate {id}"));
        if id == "bad" {
            return Err("bad container refused".into());
        }
        Ok(())
    }
}

type Run = tokio::task::JoinHandle<Result<(), nri_stub::Error>>;

/// A std socket pair: the plugin's blocking end, and the runtime's end for tokio.
fn pair() -> (std::os::unix::net::UnixStream, tokio::net::UnixStream) {
    let (plugin_end, runtime_end) = std::os::unix::net::UnixStream::pair().unwrap();
    runtime_end.set_nonblocking(true).unwrap();
    (
        plugin_end,
        tokio::net::UnixStream::from_std(runtime_end).unwrap(),
    )
}

/// Runs a blocking stub for `plugin` on a thread of its own against a fake runtime.
fn start<const EVENTS: i32>(
    plugin: Recorder<EVENTS>,
    registration: Registration,
) -> (Run, FakeRuntime) {
    let (plugin_end, runtime_end) = pair();
    let runtime = FakeRuntime::new(runtime_end, registration);
    let mut stub = Stub::builder(plugin)
        .name("blocker")
        .index("43")
        .connection(plugin_end)
        .registration_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let run = tokio::task::spawn_blocking(move || stub.run());
    (run, runtime)
}

/// The run's outcome, waited for with a bound.
async fn outcome(run: Run) -> Result<(), nri_stub::Error> {
    tokio::time::timeout(WAIT, run)
        .await
        .expect("the run did not end in time")
        .expect("the run's thread panicked")
}

fn status_of(err: nri_ttrpc::Error) -> nri_ttrpc::Status {
    match err {
        nri_ttrpc::Error::Status(status) => status,
        other => panic!("expected an error status, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_full_session() {
    let plugin = Full::default();
    let (run, mut rt) = start(plugin.clone(), Registration::Accept);
    let reg = rt.registration().await;
    assert_eq!(
        (reg.plugin_name.as_str(), reg.plugin_idx.as_str()),
        ("blocker", "43")
    );
    assert_eq!(reg.nri_version, PLUGIN_NRI_VERSION);

    // An event before Configure is refused.
    let early = rt
        .call::<_, RunPodSandboxResponse>(
            method::RUN_POD_SANDBOX,
            &RunPodSandboxRequest {
                pod: Some(pod("p")),
            },
        )
        .await;
    assert_eq!(
        status_of(early.unwrap_err()).code(),
        Code::FailedPrecondition
    );

    let reply = rt.configure().await.unwrap();
    assert_eq!(reply.events, EventMask::VALID_EVENTS.raw());
    let info = plugin.configured.lock().unwrap().clone().unwrap();
    assert_configured(&info);

    // A split Synchronize: one handler call with everything, at the end.
    let chunks = [
        (
            vec![pod("p1"), pod("p2")],
            vec![container("c1", "p1")],
            true,
        ),
        (vec![pod("p3")], vec![container("c2", "p1")], true),
        (vec![], vec![container("c3", "p3")], false),
    ];
    rt.synchronize_chunks(chunks, || plugin.take_calls()).await;
    assert_eq!(
        plugin.take_calls(),
        vec!["synchronize pods=p1,p2,p3 ctrs=c1,c2,c3"]
    );

    let p = || Some(pod("pod"));
    let ContainerReplies {
        created,
        updated,
        stopped,
    } = rt
        .lifecycle_events(&pod("pod"), &container("ctr", "pod"), 256)
        .await;
    assert_recorder_created(created);
    assert_eq!(
        updated.update,
        vec![ContainerUpdate::for_container("updated")]
    );
    assert_eq!(
        stopped.update,
        vec![ContainerUpdate::for_container("stopped")]
    );
    assert_eq!(
        plugin.take_calls(),
        vec![
            "run_pod_sandbox pod",
            "update_pod_sandbox pod 10 512",
            "post_update_pod_sandbox pod",
            "stop_pod_sandbox pod",
            "remove_pod_sandbox pod",
            "create_container pod ctr",
            "post_create_container pod ctr",
            "start_container pod ctr",
            "post_start_container pod ctr",
            "update_container pod ctr 256",
            "post_update_container pod ctr",
            "stop_container pod ctr",
            "remove_container pod ctr",
        ]
    );

    // The generic StateChange of older runtimes reaches the same handlers.
    let _: Empty = rt
        .call(
            method::STATE_CHANGE,
            &StateChangeEvent {
                event: Event::StartContainer as i32,
                pod: p(),
                container: Some(container("old", "pod")),
            },
        )
        .await
        .unwrap();
    assert_eq!(plugin.take_calls(), vec!["start_container pod old"]);

    // Validation: a handler error rejects, with its text as reason.
    let validate = |id: &str| ValidateContainerAdjustmentRequest {
        pod: p(),
        container: Some(container(id, "pod")),
        ..Default::default()
    };
    let ok: ValidateContainerAdjustmentResponse = rt
        .call(method::VALIDATE_CONTAINER_ADJUSTMENT, &validate("good"))
        .await
        .unwrap();
    assert!(!ok.reject);
    let refused: ValidateContainerAdjustmentResponse = rt
        .call(method::VALIDATE_CONTAINER_ADJUSTMENT, &validate("bad"))
        .await
        .unwrap();
    assert!(refused.reject);
    assert_eq!(refused.reason, "bad container refused");
    plugin.take_calls();

    // A handler error fails the request with its text; a panic answers with
    // its message and location, and the plugin goes on serving.
    let failed = rt
        .call::<_, RunPodSandboxResponse>(
            method::RUN_POD_SANDBOX,
            &RunPodSandboxRequest {
                pod: Some(pod("fail")),
            },
        )
        .await;
    let status = status_of(failed.unwrap_err());
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unknown, "pod fail refused")
    );
    let panicked = rt
        .call::<_, CreateContainerResponse>(
            method::CREATE_CONTAINER,
            &CreateContainerRequest {
                pod: p(),
                container: Some(container("boom", "pod")),
            },
        )
        .await;
    let status = status_of(panicked.unwrap_err());
    assert_eq!(status.code(), Code::Internal);
    assert!(
        status.message().starts_with(
            "plugin 43-blocker panicked in CreateContainer at crates/stub/tests/blocking.rs:"
        ),
        "{}",
        status.message()
    );
    assert!(status
        .message()
        .ends_with(": create_container of boom went wrong"));
    let unknown = rt.call::<_, Empty>("NoSuchMethod", &Empty {}).await;
    let status = status_of(unknown.unwrap_err());
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unimplemented, "method NoSuchMethod")
    );
    plugin.take_calls();

    // Shutdown: the handler runs and the run ends well.
    let _: Empty = rt.call(method::SHUTDOWN, &Empty {}).await.unwrap();
    rt.disappear();
    outcome(run).await.unwrap();
    assert_eq!(plugin.take_calls(), vec!["shutdown"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_subscribes_to_what_configure_asks() {
    let plugin = Full {
        subscribe: Ok(EventMask::from_events(&[Event::StartContainer])),
        ..Recorder::default()
    };
    let (run, mut rt) = start(plugin.clone(), Registration::Accept);
    rt.registration().await;
    let reply = rt.configure().await.unwrap();
    assert_eq!(
        reply.events,
        EventMask::from_events(&[Event::StartContainer]).raw()
    );
    // StateChange for an event it is not subscribed to reaches no handler.
    let _: Empty = rt
        .call(
            method::STATE_CHANGE,
            &StateChangeEvent {
                event: Event::RunPodSandbox as i32,
                pod: Some(pod("p")),
                container: None,
            },
        )
        .await
        .unwrap();
    assert!(plugin.take_calls().is_empty());
    rt.disappear();
    assert!(matches!(
        outcome(run).await,
        Err(nri_stub::Error::Disconnected)
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_configure_failures_end_the_run() {
    // The handler's own error.
    let plugin = Full {
        subscribe: Err("no config for me"),
        ..Recorder::default()
    };
    let (run, mut rt) = start(plugin, Registration::Accept);
    rt.registration().await;
    let status = status_of(rt.configure().await.unwrap_err());
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unknown, "no config for me")
    );
    rt.disappear();
    match outcome(run).await {
        Err(nri_stub::Error::Configure(err)) => assert_eq!(err.to_string(), "no config for me"),
        other => panic!("expected a configure error, got {other:?}"),
    }

    // Events without a handler.
    let plugin = Recorder::<CREATE_ONLY> {
        subscribe: Ok(EventMask::from_events(&[
            Event::CreateContainer,
            Event::StopContainer,
        ])),
        ..Recorder::default()
    };
    let (run, mut rt) = start(plugin, Registration::Accept);
    rt.registration().await;
    let status = status_of(rt.configure().await.unwrap_err());
    assert!(
        status.message().contains("unhandled events"),
        "{}",
        status.message()
    );
    rt.disappear();
    assert!(matches!(
        outcome(run).await,
        Err(nri_stub::Error::UnhandledEvents { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_registration_refused_or_unanswered() {
    let (run, mut rt) = start(Full::default(), Registration::Refuse);
    rt.registration().await;
    match outcome(run).await {
        Err(nri_stub::Error::Register(nri_ttrpc::Error::Status(status))) => {
            assert_eq!(status.code(), Code::InvalidArgument);
            assert_eq!(status.message(), "invalid plugin name: nope");
        }
        other => panic!("expected a refused registration, got {other:?}"),
    }

    let (plugin_end, runtime_end) = pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Hold);
    let mut stub = Stub::builder(Full::default())
        .name("blocker")
        .index("43")
        .connection(plugin_end)
        .registration_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let run = tokio::task::spawn_blocking(move || stub.run());
    rt.registration().await;
    assert!(matches!(
        outcome(run).await,
        Err(nri_stub::Error::Register(nri_ttrpc::Error::Timeout))
    ));
}

/// A blocking `Full` stub, `43-blocker`, on the given connection.
fn blocker_on(plugin_end: std::os::unix::net::UnixStream) -> Stub<Full> {
    Stub::builder(Full::default())
        .name("blocker")
        .index("43")
        .connection(plugin_end)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_oversized_frame_ends_the_run_with_a_protocol_error() {
    let (plugin_end, mut runtime_end) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut stub = blocker_on(plugin_end);
    let run = tokio::task::spawn_blocking(move || stub.run());
    // A frame header announcing more than any ttRPC message may hold.
    let mut header = 1u32.to_be_bytes().to_vec();
    header.extend_from_slice(&u32::MAX.to_be_bytes());
    runtime_end.write_all(&header).unwrap();
    match outcome(run).await {
        Err(nri_stub::Error::Protocol(text)) => assert!(text.contains("over the limit"), "{text}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_given_connection_serves_one_run() {
    let (plugin_end, runtime_end) = pair();
    let rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let mut stub = blocker_on(plugin_end);
    rt.disappear();
    let (stub, first) = tokio::task::spawn_blocking(move || {
        let first = stub.run();
        (stub, first)
    })
    .await
    .unwrap();
    assert!(
        matches!(first, Err(nri_stub::Error::Disconnected)),
        "{first:?}"
    );
    let mut stub = stub;
    assert!(matches!(stub.run(), Err(nri_stub::Error::ConnectionUsed)));
}

#[test]
fn blocking_plugin_without_events_is_refused() {
    let plugin = Recorder::<0>::default();
    let built = Stub::builder(plugin).name("blocker").index("43").build();
    assert!(matches!(built, Err(nri_stub::Error::NoHandlers { .. })));
}

#[test]
fn blocking_dial_failure_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    let mut stub = Stub::builder(Full::default())
        .name("blocker")
        .index("43")
        .socket_path(&socket)
        .build()
        .unwrap();
    match stub.run() {
        Err(nri_stub::Error::Connect { socket: named, .. }) => assert_eq!(named, socket),
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_requests_of_events_outside_the_plugins_are_unimplemented() {
    let plugin = Recorder::<CREATE_ONLY>::default();
    let (run, mut rt) = start(plugin.clone(), Registration::Accept);
    rt.registration().await;
    let reply = rt.configure().await.unwrap();
    assert_eq!(reply.events, CREATE_ONLY);
    let stopped = rt
        .call::<_, StopContainerResponse>(
            method::STOP_CONTAINER,
            &StopContainerRequest {
                pod: Some(pod("pod")),
                container: Some(container("ctr", "pod")),
            },
        )
        .await;
    let status = status_of(stopped.unwrap_err());
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unimplemented, "method StopContainer")
    );
    let created: CreateContainerResponse = rt
        .call(
            method::CREATE_CONTAINER,
            &CreateContainerRequest {
                pod: Some(pod("pod")),
                container: Some(container("ctr", "pod")),
            },
        )
        .await
        .unwrap();
    assert!(created.adjust.is_some());
    assert_eq!(plugin.take_calls(), vec!["create_container pod ctr"]);
    rt.disappear();
    assert!(matches!(
        outcome(run).await,
        Err(nri_stub::Error::Disconnected)
    ));
}
