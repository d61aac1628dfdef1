//! `nri-rs-ref-runtime`: the Rust twin of the Go harness's `nri-ref-runtime`,
//! built on nri-adaptation. It replays the same scenario files with the same
//! step semantics and prints the same output document (see
//! `interop/README.md`), so one scenario can be run on both adaptations and
//! the results compared.
//!
//! ```text
//! nri-rs-ref-runtime -scenario FILE [-socket PATH] [-plugin-dir DIR] [-plugin-config-dir DIR] [-output FILE] [-raw]
//! ```
//!
//! Exit status 0, 1 if the adaptation failed to start (the document then
//! has a top-level `error`) or the output could not be written, 2 for bad
//! usage or a bad scenario. Logs go to standard error (`tracing`, filter
//! from `NRI_RS_REF_RUNTIME_LOG`, default `info`).

mod args;
mod record;
mod registrations;
mod runner;
mod scenario;
mod strip;
mod table;

use std::process::ExitCode;
use std::sync::Arc;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::record::Recorder;
use crate::registrations::Registrations;
use crate::scenario::Scenario;

const PROG: &str = "nri-rs-ref-runtime";

fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(args::Parsed::Run(a)) => a,
        Ok(args::Parsed::Help) => {
            eprintln!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{PROG}: {e}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    let Some(scenario_path) = &args.scenario else {
        eprintln!("{PROG}: -scenario is required");
        return ExitCode::from(2);
    };
    let sc = match Scenario::load(scenario_path) {
        Ok(sc) => sc,
        Err(e) => {
            eprintln!("{PROG}: {e}");
            return ExitCode::from(2);
        }
    };

    let rec = Arc::new(Recorder::default());
    let filter = EnvFilter::try_from_env("NRI_RS_REF_RUNTIME_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter),
        )
        .with(Registrations(rec.clone()))
        .init();

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{PROG}: tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let out = rt.block_on(runner::run(&sc, &args.paths, !args.raw, rec));
    drop(rt);

    let text = match record::render(&out) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{PROG}: write output: {e}");
            return ExitCode::from(1);
        }
    };
    let written = match args.output.as_deref() {
        None => std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()),
        Some(p) if p.as_os_str() == "-" => {
            std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
        }
        Some(p) => std::fs::write(p, text),
    };
    if let Err(e) = written {
        eprintln!("{PROG}: write output: {e}");
        return ExitCode::from(1);
    }
    if out.error.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
