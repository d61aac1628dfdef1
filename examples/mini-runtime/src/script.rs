//! The script the runtime replays: one command per line.
//!
//! ```text
//! # comments and blank lines are skipped
//! wait-plugins 2 [TIMEOUT_MS]
//! pod p0 [--label K=V]... [--annotation K=V]...
//! create p0 c0 [--name NAME] [--env K=V]... [--annotation K=V]... [--label K=V]... [--args "sleep 60"]
//! start c0
//! update c0 [--cpu-shares N] [--cpu-quota N] [--cpu-period N] [--memory-limit BYTES] [--pids-limit N]
//! stop c0
//! exit c0
//! remove c0
//! stop-pod p0
//! remove-pod p0
//! wait-updates 1 [TIMEOUT_MS]
//! sleep 100
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

/// How long `wait-plugins` and `wait-updates` wait unless told.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Longest script accepted, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;

/// One command of the script.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Wait until this many plugins are connected and synchronized.
    WaitPlugins(usize, Duration),
    /// Wait until plugins' container updates have been applied this many
    /// times in total (in replies or on their own).
    WaitUpdates(usize, Duration),
    /// Pause.
    Sleep(Duration),
    /// Run a pod sandbox.
    Pod(PodSpec),
    /// Create a container in a pod.
    Create(CreateSpec),
    /// Start a container.
    Start(String),
    /// Update a container's resources.
    Update(String, Resources),
    /// Stop a container (as a user would).
    Stop(String),
    /// The container exited on its own.
    Exit(String),
    /// Remove a container.
    Remove(String),
    /// Stop a pod.
    StopPod(String),
    /// Remove a pod.
    RemovePod(String),
}

/// `pod ID ...`
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSpec {
    /// Pod id, also its name.
    pub id: String,
    /// `--label K=V`.
    pub labels: BTreeMap<String, String>,
    /// `--annotation K=V`.
    pub annotations: BTreeMap<String, String>,
}

/// `create POD ID ...`
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateSpec {
    /// The pod the container belongs to.
    pub pod: String,
    /// Container id.
    pub id: String,
    /// `--name` (defaults to the id).
    pub name: String,
    /// `--args` (split on whitespace; default `sleep infinity`).
    pub args: Vec<String>,
    /// `--env K=V`, in order.
    pub env: Vec<String>,
    /// `--annotation K=V`.
    pub annotations: BTreeMap<String, String>,
    /// `--label K=V`.
    pub labels: BTreeMap<String, String>,
}

/// `update ID ...`: the resources requested; `None` leaves a value alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// `--cpu-shares`.
    pub cpu_shares: Option<u64>,
    /// `--cpu-quota`.
    pub cpu_quota: Option<i64>,
    /// `--cpu-period`.
    pub cpu_period: Option<u64>,
    /// `--memory-limit`, bytes.
    pub memory_limit: Option<i64>,
    /// `--pids-limit`.
    pub pids_limit: Option<i64>,
}

/// A line that is not a valid command.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("script line {line}: {message}")]
pub struct ScriptError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a whole script.
pub fn parse(text: &str) -> Result<Vec<Step>, ScriptError> {
    if text.len() > MAX_SCRIPT_BYTES {
        return Err(ScriptError {
            line: 0,
            message: format!("script is longer than {MAX_SCRIPT_BYTES} bytes"),
        });
    }
    let mut steps = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let step = parse_line(line).map_err(|message| ScriptError {
            line: n + 1,
            message,
        })?;
        steps.push(step);
    }
    Ok(steps)
}

/// Splits a line into words; `"..."` quotes a word with spaces.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(ch) => word.push(ch),
                    None => return Err("unterminated quote".into()),
                }
            }
        } else {
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() {
                    break;
                }
                word.push(ch);
                chars.next();
            }
        }
        out.push(word);
    }
    Ok(out)
}

