//! Subscription at Configure: the implemented-events mask written by the macro, the
//! checks on the mask the plugin asks for, and old runtimes.

use crate::support;

use nri_api::service::plugin as method;
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, Error, Plugin, Stub};
use support::*;

/// Two handlers, nothing else.
#[derive(Default)]
struct TwoHandlers;

#[nri_stub::plugin]
impl Plugin for TwoHandlers {
    async fn start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }

    async fn remove_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }

    // Requests do not count as events.
    async fn shutdown(&self, _: &Context) {}
}

#[test]
fn macro_sets_exactly_the_implemented_events() {
    let mask = TwoHandlers.implemented_events();
    assert_eq!(
        mask,
        EventMask::from_events(&[Event::StartContainer, Event::RemovePodSandbox])
    );
    assert_eq!(mask.raw(), 0x24);
}

/// Declares its events by hand, without the macro.
struct Manual;

impl nri_stub::__private::PluginAttribute for Manual {}

#[nri_stub::async_trait]
impl Plugin for Manual {
    fn implemented_events(&self) -> EventMask {
        EventMask::from_events(&[Event::StopContainer])
    }

    async fn stop_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        Ok(vec![])
    }
}

#[test]
fn manual_implemented_events_are_used() {
    let stub = Stub::builder(Manual)
        .name("manual")
        .index("01")
        .build()
        .unwrap();
    assert_eq!(stub.implemented_events().raw(), 0x200);
    assert_eq!(stub.name(), "01-manual");
}

/// Implements nothing.
struct Nothing;

#[nri_stub::plugin]
impl Plugin for Nothing {
    async fn shutdown(&self, _: &Context) {}
}

#[test]
fn plugin_without_handlers_is_refused() {
    let err = Stub::builder(Nothing)
        .name("x")
        .index("01")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "plugin {} does not implement any NRI request handlers: is \
             `#[nri_stub::plugin]` missing on its `impl Plugin` block?",
            std::any::type_name::<Nothing>()
        )
    );
}

#[test]
fn invalid_identity_is_refused() {
    let err = Stub::builder(TwoHandlers)
        .name("a,b")
        .index("01")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("invalid plugin name \"a,b\": contains invalid character ','{IDENTITY_HINT}")
    );
    let err = Stub::builder(TwoHandlers)
        .name("ok")
        .index("1x")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("invalid plugin index \"1x\" (not [0-9][0-9]){IDENTITY_HINT}")
    );
}

/// What an identity error adds to the text of `nri_api`'s error.
const IDENTITY_HINT: &str = " (set the name and the two-digit index with StubBuilder::name \
                             and ::index, or name the program NN-name, e.g. 10-my-plugin)";

/// Returns a configurable mask (or error) from configure.
struct Configurable {
    reply: Result<EventMask, &'static str>,
    implemented: EventMask,
}

impl nri_stub::__private::PluginAttribute for Configurable {}

#[nri_stub::async_trait]
impl Plugin for Configurable {
    fn implemented_events(&self) -> EventMask {
        self.implemented
    }

    async fn configure(
        &self,
        _: &Context,
        _: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        self.reply.map_err(Into::into)
    }
}

/// Runs `plugin` against a fake runtime that sends `req` as Configure; returns the
/// runtime's view of the reply and what run() returned.
async fn configure_with<P: Plugin>(
    plugin: P,
    req: ConfigureRequest,
) -> (
    Result<ConfigureResponse, nri_ttrpc::Error>,
    Option<Result<(), Error>>,
) {
    configure_after(Registration::Accept, plugin, req).await
}

/// [`configure_with`], with the runtime answering the registration as `registration`
/// says (Configure is sent once the registration has arrived, answered or not).
async fn configure_after<P: Plugin>(
    registration: Registration,
    plugin: P,
    req: ConfigureRequest,
) -> (
    Result<ConfigureResponse, nri_ttrpc::Error>,
    Option<Result<(), Error>>,
) {
    let (run, rt, _) = run_registered(plugin, "cfg", "05", registration).await;
    let reply = rt.call(method::CONFIGURE, &req).await;
    let outcome = if reply.is_err() {
        // Like a real runtime, drop a plugin that failed Configure; the run still ends
        // with the Configure error.
        rt.disappear();
        Some(tokio::time::timeout(WAIT, run).await.unwrap().unwrap())
    } else {
        None
    };
    (reply, outcome)
}

#[tokio::test]
async fn empty_mask_subscribes_to_implemented_events() {
    let (reply, _) = configure_with(TwoHandlers, configure_request()).await;
    assert_eq!(reply.unwrap().events, 0x24);
}

