//! `nri-hostd [--config FILE]`: the NRI host daemon for `nri-runc`.
//!
//! Exit status: 0 after SIGTERM/SIGINT, 1 when it cannot start, 2 for bad
//! usage. Log filter: `NRI_HOSTD_LOG` (default `info`).
//!
//! `nri-hostd status [--config FILE]` asks the running daemon which plugins
//! run and which pre-installed ones do not (exit status 1 when one does not,
//! or the daemon cannot be reached).
//!
//! `nri-hostd audit [CONTAINER-ID] [--config FILE]` prints the builtin
//! policy validator's audit records the running daemon keeps (one JSON
//! object per line: which plugin set which field to what, the verdict and
//! the violations), of one container or of all; exit status 1 when the
//! validator is not enabled, the container has no record or the daemon
//! cannot be reached.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use nri_hostd::config::DEFAULT_CONFIG_PATH;
use nri_hostd::{server, Hostd, HostdConfig};
use tokio::signal::unix::{signal, SignalKind};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

const USAGE: &str = "usage: nri-hostd [status | audit [CONTAINER-ID]] [--config FILE]   \
     (default /etc/nri/nri-hostd.toml)\n\
     status: the plugins the running daemon runs, and the pre-installed ones it does not\n\
     audit: the policy validator's audit records (JSON lines), of one container or all";

/// Run the daemon, or ask the running one for its plugins (`status`).
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Daemon,
    Status,
    /// `audit [CONTAINER-ID]`.
    Audit(Option<String>),
}

fn parse_args() -> Result<(Mode, PathBuf), String> {
    let mut config = PathBuf::from(DEFAULT_CONFIG_PATH);
    let mut mode = Mode::Daemon;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("status") if mode == Mode::Daemon => mode = Mode::Status,
            Some("audit") if mode == Mode::Daemon => mode = Mode::Audit(None),
            Some(id) if mode == Mode::Audit(None) && !id.starts_with('-') => {
                mode = Mode::Audit(Some(id.to_owned()));
            }
            Some("--config" | "-c") => {
                config = args.next().ok_or("--config needs a file")?.into();
            }
            Some(a) if a.starts_with("--config=") => config = a["--config=".len()..].into(),
            Some("--help" | "-h") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Some("--version" | "-v") => {
                println!("nri-hostd {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
        }
    }
    Ok((mode, config))
}

