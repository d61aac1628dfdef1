//! Command line: Go-style flags (`-name x`, `-name=x`, `--name x`) parsed with clap.

use clap::Parser;
use nri_plugin_util::{go_args, parse_go_bool, ShortFlags};

/// Flags of the writable-cgroups plugin (those of the Go plugin, plus `-name`).
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "nri-writable-cgroups",
    about = "NRI plugin: read-write /sys/fs/cgroup for annotated containers"
)]
pub struct Args {
    /// Plugin name to register to NRI.
    #[arg(long)]
    pub name: Option<String>,
    /// Plugin index to register to NRI.
    #[arg(long)]
    pub idx: Option<String>,
    /// Path of the NRI socket to connect to.
    #[arg(long = "socket-path", alias = "socket")]
    pub socket: Option<String>,
    /// The host's mountinfo file, checked for the nsdelegate option of the cgroup2 mount.
    #[arg(long, default_value = crate::mountinfo::DEFAULT_HOST_MOUNT_FILE)]
    pub host_mount_file: String,
    /// Enable (more) verbose logging.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_parser = parse_go_bool)]
    pub verbose: bool,
}

impl Args {
    /// Parses the process's arguments; exits with usage on error, like Go's `flag`.
    pub fn from_env() -> Args {
        Args::parse_from(go_args(std::env::args_os(), ShortFlags::Keep))
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("nri-writable-cgroups")
            .chain(args.iter().copied())
            .map(OsString::from);
        Args::try_parse_from(go_args(argv, ShortFlags::Keep))
    }

    #[test]
    fn accepts_single_and_double_dash_flags() {
        let a = parse(&["-name", "wc", "--idx", "10", "-socket-path=/run/x.sock"]).unwrap();
        assert_eq!(a.name.as_deref(), Some("wc"));
        assert_eq!(a.idx.as_deref(), Some("10"));
        assert_eq!(a.socket.as_deref(), Some("/run/x.sock"));
        assert_eq!(a.host_mount_file, "/host/proc/1/mountinfo");
        assert!(!a.verbose);
        let a = parse(&["-socket", "/s", "-host-mount-file", "/proc/1/mountinfo"]).unwrap();
        assert_eq!(a.socket.as_deref(), Some("/s"));
        assert_eq!(a.host_mount_file, "/proc/1/mountinfo");
    }

    #[test]
    fn bool_flags_take_go_values_but_never_the_next_argument() {
        assert!(parse(&["-verbose"]).unwrap().verbose);
        assert!(parse(&["-verbose=true"]).unwrap().verbose);
        assert!(!parse(&["-verbose=f"]).unwrap().verbose);
        let a = parse(&["-verbose", "-idx", "05"]).unwrap();
        assert!(a.verbose);
        assert_eq!(a.idx.as_deref(), Some("05"));
        assert!(parse(&["-verbose=maybe"]).is_err());
    }

    #[test]
    fn unknown_flags_are_errors() {
        assert!(parse(&["-bogus", "1"]).is_err());
    }
}
