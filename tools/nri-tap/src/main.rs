//! The `nri-tap` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use nri_tap::proxy;
use nri_tap::record::{Filter, Options, Recorder};

/// Transparent NRI wire tap: forwards plugin/runtime traffic unchanged and
/// records every message as a JSON line.
#[derive(Debug, Parser)]
#[command(name = "nri-tap", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Socket proxy: plugins connect to --listen, the tap to --runtime.
    Proxy {
        /// Socket plugins connect to.
        #[arg(long)]
        listen: PathBuf,
        /// The runtime's NRI socket.
        #[arg(long, default_value = "/var/run/nri/nri.sock")]
        runtime: PathBuf,
        #[command(flatten)]
        rec: RecordArgs,
    },
    /// Wrap a plugin the runtime launches: take its NRI_PLUGIN_SOCKET, give
    /// the plugin a new one, relay between them.
    Wrap {
        #[command(flatten)]
        rec: RecordArgs,
        /// The plugin and its arguments.
        #[arg(last = true, required = true, value_name = "PLUGIN")]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Recording file, one JSON document per line (`-`: standard output
    /// for `proxy`, standard error for `wrap`).
    #[arg(long, short = 'r', default_value = "-")]
    record: PathBuf,
    /// Add each message's raw bytes (hex).
    #[arg(long)]
    raw: bool,
    /// Keep only messages of these plugins (full or base name).
    #[arg(long)]
    plugin: Vec<String>,
    /// Keep only messages about these pods (id or name).
    #[arg(long)]
    pod: Vec<String>,
    /// Keep only messages about these containers (id or name).
    #[arg(long)]
    container: Vec<String>,
    /// Keep only these events / methods (CreateContainer, Synchronize, ...).
    #[arg(long)]
    event: Vec<String>,
}

impl RecordArgs {
    async fn recorder(
        &self,
        wrap: bool,
    ) -> std::io::Result<(Recorder, nri_tap::record::WriterTask)> {
        let options = Options {
            raw: self.raw,
            filter: Filter {
                plugins: self.plugin.clone(),
                pods: self.pod.clone(),
                containers: self.container.clone(),
                events: self.event.clone(),
            },
        };
        if wrap && self.record.as_os_str() == "-" {
            return Ok(Recorder::to_writer(Box::new(tokio::io::stderr()), options));
        }
        Recorder::to_path(&self.record, options).await
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NRI_TAP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nri-tap: cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("nri-tap: {msg}");
        ExitCode::from(2)
    };
    match cli.command {
        Command::Proxy {
            listen,
            runtime,
            rec,
        } => {
            let (recorder, writer) = match rec.recorder(false).await {
                Ok(r) => r,
                Err(e) => return fail(format!("cannot open {}: {e}", rec.record.display())),
            };
            let listener = match proxy::listen(&listen) {
                Ok(l) => l,
                Err(e) => return fail(e.to_string()),
            };
            eprintln!(
                "nri-tap: plugins connect to {}, forwarded to {}",
                listen.display(),
                runtime.display()
            );
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(t) => t,
                    Err(e) => return fail(format!("cannot handle SIGTERM: {e}")),
                };
            tokio::select! {
                () = proxy::serve(listener, runtime, recorder) => {}
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            // The listening socket goes with the tap (SIGINT or SIGTERM), so
            // that a plugin pointed at it is refused instead of waiting.
            if let Err(e) = std::fs::remove_file(&listen) {
                eprintln!("nri-tap: cannot remove {}: {e}", listen.display());
            }
            // Sessions still running keep their recorders; what was
            // recorded so far is flushed line by line already.
            drop(writer);
            ExitCode::SUCCESS
        }
        Command::Wrap { rec, command } => {
            let Some((program, args)) = command.split_first() else {
                return fail("no plugin to run".into());
            };
            let runtime = match std::env::var("NRI_PLUGIN_SOCKET") {
                Ok(v) => match proxy::runtime_from_env(&v) {
                    Ok(s) => s,
                    Err(e) => return fail(e.to_string()),
                },
                Err(_) => return fail(
                    "NRI_PLUGIN_SOCKET is not set: `wrap` runs as a plugin the runtime launches"
                        .into(),
                ),
            };
            let (recorder, writer) = match rec.recorder(true).await {
                Ok(r) => r,
                Err(e) => return fail(format!("cannot open {}: {e}", rec.record.display())),
            };
            let status = proxy::wrap(runtime, program, args, recorder).await;
            // Every recorder is gone: the writer ends after the last line.
            let _ = writer.await;
            match status {
                Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(1)).unwrap_or(1)),
                Err(e) => fail(e.to_string()),
            }
        }
    }
}
