//! Command line: the flags of every sample plugin ([`CommonArgs`]: `-name`, `-idx`,
//! `-socket-path` or `-socket`, `-verbose`, `-no-reconnect`), and its own, in Go's
//! single-dash style, parsed with clap by [`nri_plugin_util::parse_args`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use nri_plugin_util::{parse_duration, parse_go_bool, CommonArgs, PluginInfo};

/// Name, default index and annotations of the plugin, for `-help` and the defaults.
pub const INFO: PluginInfo = PluginInfo {
    program: "nri-hook-injector",
    about: "Injects OCI hooks configured in hooks.d directories into matching containers",
    name: "hook-injector",
    index: "10",
    annotations: &[(
        "KEY=REGEX in a hook file's when.annotations",
        "the hook is injected when a container annotation matches",
    )],
};

/// Flags of the hook injector (those of the Go plugin, plus `-name`, `-hooks-dir`, `-watch-interval` and `-no-reconnect`).
#[derive(Debug, Clone, Parser)]
pub struct Args {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Disable watching hook directories for new hooks (also -disableWatch)
    #[arg(long = "disable-watch", alias = "disableWatch", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool)]
    pub disable_watch: bool,
    /// Hook directory, lowest precedence first; repeat for several (default:
    /// /usr/share/containers/oci/hooks.d, then /etc/containers/oci/hooks.d)
    #[arg(long = "hooks-dir")]
    pub hooks_dirs: Vec<PathBuf>,
    /// How often to check the hook directories for changes (e.g. 500ms, 2s)
    #[arg(long = "watch-interval", value_parser = parse_duration, default_value = "1s")]
    pub watch_interval: Duration,
}

#[cfg(test)]
mod tests {
    use nri_plugin_util::try_parse_flags;

    use super::*;

    #[test]
    fn own_flags_with_the_go_spelling_kept() {
        let a = try_parse_flags::<Args>(
            &INFO,
            &[
                "-disableWatch",
                "-watch-interval",
                "1m30s",
                "-hooks-dir",
                "/a",
            ],
        )
        .unwrap();
        assert!(a.disable_watch);
        assert_eq!(a.watch_interval, Duration::from_secs(90));
        assert_eq!(a.hooks_dirs, [PathBuf::from("/a")]);
        assert!(
            try_parse_flags::<Args>(&INFO, &["-disable-watch=true"])
                .unwrap()
                .disable_watch
        );
        assert_eq!(
            try_parse_flags::<Args>(&INFO, &[]).unwrap().watch_interval,
            Duration::from_secs(1)
        );
        // As in Go, a duration needs a unit.
        assert!(try_parse_flags::<Args>(&INFO, &["-watch-interval", "2"]).is_err());
    }
}
