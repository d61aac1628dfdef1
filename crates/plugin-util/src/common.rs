//! The flags every sample plugin takes, their parsing, and running the stub
//! with them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgMatches, Args, Command};
use nri_api::plugin::DEFAULT_SOCKET_PATH;
use nri_stub::{Backoff, Plugin, Stub, StubBuilder};

use crate::args::{go_args, ShortFlags};
use crate::identity::{plugin_index, plugin_name};

/// What a plugin tells [`parse_args`] about itself, for its defaults and its
/// `-help` text.
#[derive(Debug, Clone, Copy)]
pub struct PluginInfo {
    /// The program's name in the usage text, e.g. `nri-logger`.
    pub program: &'static str,
    /// One line on what the plugin does, at the top of `-help`.
    pub about: &'static str,
    /// Default base name (`-name`).
    pub name: &'static str,
    /// Default index (`-idx`), used when neither the flag, the runtime nor the
    /// program name (`NN-name`) gives one.
    pub index: &'static str,
    /// The annotations the plugin reads, with what each one does; listed at
    /// the end of `-help`.
    pub annotations: &'static [(&'static str, &'static str)],
}

/// The usual flags of an NRI plugin, with the Go samples' spellings:
/// `-name`, `-idx`, `-socket-path` (also `-socket`), `-verbose`,
/// `-log-level`, `-config` (the configuration of a plugin started on its
/// own, see [`plugin_config`](Self::plugin_config)) and `-no-reconnect`
/// (also `-reconnect=false`). Flatten it into a plugin's own clap arguments
/// with `#[command(flatten)]`, or use [`PluginArgs`] for a plugin with no
/// flags of its own.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct CommonArgs {
    /// Plugin name to register to NRI; a runtime that launched the plugin names it
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Plugin index to register to NRI (two digits); a runtime that launched the
    /// plugin numbers it
    #[arg(long, value_name = "NN")]
    pub idx: Option<String>,
    /// Path of the NRI socket file (also -socket)
    #[arg(long = "socket-path", visible_alias = "socket", value_name = "PATH",
          default_value = DEFAULT_SOCKET_PATH)]
    pub socket_path: PathBuf,
    /// Enable (more) verbose logging
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_name = "BOOL",
          value_parser = nri_api::goparse::parse_bool)]
    pub verbose: bool,
    /// Log level: error, warn, info, debug, trace or off (RUST_LOG, when set,
    /// wins); default info, or debug with -verbose
    #[arg(long = "log-level", value_name = "LEVEL", value_parser = parse_log_level)]
    pub log_level: Option<String>,
    /// Configuration file for the plugin when it is started on its own (an
    /// external plugin); a runtime that launched the plugin hands it its
    /// configuration, which wins
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Exit when the connection to the runtime is lost, as the Go sample plugins
    /// do, instead of connecting again
    #[arg(long = "no-reconnect", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_name = "BOOL",
          value_parser = nri_api::goparse::parse_bool)]
    pub no_reconnect: bool,
    /// Connect again, with backoff, when the connection to the runtime is lost;
    /// -reconnect=false is -no-reconnect
    #[arg(long = "reconnect", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_name = "BOOL",
          value_parser = nri_api::goparse::parse_bool)]
    pub reconnect: bool,
    /// Export the plugin's trace spans (`nri.plugin_request`, continuing the
    /// runtime's trace) to this OTLP/HTTP endpoint (`host:port` or
    /// `http://host:port`; see `nri_otel::traces_url`). Off by default.
    #[cfg(feature = "otel")]
    #[arg(long = "otlp-endpoint", value_name = "URL", value_parser = nri_otel::parse_endpoint)]
    pub otlp_endpoint: Option<String>,
}

impl Default for CommonArgs {
    fn default() -> Self {
        CommonArgs {
            name: None,
            idx: None,
            socket_path: PathBuf::from(DEFAULT_SOCKET_PATH),
            verbose: false,
            log_level: None,
            config: None,
            no_reconnect: false,
            reconnect: true,
            #[cfg(feature = "otel")]
            otlp_endpoint: None,
        }
    }
}

