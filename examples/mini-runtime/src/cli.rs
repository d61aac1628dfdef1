//! Command-line options.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::script::{self, Step, MAX_SCRIPT_BYTES};

/// Printed with a usage error.
pub const USAGE: &str = "\
usage: nri-mini-runtime [--socket PATH] [--plugin-dir DIR] [--plugin-config-dir DIR]
                        --state-dir DIR SCRIPT

  --socket PATH             accept external plugins there (default: none accepted)
  --plugin-dir DIR          pre-installed plugins to launch, NN-name executables
                            (default: <state-dir>/plugins)
  --plugin-config-dir DIR   their configuration files, NN-name.conf or name.conf
                            (default: <state-dir>/plugin-config)
  --state-dir DIR           <DIR>/<container-id>/config.json are written here
  SCRIPT                    the commands to replay, one per line";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `--socket`.
    pub socket: Option<PathBuf>,
    /// `--plugin-dir`.
    pub plugin_dir: PathBuf,
    /// `--plugin-config-dir`.
    pub plugin_config_dir: PathBuf,
    /// `--state-dir`.
    pub state_dir: PathBuf,
    /// `SCRIPT`.
    pub script: PathBuf,
}

/// A command line that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CliError {
    /// An option without its value.
    #[error("{0} needs a value")]
    MissingValue(String),
    /// An option we do not know.
    #[error("unknown option {0:?}")]
    Unknown(String),
    /// A required part is missing.
    #[error("missing {0}")]
    Missing(&'static str),
    /// More than one script.
    #[error("unexpected argument {0:?}")]
    Extra(String),
}

/// The script could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ScriptFileError {
    /// Reading failed.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The script.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than any script should be.
    #[error("{} is larger than {MAX_SCRIPT_BYTES} bytes", .0.display())]
    TooLarge(PathBuf),
    /// A line is wrong.
    #[error("{}: {source}", .path.display())]
    Parse {
        /// The script.
        path: PathBuf,
        /// The line and what is wrong.
        #[source]
        source: script::ScriptError,
    },
}

impl Options {
    /// Parses the arguments after the program name. Options take their
    /// value as the next argument or after `=`.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Options, CliError> {
        let mut args = args.into_iter();
        let (mut socket, mut plugin_dir, mut plugin_config_dir, mut state_dir, mut script) =
            (None, None, None, None, None);
        while let Some(arg) = args.next() {
            let text = arg.to_string_lossy().into_owned();
            if !text.starts_with("--") {
                if script.replace(PathBuf::from(arg)).is_some() {
                    return Err(CliError::Extra(text));
                }
                continue;
            }
            let (name, inline) = match text.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(OsString::from(v))),
                None => (text.clone(), None),
            };
            let slot = match name.as_str() {
                "--socket" => &mut socket,
                "--plugin-dir" => &mut plugin_dir,
                "--plugin-config-dir" => &mut plugin_config_dir,
                "--state-dir" => &mut state_dir,
                _ => return Err(CliError::Unknown(text)),
            };
            let value = inline
                .or_else(|| args.next())
                .ok_or_else(|| CliError::MissingValue(name.clone()))?;
            *slot = Some(PathBuf::from(value));
        }
        let state_dir: PathBuf = state_dir.ok_or(CliError::Missing("--state-dir"))?;
        Ok(Options {
            socket,
            plugin_dir: plugin_dir.unwrap_or_else(|| state_dir.join("plugins")),
            plugin_config_dir: plugin_config_dir.unwrap_or_else(|| state_dir.join("plugin-config")),
            script: script.ok_or(CliError::Missing("SCRIPT"))?,
            state_dir,
        })
    }

    /// Reads and parses the script.
    pub fn read_script(&self) -> Result<Vec<Step>, ScriptFileError> {
        let path = &self.script;
        let read = |source| ScriptFileError::Read {
            path: path.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(read)?.len();
        if len > MAX_SCRIPT_BYTES as u64 {
            return Err(ScriptFileError::TooLarge(path.clone()));
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        script::parse(&text).map_err(|source| ScriptFileError::Parse {
            path: path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, CliError> {
        Options::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn parses_options_and_defaults() {
        let o = parse(&["--socket", "/s", "--state-dir=/st", "script.txt"]).unwrap();
        assert_eq!(o.socket, Some(PathBuf::from("/s")));
        assert_eq!(o.state_dir, PathBuf::from("/st"));
        assert_eq!(o.plugin_dir, PathBuf::from("/st/plugins"));
        assert_eq!(o.plugin_config_dir, PathBuf::from("/st/plugin-config"));
        assert_eq!(o.script, PathBuf::from("script.txt"));

        let o = parse(&["s", "--state-dir", "/st", "--plugin-dir", "/p"]).unwrap();
        assert_eq!(o.socket, None);
        assert_eq!(o.plugin_dir, PathBuf::from("/p"));
    }

    #[test]
    fn refuses_bad_command_lines() {
        assert_eq!(parse(&["s"]), Err(CliError::Missing("--state-dir")));
        assert_eq!(
            parse(&["--state-dir", "/st"]),
            Err(CliError::Missing("SCRIPT"))
        );
        assert_eq!(
            parse(&["--state-dir"]),
            Err(CliError::MissingValue("--state-dir".into()))
        );
        assert_eq!(
            parse(&["--state-dir", "/st", "a", "b"]),
            Err(CliError::Extra("b".into()))
        );
        assert_eq!(
            parse(&["--verbose", "s"]),
            Err(CliError::Unknown("--verbose".into()))
        );
    }
}