#[tokio::test]
async fn unhandled_events_fail_configure() {
    let plugin = Configurable {
        reply: Ok(EventMask::from_events(&[
            Event::CreateContainer,
            Event::RunPodSandbox,
            Event::StopContainer,
        ])),
        implemented: EventMask::from_events(&[Event::CreateContainer]),
    };
    let (reply, outcome) = configure_with(plugin, configure_request()).await;
    let err = reply.unwrap_err();
    assert_eq!(err.code(), nri_ttrpc::Code::Unknown);
    let text = "internal error: unhandled events RunPodSandbox,StopContainer (0x201)";
    assert_eq!(err.status().map(|s| s.message()), Some(text));
    let run_err = outcome.unwrap().unwrap_err();
    assert!(matches!(run_err, Error::UnhandledEvents { .. }));
    assert_eq!(run_err.to_string(), text);
}

#[tokio::test]
async fn configure_handler_error_fails_the_run() {
    let plugin = Configurable {
        reply: Err("bad configuration"),
        implemented: EventMask::from_events(&[Event::CreateContainer]),
    };
    let (reply, outcome) = configure_with(plugin, configure_request()).await;
    assert_eq!(
        reply.unwrap_err().status().map(|s| s.message()),
        Some("bad configuration")
    );
    let run_err = outcome.unwrap().unwrap_err();
    assert!(matches!(run_err, Error::Configure(_)));
    assert_eq!(
        run_err.to_string(),
        "plugin configuration failed: bad configuration"
    );
}

#[tokio::test]
async fn configure_failure_before_the_registration_reply_is_the_reported_cause() {
    // The runtime configures the plugin while its registration reply is still
    // pending, then drops the plugin for the failed Configure: the reply never
    // comes, and the run reports why the plugin was dropped.
    let plugin = Configurable {
        reply: Err("no such mode: turbo"),
        implemented: EventMask::from_events(&[Event::CreateContainer]),
    };
    let (reply, outcome) = configure_after(Registration::Hold, plugin, configure_request()).await;
    let refused = reply.unwrap_err();
    assert!(
        refused.to_string().contains("no such mode: turbo"),
        "{refused}"
    );
    let err = outcome.expect("the run ended").unwrap_err();
    assert!(matches!(err, Error::Configure(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin configuration failed: no such mode: turbo"
    );
}

/// A validator: needs NRI v0.10 or newer.
struct Validator;

#[nri_stub::plugin]
impl Plugin for Validator {
    async fn validate_container_adjustment(
        &self,
        _: &Context,
        _: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }

    async fn create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<nri_stub::CreateContainerResult> {
        Ok(Default::default())
    }
}

fn containerd_1_7_20() -> ConfigureRequest {
    ConfigureRequest {
        runtime_name: "containerd".into(),
        runtime_version: "v1.7.20".into(),
        nri_version: String::new(),
        ..Default::default()
    }
}

#[tokio::test]
async fn old_runtime_cannot_host_a_validator() {
    let (reply, outcome) = configure_with(Validator, containerd_1_7_20()).await;
    let expected = "runtime containerd v1.7.20 speaks NRI v0.6.1 (inferred), which cannot deliver \
                    the events ValidateContainerAdjustment (0x2000) (they need NRI v0.10.0 or newer); \
                    leave them out of the mask returned by configure()";
    assert_eq!(
        reply.unwrap_err().status().map(|s| s.message()),
        Some(expected)
    );
    let run_err = outcome.unwrap().unwrap_err();
    assert!(matches!(run_err, Error::EventsNotSupported { .. }));
    assert_eq!(run_err.to_string(), expected);
}

#[tokio::test]
async fn reported_old_version_is_checked_too() {
    let req = ConfigureRequest {
        nri_version: "v0.9.0".into(),
        ..containerd_1_7_20()
    };
    let (reply, _) = configure_with(Validator, req).await;
    let message = reply
        .unwrap_err()
        .status()
        .map(|s| s.message().to_string())
        .unwrap();
    assert!(
        message.starts_with("runtime containerd v1.7.20 speaks NRI v0.9.0, which"),
        "{message}"
    );
}

#[tokio::test]
async fn old_runtime_accepts_plugin_that_leaves_new_events_out() {
    let plugin = Configurable {
        reply: Ok(EventMask::from_events(&[Event::CreateContainer])),
        implemented: EventMask::from_events(&[
            Event::CreateContainer,
            Event::ValidateContainerAdjustment,
        ]),
    };
    let (reply, _) = configure_with(plugin, containerd_1_7_20()).await;
    assert_eq!(reply.unwrap().events, 0x8);
}

#[tokio::test]
async fn failure_policy_is_sent() {
    let (plugin_end, runtime_end) = socket_pair();
    let mut rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let policy = FailurePolicy {
        fail_request: true,
        ..Default::default()
    };
    let stub = Stub::builder(TwoHandlers)
        .name("cfg")
        .index("05")
        .connection(plugin_end)
        .failure_policy(policy)
        .build()
        .unwrap();
    let _run = tokio::spawn(async move { stub.run().await });
    rt.registration().await;
    assert_eq!(rt.configure().await.unwrap().failure_policy, Some(policy));
}