fn parse_line(line: &str) -> Result<Step, String> {
    let words = words(line)?;
    let (cmd, rest) = words.split_first().ok_or("empty line")?;
    let mut args = Args::new(rest);
    let step = match cmd.as_str() {
        "wait-plugins" => Step::WaitPlugins(args.number("plugin count")?, args.wait()?),
        "wait-updates" => Step::WaitUpdates(args.number("update count")?, args.wait()?),
        "sleep" => Step::Sleep(Duration::from_millis(args.number("milliseconds")?)),
        "pod" => {
            let mut pod = PodSpec {
                id: args.id("pod id")?,
                ..PodSpec::default()
            };
            while let Some(flag) = args.flag()? {
                match flag.as_str() {
                    "--label" => insert_pair(&mut pod.labels, &args.value(&flag)?)?,
                    "--annotation" => insert_pair(&mut pod.annotations, &args.value(&flag)?)?,
                    other => return Err(format!("pod: unknown option {other}")),
                }
            }
            Step::Pod(pod)
        }
        "create" => {
            let pod = args.id("pod id")?;
            let id = args.id("container id")?;
            let mut spec = CreateSpec {
                pod,
                name: id.clone(),
                id,
                args: vec!["sleep".into(), "infinity".into()],
                ..CreateSpec::default()
            };
            while let Some(flag) = args.flag()? {
                let value = args.value(&flag)?;
                match flag.as_str() {
                    "--name" => spec.name = value,
                    "--args" => spec.args = value.split_whitespace().map(String::from).collect(),
                    "--env" => {
                        split_pair(&value)?;
                        spec.env.push(value);
                    }
                    "--annotation" => insert_pair(&mut spec.annotations, &value)?,
                    "--label" => insert_pair(&mut spec.labels, &value)?,
                    other => return Err(format!("create: unknown option {other}")),
                }
            }
            Step::Create(spec)
        }
        "update" => {
            let id = args.id("container id")?;
            let mut res = Resources::default();
            while let Some(flag) = args.flag()? {
                let value = args.value(&flag)?;
                match flag.as_str() {
                    "--cpu-shares" => res.cpu_shares = Some(number(&flag, &value)?),
                    "--cpu-quota" => res.cpu_quota = Some(number(&flag, &value)?),
                    "--cpu-period" => res.cpu_period = Some(number(&flag, &value)?),
                    "--memory-limit" => res.memory_limit = Some(number(&flag, &value)?),
                    "--pids-limit" => res.pids_limit = Some(number(&flag, &value)?),
                    other => return Err(format!("update: unknown option {other}")),
                }
            }
            if res == Resources::default() {
                return Err("update: no resource given".into());
            }
            Step::Update(id, res)
        }
        "start" => Step::Start(args.id("container id")?),
        "stop" => Step::Stop(args.id("container id")?),
        "exit" => Step::Exit(args.id("container id")?),
        "remove" => Step::Remove(args.id("container id")?),
        "stop-pod" => Step::StopPod(args.id("pod id")?),
        "remove-pod" => Step::RemovePod(args.id("pod id")?),
        other => return Err(format!("unknown command {other:?}")),
    };
    args.finish()?;
    Ok(step)
}

fn number<T: std::str::FromStr>(what: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{what}: {value:?} is not a valid number"))
}

fn split_pair(pair: &str) -> Result<(&str, &str), String> {
    match pair.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k, v)),
        _ => Err(format!("{pair:?} is not KEY=VALUE")),
    }
}

fn insert_pair(map: &mut BTreeMap<String, String>, pair: &str) -> Result<(), String> {
    let (k, v) = split_pair(pair)?;
    map.insert(k.to_string(), v.to_string());
    Ok(())
}

/// The words after the command.
struct Args<'a> {
    words: std::slice::Iter<'a, String>,
}

impl<'a> Args<'a> {
    fn new(words: &'a [String]) -> Self {
        Args {
            words: words.iter(),
        }
    }

    /// A required identifier: not empty, no `/`, not `.` or `..` (it names
    /// a directory under the state directory).
    fn id(&mut self, what: &str) -> Result<String, String> {
        let id = self.words.next().ok_or(format!("missing {what}"))?;
        if id.is_empty() || id.starts_with('-') || id.contains('/') || id == "." || id == ".." {
            return Err(format!("{what} {id:?} is not a valid identifier"));
        }
        Ok(id.clone())
    }

    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, String> {
        let word = self.words.next().ok_or(format!("missing {what}"))?;
        number(what, word)
    }

