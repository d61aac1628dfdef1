//! `tracing` set-up of the plugins.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::common::{CommonArgs, PluginInfo};

/// The log filter of a plugin: `RUST_LOG` if it is set and valid; else `debug`
/// with `verbose`, `info` without.
///
/// For a plugin that installs its own subscriber (another writer, no colours).
///
/// ```
/// let filter = nri_plugin_util::log_filter(true);
/// tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).try_init().ok();
/// ```
pub fn log_filter(verbose: bool) -> EnvFilter {
    filter_from(
        std::env::var(EnvFilter::DEFAULT_ENV).ok().as_deref(),
        verbose,
    )
}

/// The log filter of the common flags: `RUST_LOG` if set and valid, else
/// `-log-level`, else as [`log_filter`] with `-verbose`.
fn common_filter(common: &CommonArgs) -> EnvFilter {
    common_filter_from(
        std::env::var(EnvFilter::DEFAULT_ENV).ok().as_deref(),
        common,
    )
}

fn common_filter_from(rust_log: Option<&str>, common: &CommonArgs) -> EnvFilter {
    if let Some(filter) = rust_log.and_then(|d| EnvFilter::try_new(d).ok()) {
        return filter;
    }
    match &common.log_level {
        Some(level) => EnvFilter::new(level),
        None => filter_from(None, common.verbose),
    }
}

/// Whether to colour logs written to standard error: only when it is a
/// terminal and `NO_COLOR` is unset or empty, so files and pipes get plain text.
///
/// ```
/// // Under `cargo test` standard error is captured, not a terminal.
/// let _ = nri_plugin_util::use_colour();
/// ```
pub fn use_colour() -> bool {
    colour_for(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var_os("NO_COLOR"),
    )
}

fn colour_for(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Sends `tracing` logs to standard error, filtered by [`log_filter`], in
/// colour only as [`use_colour`] says. Does nothing if the process already has
/// a global subscriber.
///
/// ```
/// nri_plugin_util::init_logging(false);
/// tracing::info!("plugin starting");
/// ```
pub fn init_logging(verbose: bool) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(log_filter(verbose))
        .with_ansi(use_colour())
        .with_writer(std::io::stderr)
        .try_init();
}

/// What [`init_tracing`] set up; keep it until the plugin exits. Dropping
/// it sends the spans still buffered for export (if any).
#[derive(Debug, Default)]
#[must_use = "dropping it ends the export of trace spans"]
pub struct Tracing {
    #[cfg(feature = "otel")]
    export: Option<nri_otel::ExportHandle>,
}

impl Tracing {
    /// Whether trace spans are exported (`-otlp-endpoint`).
    pub fn exports(&self) -> bool {
        #[cfg(feature = "otel")]
        return self.export.is_some();
        #[cfg(not(feature = "otel"))]
        false
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(export) = self.export.take() {
            export.shutdown();
        }
    }
}

/// [`init_logging`] with the plugin's common flags; with the `otel`
/// feature and `-otlp-endpoint`, the plugin's `nri.plugin_request` spans
/// (and spans its handlers open inside them) are also exported to that
/// OTLP/HTTP endpoint, in the runtime's trace, as service `info.program`.
/// Does nothing if the process already has a global subscriber.
///
/// ```
/// use nri_plugin_util::{CommonArgs, PluginInfo};
///
/// const INFO: PluginInfo = PluginInfo {
///     program: "nri-example", about: "An example.", name: "example", index: "50",
///     annotations: &[],
/// };
/// let tracing = nri_plugin_util::init_tracing(&CommonArgs::default(), &INFO);
/// assert!(!tracing.exports());
/// ```
pub fn init_tracing(common: &CommonArgs, info: &PluginInfo) -> Tracing {
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(use_colour())
        .with_writer(std::io::stderr)
        .with_filter(common_filter(common));
    #[cfg(feature = "otel")]
    {
        let (otel, export) = match common
            .otlp_endpoint
            .as_deref()
            .map(|e| nri_otel::otlp(e, info.program))
        {
            Some(Ok((layer, export))) => (Some(layer), Some(export)),
            Some(Err(e)) => {
                eprintln!("{}: OpenTelemetry export disabled: {e}", info.program);
                (None, None)
            }
            None => (None, None),
        };
        let otel = otel.map(|l| l.with_filter(tracing_subscriber::filter::LevelFilter::INFO));
        if tracing_subscriber::registry()
            .with(fmt)
            .with(otel)
            .try_init()
            .is_err()
        {
            return Tracing::default();
        }
        Tracing { export }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = info;
        let _ = tracing_subscriber::registry().with(fmt).try_init();
        Tracing {}
    }
}

fn filter_from(rust_log: Option<&str>, verbose: bool) -> EnvFilter {
    let default = if verbose { "debug" } else { "info" };
    rust_log
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new(default))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::filter::LevelFilter;

    fn level(rust_log: Option<&str>, verbose: bool) -> Option<LevelFilter> {
        filter_from(rust_log, verbose).max_level_hint()
    }

    #[test]
    fn log_level_flag_sets_the_level_and_rust_log_wins() {
        let mut common = CommonArgs {
            log_level: Some("warn".into()),
            verbose: true,
            ..CommonArgs::default()
        };
        let hint = |rust_log, c: &CommonArgs| common_filter_from(rust_log, c).max_level_hint();
        assert_eq!(hint(None, &common), Some(LevelFilter::WARN));
        assert_eq!(hint(Some("[[bad"), &common), Some(LevelFilter::WARN));
        assert_eq!(hint(Some("trace"), &common), Some(LevelFilter::TRACE));
        common.log_level = None;
        assert_eq!(hint(None, &common), Some(LevelFilter::DEBUG));
    }

    #[test]
    fn verbose_picks_the_default_level() {
        assert_eq!(level(None, false), Some(LevelFilter::INFO));
        assert_eq!(level(None, true), Some(LevelFilter::DEBUG));
    }

    #[test]
    fn rust_log_overrides_verbose() {
        assert_eq!(level(Some("warn"), true), Some(LevelFilter::WARN));
        assert_eq!(level(Some("trace"), false), Some(LevelFilter::TRACE));
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_for(true, None));
        assert!(colour_for(true, Some("".into())));
        assert!(!colour_for(true, Some("1".into())));
        assert!(!colour_for(false, None));
    }

    #[test]
    fn invalid_rust_log_falls_back_to_the_default() {
        assert_eq!(level(Some("x=nope"), true), Some(LevelFilter::DEBUG));
    }
}
