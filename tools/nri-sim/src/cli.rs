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
