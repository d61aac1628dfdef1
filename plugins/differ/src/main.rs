//! `nri-differ`: registers at several indices around other plugins and logs, for
//! each pod and container event, what the plugins between two indices changed.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use nri_stub::Stub;
use tokio::task::JoinSet;

use nri_plugin_differ::chain::{parse_indices, Chain};
use nri_plugin_differ::cli::{Args, INFO};
use nri_plugin_differ::plugin::{Differ, Options};

/// Logs to `log_file` (appending) or, if it is empty, to standard error.
fn init_logging(verbose: bool, log_file: &str) -> std::io::Result<()> {
    if log_file.is_empty() {
        nri_plugin_util::init_logging(verbose);
        return Ok(());
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(log_file)?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(nri_plugin_util::log_filter(verbose))
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init();
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = nri_plugin_util::parse_args::<Args>(&INFO);
    if let Err(err) = init_logging(args.common.verbose, &args.log_file) {
        nri_plugin_util::init_logging(args.common.verbose);
        tracing::error!("failed to open log file {:?}: {err}", args.log_file);
        return ExitCode::FAILURE;
    }
    let indices = match parse_indices(&args.indices) {
        Ok(indices) => indices,
        Err(err) => {
            tracing::error!("{err}");
            return ExitCode::FAILURE;
        }
    };
    if args.common.idx.is_some() {
        tracing::error!("the differ registers at each of -indices; -idx is not used");
        return ExitCode::FAILURE;
    }
    let chain = Arc::new(Chain::new(&indices));
    let options = Arc::new(Mutex::new(Options {
        verbose_level: args.verbose_level,
        yaml: args.yaml,
    }));

    let mut runs = JoinSet::new();
    for idx in indices {
        let plugin = Differ::new(idx, chain.clone(), options.clone());
        let builder = Stub::builder(plugin)
            .name(args.name())
            .index(format!("{idx:02}"))
            .socket_path(&args.common.socket_path)
            .on_close(move || tracing::info!("[{idx:02}] connection to the runtime lost"));
        let stub = match builder.build() {
            Ok(stub) => stub,
            Err(err) => {
                tracing::error!("[{idx:02}] failed to create plugin stub: {err}");
                return ExitCode::FAILURE;
            }
        };
        let common = args.common.clone();
        runs.spawn(async move { (idx, common.run(&stub).await) });
    }

    // The process ends as soon as one of its connections does for good (like the
    // Go differ, at once with -no-reconnect).
    match runs.join_next().await {
        Some(Ok((idx, Ok(())))) => {
            tracing::info!("[{idx:02}] plugin stopped, exiting");
            ExitCode::SUCCESS
        }
        Some(Ok((idx, Err(err)))) => {
            tracing::error!("[{idx:02}] plugin exited with error {err}");
            ExitCode::FAILURE
        }
        Some(Err(err)) => {
            tracing::error!("plugin task failed: {err}");
            ExitCode::FAILURE
        }
        None => ExitCode::FAILURE,
    }
}
