//! `nri-rs-test-plugin`: an NRI plugin on nri-stub that behaves as its JSON
//! configuration says and logs every event it receives as a JSON line. It is the
//! Rust counterpart of the Go `nri-ref-plugin` (same flags, configuration and log
//! format; see `interop/README.md`), so one scenario can be checked against both.
//!
//! ```text
//! nri-rs-test-plugin [-config FILE] [-log FILE] [-name NAME] [-idx NN] [-socket PATH] [-record-rpc]
//! ```
//!
//! Launched by a runtime (`NRI_PLUGIN_SOCKET` set), the stub uses the inherited
//! connection and the runtime's name and index; a Configure config text holding a
//! JSON object replaces the `-config` configuration.

mod config;
mod eventlog;
mod plugin;
mod tap;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use nri_stub::Stub;

use crate::config::Config;
use crate::eventlog::{Entry, EventLog};
use crate::plugin::TestPlugin;
use crate::tap::Tapped;

/// Command-line options.
#[derive(Debug, Default)]
struct Args {
    config: Option<PathBuf>,
    log: Option<PathBuf>,
    name: Option<String>,
    idx: Option<String>,
    socket: Option<PathBuf>,
    record_rpc: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let flag = flag.trim_start_matches('-').to_string();
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("flag -{flag} needs a value"))
        };
        match flag.as_str() {
            "config" => args.config = Some(value()?.into()),
            "log" => args.log = Some(value()?.into()),
            "name" => args.name = Some(value()?),
            "idx" => args.idx = Some(value()?),
            "socket" => args.socket = Some(value()?.into()),
            "record-rpc" => args.record_rpc = true,
            _ => return Err(format!("unknown flag -{flag}")),
        }
    }
    Ok(args)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NRI_TEST_PLUGIN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("nri-rs-test-plugin: {err}");
            return ExitCode::from(2);
        }
    };
    let mut config = match &args.config {
        Some(path) => match Config::load(path) {
            Ok(config) => config,
            Err(err) => {
                eprintln!("nri-rs-test-plugin: {err}");
                return ExitCode::from(2);
            }
        },
        None => Config::default(),
    };
    if let Some(log) = &args.log {
        config.log = Some(log.clone());
    }
    let log = Arc::new(EventLog::default());
    if let Some(path) = &config.log {
        if let Err(err) = log.open(path) {
            eprintln!("nri-rs-test-plugin: open log {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }

    let pre_launched = std::env::var_os(nri_stub::api::plugin::PLUGIN_SOCKET_ENV).is_some();
    let record_rpc = (args.record_rpc || config.record_rpc) && !pre_launched;
    let failure_policy = config.failure_policy;
    let plugin = TestPlugin::new(config, Arc::clone(&log));
    let taps = plugin.tap_slot();

    let on_close_log = Arc::clone(&log);
    let mut builder =
        Stub::builder(plugin).on_close(move || on_close_log.write(&Entry::new("closed")));
    if let (Some(name), false) = (&args.name, pre_launched) {
        builder = builder.name(name.clone());
    }
    if let (Some(idx), false) = (&args.idx, pre_launched) {
        builder = builder.index(idx.clone());
    }
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(nri_stub::api::plugin::DEFAULT_SOCKET_PATH));
    if let Some(policy) = failure_policy {
        builder = builder.failure_policy(policy);
    }
    if record_rpc {
        match tokio::net::UnixStream::connect(&socket).await {
            Ok(stream) => {
                let (tapped, tap) = Tapped::new(stream);
                taps.set(tap);
                builder = builder.connection(tapped);
            }
            Err(err) => {
                let err = format!("connect {}: {err}", socket.display());
                return fail(&log, &err);
            }
        }
    } else {
        builder = builder.socket_path(socket);
    }

    let stub = match builder.build() {
        Ok(stub) => stub,
        Err(err) => return fail(&log, &format!("create stub: {err}")),
    };
    match stub.run().await {
        Ok(()) | Err(nri_stub::Error::Disconnected) => {
            log.write(&Entry::new("exit"));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&log, &format!("run: {err}")),
    }
}

fn fail(log: &EventLog, err: &str) -> ExitCode {
    log.write(&Entry {
        error: Some(err.to_string()),
        ..Entry::new("error")
    });
    eprintln!("nri-rs-test-plugin: {err}");
    ExitCode::FAILURE
}