/// `nri-hostd status`: prints the running plugins and the pre-installed
/// ones that are not running.
fn status(config: &HostdConfig) -> ExitCode {
    use nri_hostd::protocol::{call, Request, Response};
    let socket = &config.hostd.control_socket;
    match call(
        socket,
        &Request::Plugins,
        std::time::Duration::from_secs(10),
    ) {
        Ok(Response::Plugins {
            running,
            not_running,
        }) => {
            println!("running: {}", list(&running));
            if not_running.is_empty() {
                return ExitCode::SUCCESS;
            }
            println!(
                "not running: {} (pre-installed in {}; they failed to start, register or \
                 configure, see nri-hostd's log; containers are created without them)",
                list(&not_running),
                config.nri.plugin_path.display()
            );
            ExitCode::from(1)
        }
        Ok(other) => {
            eprintln!("nri-hostd: unexpected answer from the daemon: {other:?}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("nri-hostd: {e}");
            ExitCode::from(1)
        }
    }
}

/// `nri-hostd audit [ID]`: prints the audit records, one per line.
fn audit(config: &HostdConfig, id: Option<String>) -> ExitCode {
    use nri_hostd::protocol::{call, Request, Response};
    let socket = &config.hostd.control_socket;
    match call(
        socket,
        &Request::Audit { id: id.clone() },
        std::time::Duration::from_secs(10),
    ) {
        Ok(Response::Audit { records }) => {
            for r in &records {
                println!("{r}");
            }
            match id {
                Some(id) if records.is_empty() => {
                    eprintln!(
                        "nri-hostd: no audit record of container {id:?} (not validated, \
                         or older than the records kept)"
                    );
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Ok(Response::Error { message }) => {
            eprintln!("nri-hostd: {message}");
            ExitCode::from(1)
        }
        Ok(other) => {
            eprintln!("nri-hostd: unexpected answer from the daemon: {other:?}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("nri-hostd: {e}");
            ExitCode::from(1)
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(", ")
    }
}

/// Logs to standard error; with `otlp_endpoint`, also exports the NRI
/// spans (the returned handle flushes them at exit).
fn init_tracing(config: &HostdConfig) -> Result<Option<Export>, String> {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(
            EnvFilter::try_from_env("NRI_HOSTD_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        );
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otel")]
    if !config.hostd.otlp_endpoint.is_empty() {
        let (layer, export) = nri_integration::otel::otlp(&config.hostd.otlp_endpoint, "nri-hostd")
            .map_err(|e| e.to_string())?;
        registry
            .with(layer.with_filter(tracing_subscriber::filter::LevelFilter::INFO))
            .init();
        tracing::info!(endpoint = %config.hostd.otlp_endpoint, "exporting traces");
        return Ok(Some(export));
    }
    #[cfg(not(feature = "otel"))]
    let _ = config;
    registry.init();
    Ok(None)
}

#[cfg(feature = "otel")]
type Export = nri_integration::otel::ExportHandle;
#[cfg(not(feature = "otel"))]
type Export = ();

// One thread: a request, the plugin calls it makes and their replies are
// handled where they arrive, without waking another worker thread (each
// cross-thread wake-up costs tens to hundreds of microseconds on a busy or
// virtualized machine, and a runtime command makes several). Blocking work
// (the state file) runs on tokio's blocking threads.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (mode, path) = match parse_args() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nri-hostd: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let config = match HostdConfig::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nri-hostd: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    match mode {
        Mode::Status => return status(&config),
        Mode::Audit(id) => return audit(&config, id),
        Mode::Daemon => {}
    }
    let export = match init_tracing(&config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("nri-hostd: {e}");
            return ExitCode::from(1);
        }
    };
    let code = run(config).await;
    #[cfg(feature = "otel")]
    if let Some(export) = export {
        // Blocks until the batch is sent (or its timeout).
        let _ = tokio::task::spawn_blocking(move || export.shutdown()).await;
    }
    #[cfg(not(feature = "otel"))]
    let _ = export;
    code
}

async fn run(config: HostdConfig) -> ExitCode {
    let socket = config.hostd.control_socket.clone();
    let access = config.hostd.control_access();
    let poll = config.hostd.exit_poll_interval;
    let hostd = match Hostd::start(config).await {
        Ok(h) => Arc::new(h),
        Err(e) => {
            eprintln!("nri-hostd: {e}");
            return ExitCode::from(1);
        }
    };
    // The control socket appears once NRI runs (plugins can connect): a
    // wrapper that reaches the daemon gets NRI.
    let listener = match server::bind(&socket, &access) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("nri-hostd: cannot listen on {}: {e}", socket.display());
            hostd.stop().await;
            return ExitCode::from(1);
        }
    };
    if let Some(addr) = hostd.metrics_addr() {
        tracing::info!("metrics on http://{addr}/metrics");
    }
    tracing::info!(control = %socket.display(), "nri-hostd ready");
    let serving = tokio::spawn(server::serve_listener(hostd.clone(), listener));
    let poller = (!poll.is_zero()).then(|| {
        let hostd = hostd.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            loop {
                tick.tick().await;
                hostd.check_exits().await;
            }
        })
    });
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("nri-hostd: cannot install signal handlers");
        return ExitCode::from(1);
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down");
    serving.abort();
    if let Some(p) = poller {
        p.abort();
    }
    let _ = std::fs::remove_file(&socket);
    hostd.stop().await;
    ExitCode::SUCCESS
}
