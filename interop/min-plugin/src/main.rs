//! `nri-rs-min-plugin`: the smallest useful plugin on nri-stub, used by the
//! adaptation bench to measure an idle plugin's memory next to the Go
//! `nri-min-plugin` (official stub). It answers CreateContainer with one
//! annotation naming itself, as a real plugin written from the stub's
//! example would: a current-thread tokio runtime, no logging subscriber, no
//! configuration.
//!
//! ```text
//! nri-rs-min-plugin [-config FILE] -name NAME -idx NN -socket PATH
//! ```
//!
//! `-config` is accepted and ignored, so the bench can start it with
//! `nri-ref-plugin`'s command line.

use std::process::ExitCode;

use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
use nri_stub::{Context, CreateContainerResult, Plugin, Stub};

/// Adds `bench.nri.io/plugin-<name>: on` to every new container.
struct Minimal {
    key: String,
}

#[nri_stub::plugin]
impl Plugin for Minimal {
    async fn create_container(
        &self,
        _ctx: &Context,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation(self.key.clone(), "on");
        Ok(adjust.into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (name, idx, socket) = match nri_interop_min_plugin::parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("nri-rs-min-plugin: {err}");
            return ExitCode::from(2);
        }
    };
    let key = format!("bench.nri.io/plugin-{name}");
    let mut builder = Stub::builder(Minimal { key }).name(name).index(idx);
    if let Some(socket) = socket {
        builder = builder.socket_path(socket);
    }
    let result = match builder.build() {
        Ok(stub) => stub.run().await,
        Err(err) => Err(err),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("nri-rs-min-plugin: {err}");
            ExitCode::FAILURE
        }
    }
}