    /// An optional timeout in milliseconds.
    fn wait(&mut self) -> Result<Duration, String> {
        match self.words.as_slice().first() {
            Some(_) => Ok(Duration::from_millis(self.number("timeout (ms)")?)),
            None => Ok(DEFAULT_WAIT),
        }
    }

    fn flag(&mut self) -> Result<Option<String>, String> {
        match self.words.next() {
            None => Ok(None),
            Some(w) if w.starts_with("--") => Ok(Some(w.clone())),
            Some(w) => Err(format!("expected an option, found {w:?}")),
        }
    }

    fn value(&mut self, flag: &str) -> Result<String, String> {
        self.words
            .next()
            .cloned()
            .ok_or(format!("{flag} needs a value"))
    }

    fn finish(mut self) -> Result<(), String> {
        match self.words.next() {
            None => Ok(()),
            Some(w) => Err(format!("unexpected {w:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command() {
        let steps = parse(
            "# a comment\n\
             wait-plugins 2\n\
             wait-updates 1 500\n\
             sleep 10\n\
             pod p0 --label app=web --annotation a=b\n\
             create p0 c0 --env A=B --env C=D=E --annotation k=v --args \"sh -c true\"\n\
             \n\
             start c0\n\
             update c0 --cpu-shares 512 --memory-limit 1048576\n\
             stop c0\n\
             exit c0\n\
             remove c0\n\
             stop-pod p0\n\
             remove-pod p0\n",
        )
        .unwrap();
        assert_eq!(steps.len(), 12);
        assert_eq!(steps[0], Step::WaitPlugins(2, DEFAULT_WAIT));
        assert_eq!(steps[1], Step::WaitUpdates(1, Duration::from_millis(500)));
        assert_eq!(steps[2], Step::Sleep(Duration::from_millis(10)));
        let Step::Pod(pod) = &steps[3] else {
            panic!("{:?}", steps[3])
        };
        assert_eq!(pod.labels["app"], "web");
        assert_eq!(pod.annotations["a"], "b");
        let Step::Create(c) = &steps[4] else {
            panic!("{:?}", steps[4])
        };
        assert_eq!(
            (c.pod.as_str(), c.id.as_str(), c.name.as_str()),
            ("p0", "c0", "c0")
        );
        assert_eq!(c.env, ["A=B", "C=D=E"]);
        assert_eq!(c.args, ["sh", "-c", "true"]);
        assert_eq!(c.annotations["k"], "v");
        assert_eq!(
            steps[6],
            Step::Update(
                "c0".into(),
                Resources {
                    cpu_shares: Some(512),
                    memory_limit: Some(1 << 20),
                    ..Resources::default()
                }
            )
        );
        assert_eq!(steps[11], Step::RemovePod("p0".into()));
    }

    #[test]
    fn bad_lines_name_their_line() {
        let cases = [
            ("start", "missing container id"),
            ("start c0 c1", "unexpected \"c1\""),
            ("create p0 ../x", "not a valid identifier"),
            ("create p0 c0 --env NOEQUALS", "is not KEY=VALUE"),
            ("create p0 c0 --env", "--env needs a value"),
            ("create p0 c0 --bogus 1", "unknown option --bogus"),
            ("update c0", "no resource given"),
            ("update c0 --cpu-shares -1", "not a valid number"),
            ("sleep soon", "not a valid number"),
            ("launch c0", "unknown command"),
            ("pod \"p0", "unterminated quote"),
        ];
        for (line, want) in cases {
            let err = parse(&format!("sleep 1\n{line}\n")).unwrap_err();
            assert_eq!(err.line, 2, "{line}");
            assert!(err.message.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn refuses_oversized_scripts() {
        let text = "sleep 1\n".repeat(MAX_SCRIPT_BYTES / 8 + 1);
        assert!(parse(&text).unwrap_err().message.contains("longer"));
    }
}
