//! `nri-template`: the smallest complete NRI plugin, a starting point for new ones.
//!
//! Every request handler is present and logs what it got; none changes anything.

use std::process::ExitCode;

use nri_stub::{EventMask, Stub};

use nri_plugin_template::cli::Args;
use nri_plugin_template::plugin::Template;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::from_env();
    nri_plugin_util::init_logging(args.verbose);

    let events = match args.events.as_deref().filter(|e| !e.is_empty()) {
        None => EventMask::default(),
        Some(list) => match EventMask::parse(&[list]) {
            Ok(mask) => mask,
            Err(err) => {
                tracing::error!("failed to parse events {list:?}: {err}");
                return ExitCode::FAILURE;
            }
        },
    };

    let mut builder = Stub::builder(Template { events })
        .on_close(|| tracing::info!("connection to the runtime lost, exiting"));
    if let Some(name) = args.name {
        builder = builder.name(name);
    }
    if let Some(idx) = args.idx {
        builder = builder.index(idx);
    }
    if let Some(socket) = args.socket {
        builder = builder.socket_path(socket);
    }
    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(err) => {
            tracing::error!("failed to create plugin stub: {err}");
            return ExitCode::FAILURE;
        }
    };
    match stub.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("plugin exited: {err}");
            ExitCode::FAILURE
        }
    }
}
