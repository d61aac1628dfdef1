//! `nri-sim serve`: the simulator as a runtime on a socket. Plugins in any
//! language connect and register; the scenario's steps run, then commands
//! typed on standard input drive the runtime step by step.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use serde_json::{json, Value};

use crate::cli::{Output, ServeArgs};
use crate::observe::LogCapture;
use crate::render::{self, Style};
use crate::runner::{Say, Sim};
use crate::scenario::{Action, ResourcesSpec, Step};

const HELP: &str = "\
commands (pods and containers are created on the fly with default specs):
  run_pod POD                      stop_pod POD          remove_pod POD
  update_pod POD [memory=512Mi] [cpu_shares=512] ...   (the pod's new resources)
  create CTR [pod=POD]             start CTR             stop CTR
  update CTR [memory=512Mi] [cpu_shares=512] [cpu_quota=N] [cpu_period=N] [cpuset_cpus=0-1] [pids=N]
  exit CTR [code=N]                remove CTR
  wait_update [N] [timeout=10s]    sleep 1s
  plugins                          spec CTR (adjusted spec diff)
  help                             quit";

/// The error for a `--socket` whose directory does not exist: likely a
/// typo, so it is reported rather than created.
fn missing_socket_dir(socket: &std::path::Path) -> Option<String> {
    let dir = socket.parent().filter(|d| !d.as_os_str().is_empty())?;
    (!dir.is_dir()).then(|| {
        format!(
            "the directory of --socket {} does not exist: {} (create it first if it is meant)",
            socket.display(),
            dir.display()
        )
    })
}

/// A parsed command line.
#[derive(Debug)]
enum Command {
    Step(Box<Step>, Option<String>),
    Plugins,
    Spec(String),
    Help,
    Quit,
}

fn parse_command(line: &str) -> Result<Option<Command>, String> {
    let mut words = line.split_whitespace();
    let Some(verb) = words.next() else {
        return Ok(None);
    };
    let rest: Vec<&str> = words.collect();
    let (positional, options): (Vec<&str>, Vec<&str>) = rest.iter().partition(|w| !w.contains('='));
    let opt = |key: &str| {
        options.iter().find_map(|o| {
            o.split_once('=')
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        })
    };
    let target = || {
        let example = match verb {
            "sleep" => "1s",
            v if v.contains("pod") => "web",
            _ => "app",
        };
        let what = if verb == "sleep" {
            "a duration"
        } else {
            "a name"
        };
        positional
            .first()
            .map(|s| s.to_string())
            .ok_or_else(|| format!("`{verb}` needs {what}, e.g. `{verb} {example}`"))
    };
    // A step copied from a scenario file (`- create: app`, `run_pod: web`).
    if verb == "-" || verb.ends_with(':') {
        let verb = rest
            .first()
            .filter(|_| verb == "-")
            .copied()
            .unwrap_or(verb)
            .trim_end_matches(':');
        return Err(format!(
            "serve reads commands, not scenario steps: write `{verb} NAME` (see `help`)"
        ));
    }
    let action = match verb {
        "help" | "?" => return Ok(Some(Command::Help)),
        "quit" | "exit_sim" | "q" => return Ok(Some(Command::Quit)),
        "plugins" => return Ok(Some(Command::Plugins)),
        "spec" => return Ok(Some(Command::Spec(target()?))),
        "run_pod" | "run-pod" => Action::RunPod(target()?),
        "stop_pod" | "stop-pod" => Action::StopPod(target()?),
        "remove_pod" | "remove-pod" => Action::RemovePod(target()?),
        "update_pod" | "update-pod" => Action::UpdatePod(target()?),
        "create" => Action::Create(target()?),
        "start" => Action::Start(target()?),
        "update" => Action::Update(target()?),
        "stop" => Action::Stop(target()?),
        "exit" => Action::Exit(target()?),
        "remove" => Action::Remove(target()?),
        "wait_update" | "wait-update" => Action::WaitUpdate {
            count: match positional.first() {
                Some(n) => n.parse().map_err(|_| format!("bad count {n:?}"))?,
                None => 1,
            },
        },
        "sleep" => Action::Sleep(crate::units::parse_duration(&target()?)?),
        other => return Err(format!("unknown command `{other}` (try `help`)")),
    };
    let mut step = Step::new(action);
    if let Some(code) = opt("code") {
        step.exit_code = code
            .parse()
            .map_err(|_| format!("bad exit code {code:?}"))?;
    }
    if let Some(t) = opt("timeout") {
        step.timeout = Some(crate::units::parse_duration(&t)?);
    }
    if matches!(step.action, Action::Update(_) | Action::UpdatePod(_)) {
        let yaml: Vec<String> = options
            .iter()
            .filter_map(|o| o.split_once('='))
            .filter(|(k, _)| *k != "timeout")
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let res: ResourcesSpec = serde_norway::from_str(&format!("{{{}}}", yaml.join(", ")))
            .map_err(|e| format!("bad resources: {e}"))?;
        step.resources = Some(res);
    }
    Ok(Some(Command::Step(Box::new(step), opt("pod"))))
}

/// Where `serve` writes: the human report, or one JSON document per line.
#[derive(Clone, Copy)]
struct Out {
    json: bool,
    style: Style,
    err_style: Style,
}

impl Out {
    /// One JSON line (`--output json`): `{"schema", "type", ...fields}`.
    fn emit(&self, kind: &str, fields: Value) {
        let mut doc = json!({"schema": crate::report::SCHEMA, "type": kind});
        if let (Some(d), Value::Object(f)) = (doc.as_object_mut(), fields) {
            d.extend(f);
        }
        println!("{doc}");
    }

    /// A command's error: on standard error, or a JSON `error` line.
    fn error(&self, msg: &str) {
        if self.json {
            self.emit("error", json!({"error": msg}));
        } else {
            eprintln!("{} {msg}", self.err_style.red("error:"));
        }
    }

    fn step(&self, r: &crate::report::StepReport) {
        if self.json {
            self.emit("step", json!({"step": r}));
        } else {
            let mut out = String::new();
            render::step(&self.style, r, &mut out);
            print!("{out}");
        }
    }
}

/// Runs `serve`. With `output` JSON, standard output is a stream of JSON
/// documents, one per line (see the README).
pub async fn serve(
    args: ServeArgs,
    output: &Output,
    style: Style,
    err_style: Style,
    capture: LogCapture,
    say: Say,
) -> ExitCode {
    let out = Out {
        json: *output == Output::Json,
        style,
        err_style,
    };
    let origin = args
        .scenario
        .as_ref()
        .map_or_else(|| "<interactive>".to_string(), |p| p.display().to_string());
    let fail = |msg: String| {
        if out.json {
            out.emit(
                "error",
                json!({"scenario": origin, "error": msg, "passed": false}),
            );
        } else {
            eprintln!("{} {msg}", err_style.red(&err_style.bold("error:")));
        }
        ExitCode::from(2)
    };
    let mut scenario = match &args.scenario {
        Some(p) => match crate::scenario::load_file(p) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        },
        None => crate::scenario::Scenario {
            origin: "<interactive>".into(),
            base_dir: PathBuf::from("."),
            ..Default::default()
        },
    };
    let socket = args
        .socket
        .clone()
        .or_else(|| scenario.socket.as_ref().map(|s| scenario.base_dir.join(s)))
        .unwrap_or_else(|| PathBuf::from("/tmp/nri-sim.sock"));
    let socket = std::path::absolute(&socket).unwrap_or(socket);
    if let Some(err) = args
        .socket
        .as_ref()
        .and_then(|_| missing_socket_dir(&socket))
    {
        return fail(err);
    }
    scenario.socket = Some(socket.clone());
    let steps = std::mem::take(&mut scenario.steps);
    let metrics = args
        .metrics_addr
        .as_ref()
        .map(|a| (a, nri_integration::metrics::NriMetrics::new()));
    let sink = metrics
        .as_ref()
        .map(|(_, m)| Arc::new(m.clone()) as Arc<dyn nri_adaptation::Metrics>);
    let mut sim = match Sim::with_metrics(scenario, capture, sink) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    // Kept until the end: dropping it stops the endpoint.
    let mut endpoint = None;
    if let Some((addr, m)) = metrics {
        let started = match nri_integration::metrics::http::parse_addr(addr) {
            Ok(a) => nri_integration::metrics::http::MetricsServer::start(a, m).await,
            Err(e) => Err(e),
        };
        match started {
            Ok(server) => {
                eprintln!(
                    "{} metrics on http://{}/metrics",
                    err_style.green("●"),
                    server.addr()
                );
                endpoint = Some(server);
            }
            Err(e) => {
                sim.finish().await;
                return fail(e.to_string());
            }
        }
    }
    if let Err(e) = sim.start(&say).await {
        sim.finish().await;
        return fail(e.to_string());
    }
    eprintln!(
        "{} runtime listening on {} — connect a plugin with its socket option, e.g. `-socket-path {}`",
        err_style.green("●"),
        socket.display(),
        socket.display()
    );
    if args.wait_plugins > 0 {
        let base = sim.plugins().iter().filter(|p| p.kind == "builtin").count();
        let deadline = tokio::time::Instant::now() + args.wait_timeout;
        say(&format!(
            "waiting for {} plugin(s) to connect",
            args.wait_plugins
        ));
        loop {
            let n = sim.plugins().len().saturating_sub(base);
            if n >= args.wait_plugins {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                sim.finish().await;
                return fail(format!(
                    "only {n} of {} plugin(s) connected to {} within {:?}",
                    args.wait_plugins,
                    socket.display(),
                    args.wait_timeout
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    if out.json {
        out.emit(
            "ready",
            json!({"scenario": origin, "socket": socket, "plugins": sim.plugins(),
                   "metrics": endpoint.as_ref().map(|e| format!("http://{}/metrics", e.addr()))}),
        );
    }
    for step in &steps {
        let r = sim.step(step).await;
        out.step(&r);
    }
    if !args.no_stdin {
        let interactive = std::io::stdin().is_terminal();
        if interactive {
            eprintln!("{HELP}");
        }
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        loop {
            if interactive {
                eprint!("nri-sim> ");
            }
            let line = match lines.next_line().await {
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("cannot read standard input: {e}");
                    break;
                }
            };
            let line = line.split('#').next().unwrap_or("").trim().to_string();
            match parse_command(&line) {
                Ok(None) => {}
                Ok(Some(Command::Help)) => eprintln!("{HELP}"),
                Ok(Some(Command::Quit)) => break,
                Ok(Some(Command::Plugins)) => {
                    if out.json {
                        out.emit("plugins", json!({"plugins": sim.plugins()}));
                    } else {
                        for p in sim.plugins() {
                            println!("{} ({}) {}", p.name, p.kind, p.events.join(", "));
                        }
                    }
                }
                Ok(Some(Command::Spec(name))) => match sim.container_report(&name) {
                    Some(c) if out.json => out.emit("spec", json!({"container": c})),
                    Some(c) => {
                        let mut text = String::new();
                        render::container(&style, &c, &mut text);
                        print!("{text}");
                    }
                    None => out.error(&format!("unknown container {name:?}")),
                },
                Ok(Some(Command::Step(step, pod))) => {
                    match &step.action {
                        Action::RunPod(p) => sim.ensure_pod(p),
                        Action::Create(c) => {
                            sim.ensure_container(c, pod.as_deref().unwrap_or("pod0"))
                        }
                        _ => {}
                    }
                    let r = sim.step(&step).await;
                    out.step(&r);
                }
                Err(e) => out.error(&e),
            }
        }
    }
    let report = sim.finish().await;
    if out.json {
        out.emit("report", json!({"report": report}));
    } else {
        let mut text = String::new();
        for c in &report.containers {
            render::container(&style, c, &mut text);
        }
        print!("{text}");
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        if !out.json {
            for f in &report.failures {
                eprintln!("{} {f}", err_style.red("•"));
            }
        }
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_in_a_missing_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(missing_socket_dir(&dir.path().join("nri.sock")), None);
        let typo = dir.path().join("no-such-dir/nri.sock");
        let err = missing_socket_dir(&typo).unwrap();
        assert!(err.contains("does not exist"), "{err}");
        assert!(err.contains("no-such-dir"), "{err}");
        assert!(!dir.path().join("no-such-dir").exists());
    }

    #[test]
    fn commands_parse() {
        let Some(Command::Step(s, pod)) = parse_command("create app pod=web").unwrap() else {
            panic!("not a step");
        };
        assert_eq!(s.action, Action::Create("app".into()));
        assert_eq!(pod.as_deref(), Some("web"));
        let Some(Command::Step(s, _)) =
            parse_command("update app memory=1Gi cpu_shares=512").unwrap()
        else {
            panic!("not a step");
        };
        let r = s.resources.unwrap();
        assert_eq!(r.memory, Some(1 << 30));
        assert_eq!(r.cpu_shares, Some(512));
        let Some(Command::Step(s, _)) = parse_command("exit app code=3").unwrap() else {
            panic!("not a step");
        };
        assert_eq!(s.exit_code, 3);
        assert!(parse_command("fly app")
            .unwrap_err()
            .contains("unknown command"));
        assert!(parse_command("create")
            .unwrap_err()
            .contains("needs a name, e.g. `create app`"));
        assert!(parse_command("run_pod")
            .unwrap_err()
            .contains("e.g. `run_pod web`"));
        assert!(parse_command("sleep")
            .unwrap_err()
            .contains("needs a duration, e.g. `sleep 1s`"));
        for pasted in ["- create: app", "create: app"] {
            let err = parse_command(pasted).unwrap_err();
            assert!(
                err.contains("not scenario steps: write `create NAME`"),
                "{pasted}: {err}"
            );
        }
        assert!(parse_command("update a memory=lots")
            .unwrap_err()
            .contains("bad resources"));
        assert!(parse_command("   ").unwrap().is_none());
    }
}
