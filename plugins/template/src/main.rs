//! `nri-template`: the smallest complete NRI plugin, a starting point for new ones.
//!
//! Every request handler is present and logs what it got; none changes anything.

use std::process::ExitCode;

use nri_stub::{EventMask, Stub};

use nri_plugin_template::cli::{Args, INFO};
use nri_plugin_template::plugin::Template;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let _tracing = nri_plugin_util::init_tracing(&args.common, &INFO);

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

    let builder = Stub::builder(Template { events })
        .on_close(|| tracing::info!("connection to the runtime lost"));
    args.common.serve(builder, &INFO).await
}