impl CommonArgs {
    /// Whether the plugin connects again after losing the runtime: yes, unless
    /// `-no-reconnect` or `-reconnect=false` was given.
    ///
    /// ```
    /// let args = nri_plugin_util::CommonArgs::default();
    /// assert!(args.reconnects());
    /// ```
    pub fn reconnects(&self) -> bool {
        self.reconnect && !self.no_reconnect
    }

    /// The plugin's configuration text, for its `configure` handler: what the
    /// runtime sent (`ConfigureInfo::config`, for a plugin the runtime
    /// launched with a `conf.d` file), else the `-config` file's contents,
    /// else empty. A `-config` file that cannot be read is an error naming it.
    ///
    /// ```
    /// use nri_plugin_util::{try_parse_flags, PluginArgs, PluginInfo};
    ///
    /// const INFO: PluginInfo = PluginInfo {
    ///     program: "nri-mine", about: "Does my things", name: "mine", index: "10",
    ///     annotations: &[],
    /// };
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = dir.path().join("mine.yaml");
    /// std::fs::write(&file, "level: 3\n").unwrap();
    /// let args: PluginArgs = try_parse_flags(&INFO, &["-config", file.to_str().unwrap()]).unwrap();
    /// assert_eq!(args.common.plugin_config("").unwrap(), "level: 3\n");
    /// assert_eq!(args.common.plugin_config("from the runtime").unwrap(), "from the runtime");
    /// ```
    pub fn plugin_config(&self, from_runtime: &str) -> Result<String, ConfigFileError> {
        if !from_runtime.is_empty() {
            return Ok(from_runtime.to_owned());
        }
        match &self.config {
            None => Ok(String::new()),
            Some(path) => std::fs::read_to_string(path).map_err(|source| ConfigFileError {
                path: path.clone(),
                source,
            }),
        }
    }

    /// Gives the stub the plugin's name, index and socket path: the flags
    /// when given; else, unless the runtime (`NRI_PLUGIN_NAME`,
    /// `NRI_PLUGIN_IDX`) or the program name (`NN-name`) gives them, the
    /// defaults of `info`.
    ///
    /// ```no_run
    /// # use nri_stub::{Plugin, Stub};
    /// # #[derive(Default)] struct MyPlugin;
    /// # #[nri_stub::plugin] impl Plugin for MyPlugin {
    /// #   async fn run_pod_sandbox(&self, _: &nri_stub::Context, _: &nri_stub::api::PodSandbox) -> nri_stub::HandlerResult<()> { Ok(()) }
    /// # }
    /// use nri_plugin_util::{CommonArgs, PluginInfo};
    ///
    /// const INFO: PluginInfo = PluginInfo {
    ///     program: "nri-mine",
    ///     about: "Does my things",
    ///     name: "mine",
    ///     index: "10",
    ///     annotations: &[],
    /// };
    /// let args = CommonArgs::default();
    /// let stub = args.configure(Stub::builder(MyPlugin), &INFO).build()?;
    /// assert_eq!(stub.name(), "10-mine");
    /// # Ok::<(), nri_stub::Error>(())
    /// ```
    pub fn configure<P: Plugin>(
        &self,
        builder: StubBuilder<P>,
        info: &PluginInfo,
    ) -> StubBuilder<P> {
        let mut builder = builder.socket_path(&self.socket_path);
        if let Some(name) = plugin_name(self.name.clone(), info.name) {
            builder = builder.name(name);
        }
        if let Some(idx) = plugin_index(self.idx.clone(), info.index) {
            builder = builder.index(idx);
        }
        builder
    }

