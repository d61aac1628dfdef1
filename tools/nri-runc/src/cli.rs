//! runc's command line, read just enough to find the command, the
//! container id and the options the wrapper acts on. The arguments are
//! never rewritten except for `update --resources` (a file of NRI's
//! result): the real runtime gets them as they came.

/// Global flags of runc and crun that take a value (`--root R`).
const GLOBAL_VALUE_FLAGS: &[&str] = &[
    "--root",
    "--log",
    "--log-format",
    "--log-level",
    "--criu",
    "--rootless",
    "--cgroup-manager",
];

/// An invocation: global flags, the command, and what follows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Invocation {
    /// Global flags (with their values), as given.
    pub global: Vec<String>,
    /// The command (`create`, `start`, ...), if any.
    pub command: Option<String>,
    /// The arguments after the command.
    pub args: Vec<String>,
}

impl Invocation {
    /// Splits `argv` (without the program name).
    pub fn parse(argv: &[String]) -> Invocation {
        let mut inv = Invocation::default();
        let mut i = 0;
        while i < argv.len() {
            let a = &argv[i];
            if !a.starts_with('-') || a == "-" {
                inv.command = Some(a.clone());
                inv.args = argv[i + 1..].to_vec();
                return inv;
            }
            inv.global.push(a.clone());
            if GLOBAL_VALUE_FLAGS.contains(&a.as_str()) {
                if let Some(v) = argv.get(i + 1) {
                    inv.global.push(v.clone());
                    i += 1;
                }
            }
            i += 1;
        }
        inv
    }

    /// The value of global flag `flag` (`--log F` or `--log=F`).
    pub fn global_value(&self, flag: &str) -> Option<&str> {
        value_of(&self.global, flag)
    }
}

fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == flag {
            return it.next().map(String::as_str);
        }
        if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

/// A command's options and positional arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandArgs {
    /// `(flag, value)` pairs; boolean flags have an empty value.
    pub options: Vec<(String, String)>,
    /// Positional arguments (the container id first).
    pub positional: Vec<String>,
}

impl CommandArgs {
    /// Reads `args`; `bool_flags` are the command's flags without a value,
    /// every other flag takes one (`--flag V` or `--flag=V`). After `--`
    /// everything is positional.
    pub fn parse(args: &[String], bool_flags: &[&str]) -> CommandArgs {
        let mut out = CommandArgs::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                out.positional.extend(it.by_ref().cloned());
                break;
            }
            if a.starts_with('-') && a.len() > 1 {
                if let Some((f, v)) = a.split_once('=') {
                    out.options.push((f.to_string(), v.to_string()));
                } else if bool_flags.contains(&a.as_str()) {
                    out.options.push((a.clone(), String::new()));
                } else {
                    out.options
                        .push((a.clone(), it.next().cloned().unwrap_or_default()));
                }
            } else {
                out.positional.push(a.clone());
            }
        }
        out
    }

    /// The value of the first of `flags` given.
    pub fn value(&self, flags: &[&str]) -> Option<&str> {
        self.options
            .iter()
            .find(|(f, _)| flags.contains(&f.as_str()))
            .map(|(_, v)| v.as_str())
    }

    /// The container id: the first positional argument.
    pub fn id(&self) -> Option<&str> {
        self.positional.first().map(String::as_str)
    }
}

/// Boolean flags of `create` and `run` (runc and crun).
pub const CREATE_BOOL_FLAGS: &[&str] = &[
    "--no-pivot",
    "--no-new-keyring",
    "--detach",
    "-d",
    "--keep",
    "--no-subreaper",
    "--systemd-cgroup",
];

/// Boolean flags of `kill`, `delete`, `start`, `pause`, `resume`.
pub const LIFECYCLE_BOOL_FLAGS: &[&str] = &["--all", "-a", "--force", "-f"];

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn docker_style_invocation() {
        let inv = Invocation::parse(&v(
            "--root /run/docker/runtime-runc/moby --log /b/log.json --log-format json --systemd-cgroup create --bundle /b --pid-file /b/init.pid abc",
        ));
        assert_eq!(inv.command.as_deref(), Some("create"));
        assert_eq!(inv.global.len(), 7);
        assert_eq!(inv.global_value("--log"), Some("/b/log.json"));
        assert_eq!(
            inv.global_value("--root"),
            Some("/run/docker/runtime-runc/moby")
        );
        let c = CommandArgs::parse(&inv.args, CREATE_BOOL_FLAGS);
        assert_eq!(c.value(&["--bundle", "-b"]), Some("/b"));
        assert_eq!(c.id(), Some("abc"));
    }

    #[test]
    fn equals_forms_and_no_command() {
        let inv = Invocation::parse(&v("--root=/r --debug"));
        assert_eq!(inv.command, None);
        assert_eq!(inv.global_value("--root"), Some("/r"));
        let c = CommandArgs::parse(&v("-b=/x --no-pivot id1 -- --weird"), CREATE_BOOL_FLAGS);
        assert_eq!(c.value(&["--bundle", "-b"]), Some("/x"));
        assert_eq!(c.positional, ["id1", "--weird"]);
        let k = CommandArgs::parse(&v("--all id SIGTERM"), LIFECYCLE_BOOL_FLAGS);
        assert_eq!(k.positional, ["id", "SIGTERM"]);
        let u = CommandArgs::parse(&v("--resources /r.json --memory 10 id"), &[]);
        assert_eq!(u.value(&["--resources", "-r"]), Some("/r.json"));
        assert_eq!(u.id(), Some("id"));
    }
}
