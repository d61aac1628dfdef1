//! `tracing` set-up of the plugins.

use tracing_subscriber::EnvFilter;

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