    /// Runs the stub until the runtime asks the plugin to shut down: with
    /// [`Stub::run_reconnecting`] and the default [`Backoff`] when
    /// [`reconnects`](Self::reconnects), else with one [`Stub::run`].
    ///
    /// ```no_run
    /// # async fn demo(stub: nri_stub::Stub) -> Result<(), nri_stub::Error> {
    /// let args = nri_plugin_util::CommonArgs::default();
    /// args.run(&stub).await
    /// # }
    /// ```
    pub async fn run(&self, stub: &Stub) -> Result<(), nri_stub::Error> {
        if self.reconnects() {
            stub.run_reconnecting(Backoff::default(), |attempt| {
                tracing::info!(attempt, "connecting to the runtime again");
            })
            .await
        } else {
            stub.run().await
        }
    }
}

impl CommonArgs {
    /// A plugin's whole life after its own set-up: gives the stub the flags
    /// ([`configure`](Self::configure)), builds it and [`run`](Self::run)s it,
    /// logging why it ended. The exit code is success when the runtime asked
    /// the plugin to shut down.
    ///
    /// ```no_run
    /// # use nri_stub::{Plugin, Stub};
    /// # #[derive(Default)] struct MyPlugin;
    /// # #[nri_stub::plugin] impl Plugin for MyPlugin {
    /// #   async fn run_pod_sandbox(&self, _: &nri_stub::Context, _: &nri_stub::api::PodSandbox) -> nri_stub::HandlerResult<()> { Ok(()) }
    /// # }
    /// use nri_plugin_util::{CommonArgs, PluginInfo};
    ///
    /// const INFO: PluginInfo = PluginInfo {
    ///     program: "nri-mine",
    ///     about: "Does my things",
    ///     name: "mine",
    ///     index: "10",
    ///     annotations: &[],
    /// };
    ///
    /// #[tokio::main(flavor = "current_thread")]
    /// async fn main() -> std::process::ExitCode {
    ///     let args = CommonArgs::default();
    ///     args.serve(Stub::builder(MyPlugin), &INFO).await
    /// }
    /// ```
    pub async fn serve<P: Plugin>(&self, builder: StubBuilder<P>, info: &PluginInfo) -> ExitCode {
        let stub = match self.configure(builder, info).build() {
            Ok(stub) => stub,
            Err(err) => {
                tracing::error!("failed to create plugin stub: {err}");
                return ExitCode::FAILURE;
            }
        };
        match self.run(&stub).await {
            Ok(()) => {
                tracing::info!(plugin = %stub.name(), "runtime asked the plugin to shut down");
                ExitCode::SUCCESS
            }
            Err(err @ nri_stub::Error::Connect { .. }) => {
                tracing::error!(
                    plugin = %stub.name(),
                    "plugin exited with error: {err} (another socket: -socket-path PATH)"
                );
                ExitCode::FAILURE
            }
            Err(err) => {
                tracing::error!(plugin = %stub.name(), "plugin exited with error: {err}");
                ExitCode::FAILURE
            }
        }
    }
}

/// A `-config` file that cannot be read ([`CommonArgs::plugin_config`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot read the plugin configuration file {} (-config): {source}", path.display())]
pub struct ConfigFileError {
    /// The file given with `-config`.
    pub path: PathBuf,
    /// Why it cannot be read.
    #[source]
    pub source: std::io::Error,
}

/// `-log-level`: one of tracing's level names (or `off`), any case.
fn parse_log_level(text: &str) -> Result<String, String> {
    let level = text.to_ascii_lowercase();
    match level.as_str() {
        "error" | "warn" | "info" | "debug" | "trace" | "off" => Ok(level),
        _ => Err(format!(
            "unknown log level {text:?}: one of error, warn, info, debug, trace, off"
        )),
    }
}

