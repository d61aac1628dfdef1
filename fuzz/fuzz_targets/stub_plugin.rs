//! nri-stub: the Plugin service of a stub, driven with arbitrary requests.
//!
//! The target plays the runtime over an in-memory connection: it answers
//! the stub's RegisterPlugin with a fuzzed reply, optionally configures and
//! synchronizes the plugin properly, then calls Plugin methods (known or
//! arbitrary names) with fuzzed payloads, and ends with Shutdown or by
//! closing the connection. The plugin implements every handler and uses
//! the runtime handle from inside them.
//!
//! Checked: no panic, no hang: every call returns (a reply or a status),
//! and `Stub::run` returns once the runtime shut it down or went away.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nri_api::service::{
    plugin as method, runtime as runtime_method, PLUGIN_SERVICE, RUNTIME_SERVICE,
};
use nri_api::*;
use nri_fuzz::run_paused;
use nri_mux::{Mux, MuxOptions, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use nri_stub::{Context, CreateContainerResult, Plugin, Stub};
use nri_ttrpc::{BoxFuture, Client, Code, Server, Status};
use prost::Message;

#[derive(Default)]
struct Everything;

#[nri_stub::plugin]
impl Plugin for Everything {
    async fn run_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn update_pod_sandbox(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: Option<&LinuxResources>,
        _: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn post_update_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn stop_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn remove_pod_sandbox(&self, _: &Context, _: &PodSandbox) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn create_container(
        &self,
        _: &Context,
        pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("fuzz/pod", &pod.id);
        adjust.add_env("CTR", &ctr.id);
        Ok(adjust.into())
    }
    async fn post_create_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn post_start_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn update_container(
        &self,
        ctx: &Context,
        _: &PodSandbox,
        ctr: &Container,
        _: Option<&LinuxResources>,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        // An unsolicited update from inside a handler, as plugins do.
        let mut update = ContainerUpdate::for_container(&ctr.id);
        update.set_linux_cpu_shares(2);
        let _ = ctx
            .runtime_handle()
            .update_containers(vec![update], Vec::new())
            .await;
        Ok(Vec::new())
    }
    async fn post_update_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn stop_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<Vec<ContainerUpdate>> {
        Ok(Vec::new())
    }
    async fn remove_container(
        &self,
        _: &Context,
        _: &PodSandbox,
        _: &Container,
    ) -> nri_stub::HandlerResult<()> {
        Ok(())
    }
    async fn validate_container_adjustment(
        &self,
        _: &Context,
        req: &ValidateContainerAdjustmentRequest,
    ) -> nri_stub::HandlerResult<()> {
        if req.plugins.len() > 3 {
            return Err("too many plugins".into());
        }
        Ok(())
    }
}

#[derive(Arbitrary, Debug)]
enum Registration {
    Accept,
    Refuse(String),
    Reply(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Call {
    /// An index into the Plugin methods, or (past them) `other`.
    method: u8,
    other: String,
    payload: Vec<u8>,
    timeout_ms: u16,
}

#[derive(Arbitrary, Debug)]
struct Input {
    registration: Registration,
    /// Configure and synchronize properly first, with these settings.
    setup: Option<(String, String, String, i64, i64, String)>,
    calls: Vec<Call>,
    shutdown: bool,
    update_failed: bool,
}

fn runtime_server(registration: Registration, update_failed: bool) -> Server {
    let mut server = Server::new();
    let registration = Arc::new(registration);
    server.register(
        RUNTIME_SERVICE,
        runtime_method::REGISTER_PLUGIN,
        move |_ctx, _payload| {
            let registration = Arc::clone(&registration);
            Box::pin(async move {
                match &*registration {
                    Registration::Accept => Ok(Vec::new()),
                    Registration::Refuse(msg) => {
                        Err(Status::new(Code::InvalidArgument, msg.clone()))
                    }
                    Registration::Reply(bytes) => Ok(bytes.clone()),
                }
            }) as BoxFuture<'static, _>
        },
    );
    server.register_msg(
        RUNTIME_SERVICE,
        runtime_method::UPDATE_CONTAINERS,
        move |_ctx, req: UpdateContainersRequest| async move {
            let failed = if update_failed {
                req.update
            } else {
                Vec::new()
            };
            Ok::<_, Status>(UpdateContainersResponse { failed })
        },
    );
    server
}

fuzz_target!(|input: Input| {
    run_paused(async move {
        let (plugin_end, runtime_end) = tokio::io::duplex(1 << 16);
        let stub = Stub::builder(Everything)
            .name("fuzz")
            .index("10")
            .connection(plugin_end)
            .registration_timeout(Duration::from_secs(1))
            .build()
            .expect("the stub builds");
        let run = tokio::spawn(async move { stub.run().await });

        let mux = Mux::new(runtime_end, MuxOptions::default());
        let plugin_conn = mux.open(PLUGIN_SERVICE_CONN).expect("conn 1");
        let runtime_conn = mux.open(RUNTIME_SERVICE_CONN).expect("conn 2");
        let serving = tokio::spawn(
            Arc::new(runtime_server(input.registration, input.update_failed)).serve(runtime_conn),
        );
        let client = Client::new(plugin_conn);
        let timeout = Some(Duration::from_secs(2));

        if let Some((name, version, config, reg_ms, req_ms, nri_version)) = input.setup {
            let configure = ConfigureRequest {
                config,
                runtime_name: name,
                runtime_version: version,
                registration_timeout: reg_ms,
                request_timeout: req_ms,
                nri_version,
            };
            let _ = client
                .call(
                    PLUGIN_SERVICE,
                    method::CONFIGURE,
                    configure.encode_to_vec(),
                    timeout,
                )
                .await;
            let sync = SynchronizeRequest::default();
            let _ = client
                .call(
                    PLUGIN_SERVICE,
                    method::SYNCHRONIZE,
                    sync.encode_to_vec(),
                    timeout,
                )
                .await;
        }
        for call in input.calls.into_iter().take(8) {
            let name = method::ALL
                .get(usize::from(call.method))
                .map(|m| (*m).to_string())
                .unwrap_or(call.other);
            let timeout = Some(Duration::from_millis(u64::from(call.timeout_ms)));
            let _ = client
                .call(PLUGIN_SERVICE, &name, call.payload, timeout)
                .await;
        }
        if input.shutdown {
            let _ = client
                .call(PLUGIN_SERVICE, method::SHUTDOWN, Vec::new(), timeout)
                .await;
        }
        client.close();
        mux.close();
        let _ = run.await.expect("stub run task");
        serving.abort();
    });
});
