//! A plugin handler that panics: the runtime gets the panic's message and
//! location, the plugin keeps serving, and a panic in `configure` ends the run
//! with an error that carries them.

use crate::support;

use nri_api::service::plugin as method;
use nri_api::*;
use nri_stub::{ConfigureInfo, Context, CreateContainerResult, Error, EventMask, Plugin, Stub};
use support::*;

/// Panics in CreateContainer for containers named `bad-name`, and in
/// `configure` when the configuration says `panic`.
struct Buggy;

#[nri_stub::plugin]
impl Plugin for Buggy {
    async fn configure(
        &self,
        _: &Context,
        info: &ConfigureInfo,
    ) -> nri_stub::HandlerResult<EventMask> {
        assert!(info.config != "panic", "cannot read the configuration");
        Ok(EventMask::EMPTY)
    }

    async fn create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        assert!(
            ctr.name != "bad-name",
            "no container may be called {}",
            ctr.name
        );
        Ok(ContainerAdjustment::default().into())
    }
}

fn start() -> (tokio::task::JoinHandle<Result<(), Error>>, FakeRuntime) {
    let (plugin_end, runtime_end) = socket_pair();
    let rt = FakeRuntime::new(runtime_end, Registration::Accept);
    let stub = Stub::builder(Buggy)
        .name("buggy")
        .index("10")
        .connection(plugin_end)
        .build()
        .unwrap();
    (tokio::spawn(async move { stub.run().await }), rt)
}

async fn create(rt: &FakeRuntime, id: &str) -> Result<CreateContainerResponse, nri_ttrpc::Error> {
    let req = CreateContainerRequest {
        pod: Some(pod("p")),
        container: Some(container(id, "p")),
    };
    rt.call(method::CREATE_CONTAINER, &req).await
}

#[tokio::test]
async fn the_runtime_gets_the_message_and_location_and_the_plugin_goes_on() {
    let (_run, mut rt) = start();
    rt.registration().await;
    rt.configure().await.unwrap();

    let err = create(&rt, "bad").await.unwrap_err().to_string();
    // The `assert!` of create_container: the line before its condition.
    let line = include_str!("panics.rs")
        .lines()
        .position(|l| l.trim() == r#"ctr.name != "bad-name","#)
        .expect("the condition is in this file");
    let location = format!("{}:{line}:", file!());
    assert!(
        err.contains("plugin 10-buggy panicked in CreateContainer at ")
            && err.contains(&location)
            && err.contains("no container may be called bad-name"),
        "{err}"
    );
    assert!(err.contains("code = Internal"), "{err}");
    // The plugin still serves.
    create(&rt, "good").await.unwrap();
}

#[tokio::test]
async fn a_panic_in_configure_ends_the_run_with_it() {
    let (run, mut rt) = start();
    rt.registration().await;
    let mut request = configure_request();
    request.config = "panic".into();
    let err = rt
        .call::<_, ConfigureResponse>(method::CONFIGURE, &request)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot read the configuration"),
        "{err}"
    );
    let outcome = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    match outcome {
        Err(Error::HandlerPanicked(panic)) => {
            assert_eq!(panic.method, "Configure");
            assert_eq!(panic.message, "cannot read the configuration");
            assert!(
                panic
                    .location
                    .as_deref()
                    .is_some_and(|l| l.starts_with(file!())),
                "{panic:?}"
            );
        }
        other => panic!("expected HandlerPanicked, got {other:?}"),
    }
}