/// The flags of a plugin that has no flags of its own: [`CommonArgs`] only.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Parser)]
pub struct PluginArgs {
    /// The flags every sample plugin takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The `-help` text of a plugin's flags `T` with `info`, as [`parse_args`]
/// prints it.
///
/// ```
/// use nri_plugin_util::{help_text, PluginArgs, PluginInfo};
///
/// const INFO: PluginInfo = PluginInfo {
///     program: "nri-mine",
///     about: "Does my things",
///     name: "mine",
///     index: "10",
///     annotations: &[("mine.example.com/container.NAME", "what to do")],
/// };
/// let help = help_text::<PluginArgs>(&INFO);
/// assert!(help.contains("Does my things"));
/// assert!(help.contains("mine.example.com/container.NAME"));
/// ```
pub fn help_text<T: clap::Parser>(info: &PluginInfo) -> String {
    command(T::command(), info).render_help().to_string()
}

/// Parses a plugin's command line as Go's `flag` package would take it
/// (single-dash long flags, `-h` and `-help` for help), with `info`'s defaults
/// and annotations shown in the help text. Exits with the usage on error.
///
/// ```no_run
/// use clap::Parser;
/// use nri_plugin_util::{parse_args, CommonArgs, PluginInfo};
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     common: CommonArgs,
/// }
///
/// const INFO: PluginInfo = PluginInfo {
///     program: "nri-mine",
///     about: "Does my things",
///     name: "mine",
///     index: "10",
///     annotations: &[("mine.example.com/container.NAME", "what to do")],
/// };
/// let args: Args = parse_args(&INFO);
/// ```
pub fn parse_args<T: clap::Parser>(info: &PluginInfo) -> T {
    match try_parse_args_from(info, std::env::args_os()) {
        Ok(args) => args,
        Err(err) => err.exit(),
    }
}

/// [`parse_args`] on the given arguments (program name first), returning the
/// error (or the help text, as an error of kind `DisplayHelp`) instead of
/// exiting.
///
/// ```
/// use clap::Parser;
/// use nri_plugin_util::{try_parse_args_from, CommonArgs, PluginInfo};
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     common: CommonArgs,
/// }
///
/// const INFO: PluginInfo = PluginInfo {
///     program: "nri-mine",
///     about: "Does my things",
///     name: "mine",
///     index: "10",
///     annotations: &[],
/// };
/// let args: Args = try_parse_args_from(&INFO, ["nri-mine", "-socket", "/run/x.sock", "-no-reconnect"])?;
/// assert_eq!(args.common.socket_path.to_str(), Some("/run/x.sock"));
/// assert!(!args.common.reconnects());
/// # Ok::<(), clap::Error>(())
/// ```
pub fn try_parse_args_from<T, I, S>(info: &PluginInfo, args: I) -> Result<T, clap::Error>
where
    T: clap::Parser,
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let matches: ArgMatches =
        command(T::command(), info).try_get_matches_from(go_args(args, ShortFlags::Keep))?;
    T::from_arg_matches(&matches)
}

/// [`try_parse_args_from`] on `flags`, after the program name of `info`: for
/// tests of a plugin's flags.
///
/// ```
/// use nri_plugin_util::{try_parse_flags, PluginArgs, PluginInfo};
///
/// const INFO: PluginInfo = PluginInfo {
///     program: "nri-mine",
///     about: "Does my things",
///     name: "mine",
///     index: "10",
///     annotations: &[],
/// };
/// let args: PluginArgs = try_parse_flags(&INFO, &["-idx", "05"])?;
/// assert_eq!(args.common.idx.as_deref(), Some("05"));
/// # Ok::<(), clap::Error>(())
/// ```
pub fn try_parse_flags<T: clap::Parser>(
    info: &PluginInfo,
    flags: &[&str],
) -> Result<T, clap::Error> {
    try_parse_args_from(
        info,
        std::iter::once(info.program).chain(flags.iter().copied()),
    )
}

