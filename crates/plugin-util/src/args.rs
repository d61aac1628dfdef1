//! Rewriting Go-style flags into the form clap parses.

use std::ffi::OsString;

/// What [`go_args`] does with a single-letter flag such as `-h` or `-v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShortFlags {
    /// Leave it alone, a short flag for clap: `-h` stays clap's help flag.
    Keep,
    /// Make it long, as Go does (Go has no short flags): `-v` becomes `--v`.
    Long,
}

/// Rewrites Go-style single-dash long flags (`-name x`, `-verbose=false`) into
/// clap's double-dash form (`--name x`, `--verbose=false`).
///
/// `-h` and `--h` become `-h`, clap's help flag, as Go's `flag` package
/// shows the usage for both. Left alone: the program name (the first argument), everything after a bare
/// `--`, arguments that do not start with a dash, a lone `-`, arguments that
/// already start with `--`, and single-letter flags when `short` is
/// [`ShortFlags::Keep`]. Arguments are compared as bytes, so ones that are not
/// valid UTF-8 are handled like any other.
///
/// ```
/// use nri_plugin_util::{go_args, ShortFlags};
///
/// let args = go_args(["prog", "-idx", "10", "--verbose", "-h"], ShortFlags::Keep);
/// assert_eq!(args, ["prog", "--idx", "10", "--verbose", "-h"]);
/// let args = go_args(["prog", "-v", "--", "-name"], ShortFlags::Long);
/// assert_eq!(args, ["prog", "--v", "--", "-name"]);
/// ```
pub fn go_args<I, S>(args: I, short: ShortFlags) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let min_len = match short {
        ShortFlags::Keep => 3,
        ShortFlags::Long => 2,
    };
    let mut out = Vec::new();
    let mut flags_done = false;
    for (i, arg) in args.into_iter().enumerate() {
        let arg: OsString = arg.into();
        if i == 0 || flags_done {
            out.push(arg);
            continue;
        }
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" {
            flags_done = true;
            out.push(arg);
        } else if bytes == b"--h" || bytes == b"-h" {
            // Go's `flag` reads `-h` and `--h` as a request for help, whatever
            // `short` says.
            out.push(OsString::from("-h"));
        } else if bytes.len() >= min_len
            && bytes.first() == Some(&b'-')
            && bytes.get(1) != Some(&b'-')
        {
            let mut long = OsString::from("-");
            long.push(&arg);
            out.push(long);
        } else {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_leaves_positional_and_short_arguments_alone() {
        let argv = ["p", "-h", "x", "--", "-name"].map(OsString::from);
        assert_eq!(
            go_args(argv, ShortFlags::Keep),
            ["p", "-h", "x", "--", "-name"].map(OsString::from)
        );
    }

    #[test]
    fn keep_lengthens_long_names_only() {
        assert_eq!(
            go_args(
                ["p", "-name", "x", "-socket=/s", "--idx", "1"],
                ShortFlags::Keep
            ),
            ["p", "--name", "x", "--socket=/s", "--idx", "1"]
        );
    }

    #[test]
    fn long_makes_single_dash_flags_long() {
        let args = go_args(
            ["p", "-socket-path=/x", "-v", "value", "--", "-keep"],
            ShortFlags::Long,
        );
        assert_eq!(
            args,
            ["p", "--socket-path=/x", "--v", "value", "--", "-keep"]
        );
    }

    #[test]
    fn h_is_always_the_help_flag() {
        for short in [ShortFlags::Keep, ShortFlags::Long] {
            assert_eq!(go_args(["p", "-h"], short), ["p", "-h"]);
            assert_eq!(go_args(["p", "--h"], short), ["p", "-h"]);
            assert_eq!(go_args(["p", "-help"], short), ["p", "--help"]);
            assert_eq!(go_args(["p", "--", "-h"], short), ["p", "--", "-h"]);
        }
    }

    #[test]
    fn lone_dash_is_a_value() {
        assert_eq!(go_args(["p", "-"], ShortFlags::Long), ["p", "-"]);
        assert_eq!(go_args(["p", "-"], ShortFlags::Keep), ["p", "-"]);
    }

    #[test]
    fn program_name_is_never_rewritten() {
        assert_eq!(go_args(["-prog", "-x"], ShortFlags::Long), ["-prog", "--x"]);
        assert!(go_args(Vec::<OsString>::new(), ShortFlags::Keep).is_empty());
    }

    #[test]
    fn non_utf8_arguments_are_handled_as_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let odd = std::ffi::OsStr::from_bytes(b"-n\xffme").to_os_string();
        let out = go_args([OsString::from("p"), odd], ShortFlags::Keep);
        assert_eq!(out[1].as_bytes(), b"--n\xffme");
    }
}
