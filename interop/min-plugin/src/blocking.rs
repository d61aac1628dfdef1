//! `nri-rs-min-blocking-plugin`: `nri-rs-min-plugin` on the blocking stub
//! (`nri_stub::blocking`): the same plugin, answering CreateContainer with one
//! annotation naming itself, served on the main thread without an async
//! runtime. The adaptation bench measures its idle memory and its calls next
//! to the async one's and the Go `nri-min-plugin`'s.
//!
//! ```text
//! nri-rs-min-blocking-plugin [-config FILE] -name NAME -idx NN -socket PATH
//! ```
//!
//! `-config` is accepted and ignored, so the bench can start it with
//! `nri-ref-plugin`'s command line.

use std::process::ExitCode;

use nri_stub::api::{Container, ContainerAdjustment, Event, EventMask, PodSandbox};
use nri_stub::blocking::{Plugin, Stub};
use nri_stub::{CreateContainerResult, HandlerResult};

/// Adds `bench.nri.io/plugin-<name>: on` to every new container.
struct Minimal {
    key: String,
}

impl Plugin for Minimal {
    const EVENTS: EventMask = EventMask::from_events(&[Event::CreateContainer]);

    fn create_container(
        &mut self,
        _pod: &PodSandbox,
        _ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation(self.key.clone(), "on");
        Ok(adjust.into())
    }
}

fn main() -> ExitCode {
    let (name, idx, socket) = match nri_interop_min_plugin::parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("nri-rs-min-blocking-plugin: {err}");
            return ExitCode::from(2);
        }
    };
    let key = format!("bench.nri.io/plugin-{name}");
    let mut builder = Stub::builder(Minimal { key }).name(name).index(idx);
    if let Some(socket) = socket {
        builder = builder.socket_path(socket);
    }
    match builder.build().and_then(|mut stub| stub.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("nri-rs-min-blocking-plugin: {err}");
            ExitCode::FAILURE
        }
    }
}