/// The plugin's command with its defaults and annotations in the help text.
fn command(cmd: Command, info: &PluginInfo) -> Command {
    let cmd = cmd
        .name(info.program)
        .bin_name(info.program)
        .about(info.about)
        .mut_arg("name", |a| {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            a.help(format!("{help} [default: {}]", info.name))
        })
        .mut_arg("idx", |a| {
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            a.help(format!("{help} [default: {}]", info.index))
        });
    if info.annotations.is_empty() {
        return cmd;
    }
    let width = info
        .annotations
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("Annotations read:\n");
    for (key, what) in info.annotations {
        text.push_str(&format!("  {key:width$}  {what}\n"));
    }
    cmd.after_help(text)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    #[command(name = "nri-test")]
    struct TestArgs {
        #[command(flatten)]
        common: CommonArgs,
        /// Something of the plugin's own
        #[arg(long)]
        own: Option<String>,
    }

    const INFO: PluginInfo = PluginInfo {
        program: "nri-test",
        about: "Tests things",
        name: "tester",
        index: "42",
        annotations: &[("test.example.com/container.NAME", "what it does")],
    };

    fn parse(args: &[&str]) -> Result<TestArgs, clap::Error> {
        try_parse_args_from(
            &INFO,
            std::iter::once("nri-test").chain(args.iter().copied()),
        )
    }

    fn help(flag: &str) -> String {
        let err = parse(&[flag]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{flag}");
        err.render().to_string()
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.common, CommonArgs::default());
        assert_eq!(a.common.socket_path, PathBuf::from("/var/run/nri/nri.sock"));
        assert!(a.common.reconnects());
    }

    #[cfg(feature = "otel")]
    #[test]
    fn otlp_endpoint_checked_when_parsed() {
        let a = parse(&["-otlp-endpoint", "127.0.0.1:4318"]).unwrap();
        assert_eq!(a.common.otlp_endpoint.as_deref(), Some("127.0.0.1:4318"));
        let a = parse(&["-otlp-endpoint=http://collector:4318"]).unwrap();
        assert_eq!(
            a.common.otlp_endpoint.as_deref(),
            Some("http://collector:4318")
        );
        let err = parse(&["-otlp-endpoint", "https://collector:4318"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(err.to_string().contains("plain http only"), "{err}");
        assert!(help("-h").contains("--otlp-endpoint"));
    }

    #[test]
    fn go_spellings_and_the_old_aliases() {
        let a = parse(&[
            "-name",
            "n",
            "-idx",
            "05",
            "-socket-path",
            "/a",
            "-own",
            "x",
        ])
        .unwrap();
        assert_eq!(a.common.name.as_deref(), Some("n"));
        assert_eq!(a.common.idx.as_deref(), Some("05"));
        assert_eq!(a.common.socket_path, PathBuf::from("/a"));
        assert_eq!(a.own.as_deref(), Some("x"));
        for flag in ["-socket=/b", "--socket=/b", "--socket-path=/b"] {
            assert_eq!(
                parse(&[flag]).unwrap().common.socket_path,
                PathBuf::from("/b")
            );
        }
    }

    #[test]
    fn reconnect_flags() {
        assert!(!parse(&["-no-reconnect"]).unwrap().common.reconnects());
        assert!(!parse(&["-no-reconnect=true"]).unwrap().common.reconnects());
        assert!(parse(&["-no-reconnect=false"]).unwrap().common.reconnects());
        assert!(!parse(&["-reconnect=false"]).unwrap().common.reconnects());
        assert!(!parse(&["--reconnect=0"]).unwrap().common.reconnects());
        assert!(parse(&["-reconnect"]).unwrap().common.reconnects());
        assert!(parse(&["-reconnect=maybe"]).is_err());
        // A boolean flag never takes the next argument as its value.
        let a = parse(&["-verbose", "-idx", "07"]).unwrap();
        assert!(a.common.verbose);
        assert_eq!(a.common.idx.as_deref(), Some("07"));
    }

    #[test]
    fn every_help_spelling_shows_defaults_and_annotations() {
        for flag in ["-h", "-help", "--help", "--h"] {
            let text = help(flag);
            assert!(text.contains("/var/run/nri/nri.sock"), "{flag}: {text}");
            assert!(text.contains("[default: tester]"), "{text}");
            assert!(text.contains("[default: 42]"), "{text}");
            assert!(
                text.contains("test.example.com/container.NAME  what it does"),
                "{text}"
            );
            assert!(text.contains("-no-reconnect"), "{text}");
            assert!(text.contains("Tests things"), "{text}");
            assert!(text.contains("Usage: nri-test"), "{text}");
        }
    }

    #[test]
    fn unknown_flags_are_errors() {
        let err = parse(&["-bogus"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    }
}
