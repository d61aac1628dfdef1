//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Run NRI plugins against scripted pods and containers, without a cluster.
///
/// Without a command, runs the built-in demo scenario.
#[derive(Debug, Parser)]
#[command(name = "nri-sim", version, about, long_about = None)]
pub struct Cli {
    /// What to do (default: run the demo).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Report format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Human, global = true)]
    pub output: Output,
    /// Colours in the human report.
    #[arg(long, value_enum, default_value_t = Color::Auto, global = true)]
    pub color: Color,
    /// No progress lines on standard error.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Log filter for the NRI libraries on standard error (e.g. `info`,
    /// `nri_adaptation=debug`); also `NRI_SIM_LOG`. Default: off.
    #[arg(long, global = true)]
    pub log: Option<String>,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario (default: the demo) and report.
    Run {
        /// The scenario file (YAML).
        scenario: Option<PathBuf>,
    },
    /// Check a scenario file's syntax and references without running it.
    Check {
        /// The scenario file (YAML).
        scenario: PathBuf,
    },
    /// Print the demo scenario, a starting point for your own.
    Example,
    /// Act as a runtime on a socket: plugins connect, then steps come from
    /// the scenario and/or from standard input.
    Serve(ServeArgs),
    /// Re-drive one plugin with the runtime requests of an nri-tap
    /// recording and report where its answers differ from the recorded
    /// ones (exit status 0: same, 1: different, 2: error).
    Replay(ReplayArgs),
    /// Turn an nri-tap recording into a scenario (printed on standard
    /// output) whose steps are the events one plugin received.
    Convert(ConvertArgs),
}

impl Default for Command {
    fn default() -> Self {
        Command::Run { scenario: None }
    }
}

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Scenario with plugins, pods, containers and steps to run first.
    pub scenario: Option<PathBuf>,
    /// Socket plugins connect to (default: the scenario's, else
    /// /tmp/nri-sim.sock).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Wait for this many plugins (besides builtin ones) before the steps.
    #[arg(long, default_value_t = 0)]
    pub wait_plugins: usize,
    /// How long to wait for them.
    #[arg(long, default_value = "60s", value_parser = crate::units::parse_duration)]
    pub wait_timeout: std::time::Duration,
    /// Do not read commands from standard input (run the scenario's steps
    /// only).
    #[arg(long)]
    pub no_stdin: bool,
    /// Serve Prometheus metrics of the plugin calls on
    /// `http://ADDR/metrics` (off by default). A bare port (`9464`,
    /// `:9464`) binds the loopback address; name the IP to bind another.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// Export the trace spans of the runtime requests and plugin calls
    /// (OpenTelemetry, OTLP/HTTP protobuf) to this endpoint: `host:port`
    /// or `http://host:port` (`/v1/traces` is added) or a URL with its
    /// path. Off by default. Needs the `otel` feature (`cargo install
    /// --path tools/nri-sim --features otel`); without it the option is
    /// refused with that command.
    #[cfg(feature = "otel")]
    #[arg(long, value_name = "URL", value_parser = nri_integration::otel::parse_endpoint)]
    pub otlp_endpoint: Option<String>,
    /// Not built into this nri-sim: OTLP export needs the `otel` feature
    /// (`cargo install --path tools/nri-sim --features otel`).
    #[cfg(not(feature = "otel"))]
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

/// Arguments of `replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The nri-tap recording (JSON lines).
    pub recording: PathBuf,
    /// The recorded plugin to replay (`10-logger` or `logger`); needed when
    /// the recording has several.
    #[arg(long)]
    pub plugin: Option<String>,
    /// The plugin's connection (the recording's `session`) when it
    /// connected several times.
    #[arg(long)]
    pub session: Option<u64>,
    /// Replay against this sample plugin of `plugins/`, run in-process.
    #[arg(long, conflicts_with_all = ["socket"])]
    pub sample: Option<String>,
    /// The sample's configuration (used when the recorded Configure has
    /// none, as for plugins that connect on their own).
    #[arg(long, requires = "sample")]
    pub config: Option<String>,
    /// Wait for the plugin to connect to this socket (an external plugin).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// How long to wait for the plugin to connect and register.
    #[arg(long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub wait_timeout: std::time::Duration,
    /// After the last request, wait at most this long for plugin requests
    /// (UpdateContainers) the recording has and the replay has not seen.
    #[arg(long, default_value = "1s", value_parser = crate::units::parse_duration)]
    pub settle: std::time::Duration,
    /// Leave this field out of every comparison: a JSON pointer as shown in
    /// the report (`/response/adjust/annotations/stamp`). Repeatable.
    #[arg(long, value_name = "POINTER")]
    pub ignore: Vec<String>,
    /// The plugin program and its arguments, launched as a pre-installed
    /// plugin (socket on fd 3).
    #[arg(last = true, value_name = "PLUGIN-COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The nri-tap recording (JSON lines).
    pub recording: PathBuf,
    /// The recorded plugin whose events to use (needed when the recording
    /// has several).
    #[arg(long)]
    pub plugin: Option<String>,
    /// Its connection (`session`) when it connected several times.
    #[arg(long)]
    pub session: Option<u64>,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Readable summary.
    Human,
    /// The JSON report (schema `nri-sim/v1`).
    Json,
}

/// Colour choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    /// When standard output is a terminal and `NO_COLOR` is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn serve_otlp_endpoint_is_checked() {
        let cli =
            Cli::try_parse_from(["nri-sim", "serve", "--otlp-endpoint", "127.0.0.1:4318"]).unwrap();
        match cli.command {
            Some(Command::Serve(args)) => {
                assert_eq!(args.otlp_endpoint.as_deref(), Some("127.0.0.1:4318"))
            }
            other => panic!("{other:?}"),
        }
        let err =
            Cli::try_parse_from(["nri-sim", "serve", "--otlp-endpoint", "https://c"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    }
}
