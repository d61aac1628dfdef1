//! Command-line conventions shared by the nri-rs sample plugins.
//!
//! The plugins take the same flags as the Go plugins of
//! `github.com/containerd/nri`, written the way Go's `flag` package reads them:
//! single-dash long flags (`-idx 10`, `-verbose=false`), booleans as
//! `strconv.ParseBool` reads them, durations such as `1m30s`. They parse them with
//! clap after [`go_args`] has rewritten the single-dash flags into clap's
//! double-dash form.
//!
//! * [`CommonArgs`], [`PluginInfo`], [`parse_args`]: the flags every plugin
//!   takes (`-name`, `-idx`, `-socket-path` or `-socket`, `-verbose`,
//!   `-no-reconnect` or `-reconnect=false`), `-h`/`-help` with the defaults and
//!   the annotations a plugin reads, giving them to the stub and running it
//!   (reconnecting by default);
//! * [`go_args`] and [`ShortFlags`]: argument normalization;
//! * [`parse_go_bool`] and [`parse_duration`]: clap value parsers, Go's
//!   `strconv.ParseBool` and `time.ParseDuration` (from [`nri_api::goparse`]);
//! * [`plugin_name`], [`plugin_index`] and [`is_indexed_program`]: whether a
//!   plugin should give the stub its default name or index, or leave it to the
//!   runtime (`NRI_PLUGIN_NAME`, `NRI_PLUGIN_IDX`) or the program name (`NN-name`);
//! * [`go_yaml_load`], [`resolve_plain`], [`go_integral`]: annotation YAML read
//!   as the Go plugins read it (`sigs.k8s.io/yaml`: YAML 1.1 numbers for plain
//!   scalars, quoted scalars always strings);
//! * [`init_logging`], [`log_filter`] and [`use_colour`]: `tracing` to standard
//!   error, `info` or (with `-verbose`) `debug`, `RUST_LOG` overriding both;
//!   colours only on a terminal and without `NO_COLOR`;
//! * [`deliverable`] and [`report_unapplied`]: at Configure, the events the
//!   runtime's NRI version delivers, and the adjustments the runtime does not
//!   apply (Docker's own NRI: only env and `ro` mounts), said once;
//! * [`ContainerAdjuster`] and [`adjuster_plugin!`]: the whole plugin of a sample
//!   that only adjusts new containers, from what it adjusts and how;
//! * [`init_tracing`]: the same from the common flags, and with the `otel`
//!   feature, `-otlp-endpoint URL` exports the plugin's trace spans to an
//!   OpenTelemetry collector (OTLP/HTTP) in the runtime's trace.
//!
//! ```
//! use clap::Parser;
//! use nri_plugin_util::{go_args, parse_go_bool, ShortFlags};
//!
//! #[derive(Parser)]
//! struct Args {
//!     #[arg(long)]
//!     idx: Option<String>,
//!     #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
//!           default_value = "false", value_parser = parse_go_bool)]
//!     verbose: bool,
//! }
//!
//! let argv = ["nri-example", "-idx", "10", "-verbose=T"];
//! let args = Args::parse_from(go_args(argv, ShortFlags::Keep));
//! assert_eq!(args.idx.as_deref(), Some("10"));
//! assert!(args.verbose);
//! ```

pub mod adjuster;
mod args;
mod common;
mod go_yaml;
mod identity;
mod logging;
mod runtime;

pub use adjuster::{ContainerAdjuster, Unapplied};
pub use args::{go_args, ShortFlags};
pub use common::{
    help_text, parse_args, try_parse_args_from, try_parse_flags, CommonArgs, ConfigFileError,
    PluginArgs, PluginInfo,
};
pub use go_yaml::{go_integral, load as go_yaml_load, resolve_plain, GoYamlError};
pub use identity::{is_indexed_program, plugin_index, plugin_name};
pub use logging::{init_logging, init_tracing, log_filter, use_colour, Tracing};
/// Go's `strconv.ParseBool`, as a clap value parser: the workspace's one
/// boolean parser, [`nri_api::goparse::parse_bool`].
pub use nri_api::goparse::parse_bool as parse_go_bool;
/// Go's `time.ParseDuration`, as a clap value parser: the workspace's one
/// duration parser, [`nri_api::goparse::parse_duration`].
pub use nri_api::goparse::parse_duration;
pub use runtime::{deliverable, report_unapplied};
