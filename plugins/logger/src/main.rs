//! `nri-logger`: logs the NRI requests and events it subscribes to, and can inject an
//! annotation or environment variable into new containers.

use std::path::Path;
use std::process::ExitCode;

use nri_stub::{EventMask, Stub};

use nri_plugin_logger::cli::{Args, INFO};
use nri_plugin_logger::config::Config;
use nri_plugin_logger::log_sink::LogSink;
use nri_plugin_logger::plugin::Logger;

fn init_logging(verbose: bool, sink: LogSink) {
    tracing_subscriber::fmt()
        .with_env_filter(nri_plugin_util::log_filter(verbose))
        .with_ansi(false)
        .with_writer(sink)
        .init();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    let sink = LogSink::default();
    init_logging(args.common.verbose, sink.clone());

    if !args.log_file.is_empty() {
        if let Err(err) = sink.open_file(Path::new(&args.log_file)) {
            tracing::error!("failed to open log file {:?}: {err}", args.log_file);
            return ExitCode::FAILURE;
        }
    }
    let events: Vec<String> = if args.events.is_empty() {
        Vec::new()
    } else {
        vec![args.events.clone()]
    };
    if let Err(err) = EventMask::parse(&events) {
        tracing::error!("failed to parse events: {err}");
        return ExitCode::FAILURE;
    }
    let cfg = Config {
        log_file: args.log_file,
        events,
        add_annotation: args.add_annotation,
        set_annotation: args.set_annotation,
        add_env: args.add_env,
        set_env: args.set_env,
    };

    let builder = Stub::builder(Logger::new(cfg, sink))
        .on_close(|| tracing::info!("connection to the runtime lost"));
    args.common.serve(builder, &INFO).await
}
