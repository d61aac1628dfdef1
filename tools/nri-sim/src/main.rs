//! `nri-sim`: an NRI runtime simulator. Runs NRI plugins against scripted
//! pods and containers, without a cluster, and reports what each plugin
//! changed.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

#[cfg(feature = "otel")]
use nri_sim::cli::ServeArgs;
use nri_sim::cli::{Cli, Color, Command, Output};
use nri_sim::observe::{self, LogCapture, LogEvent};
use nri_sim::render::{self, Style};
use nri_sim::runner::{Say, Sim};
use nri_sim::{report, scenario, serve};

/// Exit status: a scenario or set-up error.
const EXIT_SETUP: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout_color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let stderr_color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let human = cli.output == Output::Human;
    let progress_style = Style {
        color: stderr_color,
    };
    let quiet = cli.quiet || !human;

    let progress: Option<observe::Progress> = (!quiet).then(|| {
        let st = progress_style;
        Arc::new(move |e: &LogEvent| {
            let text = match e.message.as_str() {
                "plugin registered" => {
                    format!("plugin {} registered", e.plugin)
                }
                "pre-installed NRI plugin synchronized" | "plugin connected and synchronized" => {
                    format!("plugin {} synchronized", e.plugin)
                }
                _ if e.level == "WARN" || e.level == "ERROR" => st.yellow(&format!(
                    "{}: {}{}",
                    e.plugin,
                    e.message,
                    if e.error.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", e.error)
                    }
                )),
                _ => return,
            };
            eprintln!("{} {text}", st.dim("•"));
        }) as observe::Progress
    });
    let capture = LogCapture::new(progress);
    let filter = cli
        .log
        .clone()
        .or_else(|| std::env::var("NRI_SIM_LOG").ok())
        .unwrap_or_else(|| "off".into());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(stderr_color)
        .with_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("off")));
    // `serve --otlp-endpoint`: the spans of the simulated runtime and of
    // in-process plugins, exported (flushed at exit).
    #[cfg(feature = "otel")]
    let (otel, export) = match &cli.command {
        Some(Command::Serve(ServeArgs {
            otlp_endpoint: Some(endpoint),
            ..
        })) => match nri_integration::otel::otlp(endpoint, "nri-sim") {
            Ok((layer, export)) => (
                Some(layer.with_filter(tracing_subscriber::filter::LevelFilter::INFO)),
                Some(export),
            ),
            Err(e) => {
                eprintln!("nri-sim: {e}");
                return ExitCode::from(EXIT_SETUP);
            }
        },
        _ => (None, None),
    };
    #[cfg(not(feature = "otel"))]
    if let Some(Command::Serve(args)) = &cli.command {
        if args.otlp_endpoint.is_some() {
            eprintln!(
                "nri-sim: {}",
                nri_sim::features::not_built_in("otel", "`serve --otlp-endpoint` (OTLP export)")
            );
            return ExitCode::from(EXIT_SETUP);
        }
    }
    #[cfg(not(feature = "otel"))]
    let otel: Option<tracing_subscriber::layer::Identity> = None;
    let _ = tracing_subscriber::registry()
        .with(capture.clone())
        .with(fmt)
        .with(otel)
        .try_init();

    let say: Say = if quiet {
        Arc::new(|_: &str| {})
    } else {
        Arc::new(move |m: &str| eprintln!("{} {}", progress_style.dim("•"), progress_style.dim(m)))
    };

    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nri-sim: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let style = Style {
        color: stdout_color,
    };
    let code = match cli.command.unwrap_or_default() {
        Command::Run { scenario } => rt.block_on(run(
            scenario.as_deref(),
            &cli.output,
            style,
            Style {
                color: stderr_color,
            },
            capture,
            say,
        )),
        Command::Check { scenario } => match scenario::load_file(&scenario) {
            Ok(s) => {
                println!(
                    "{}: ok ({} plugin(s), {} pod(s), {} container(s), {} step(s))",
                    scenario.display(),
                    s.plugins.len(),
                    s.pods.len(),
                    s.containers.len(),
                    s.steps.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!(
                    "{}",
                    style_error(
                        &Style {
                            color: stderr_color
                        },
                        &e.to_string()
                    )
                );
                ExitCode::from(EXIT_SETUP)
            }
        },
        Command::Example => {
            print!("{}", scenario::DEMO);
            ExitCode::SUCCESS
        }
        Command::Replay(args) => rt.block_on(replay(args, &cli.output, style, progress_style, say)),
        Command::Convert(args) => {
            let rec = nri_sim::recording::Recording::load(&args.recording);
            match rec.and_then(|r| {
                let s = r.select(args.plugin.as_deref(), args.session)?;
                nri_sim::convert::scenario(s, &args.recording.display().to_string())
            }) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{}", style_error(&progress_style, &e.to_string()));
                    ExitCode::from(EXIT_SETUP)
                }
            }
        }
        Command::Serve(args) => rt.block_on(serve::serve(
            args,
            &cli.output,
            style,
            Style {
                color: stderr_color,
            },
            capture,
            say,
        )),
    };
    #[cfg(feature = "otel")]
    if let Some(export) = export {
        export.shutdown();
    }
    code
}

async fn replay(
    args: nri_sim::cli::ReplayArgs,
    output: &Output,
    style: Style,
    err_style: Style,
    say: Say,
) -> ExitCode {
    use nri_sim::replay::{Options, Target};
    let fail = |msg: String| {
        match output {
            Output::Json => {
                let doc = serde_json::json!({
                    "schema": report::SCHEMA,
                    "type": "replay",
                    "recording": args.recording.display().to_string(),
                    "error": msg,
                    "passed": false,
                });
                println!("{doc:#}");
            }
            Output::Human => eprintln!("{}", style_error(&err_style, &msg)),
        }
        ExitCode::from(EXIT_SETUP)
    };
    let target =
        match (&args.sample, &args.socket, args.command.is_empty()) {
            (Some(name), None, true) => Target::Sample {
                name: name.clone(),
                config: args.config.clone().unwrap_or_default(),
            },
            (None, Some(path), true) => Target::Socket(path.clone()),
            (None, None, false) => Target::Launch(args.command.clone()),
            (None, None, true) => return fail(
                "which plugin? `-- PROGRAM ARGS...` launches one, `--socket PATH` waits for one \
                 to connect, `--sample NAME` runs a sample plugin"
                    .into(),
            ),
            _ => return fail("give only one of `-- PROGRAM`, `--socket` and `--sample`".into()),
        };
    let opts = Options {
        recording: args.recording.clone(),
        plugin: args.plugin.clone(),
        session: args.session,
        target,
        wait_timeout: args.wait_timeout,
        settle: args.settle,
        ignore: args.ignore.clone(),
    };
    let report = match nri_sim::replay::replay(&opts, &say).await {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    match output {
        Output::Json => match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(format!("cannot encode the report: {e}")),
        },
        Output::Human => print!("{}", nri_sim::replay::render(&style, &report)),
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn style_error(st: &Style, msg: &str) -> String {
    format!("{} {msg}", st.red(&st.bold("error:")))
}

/// Loads the scenario at `path`, or the demo.
fn load(path: Option<&Path>) -> Result<scenario::Scenario, scenario::ScenarioError> {
    match path {
        Some(p) => scenario::load_file(p),
        None => scenario::load_str(scenario::DEMO, "<demo>", Path::new(".")),
    }
}

async fn run(
    path: Option<&Path>,
    output: &Output,
    style: Style,
    err_style: Style,
    capture: LogCapture,
    say: Say,
) -> ExitCode {
    let fail = |msg: String| {
        match output {
            Output::Json => {
                let doc = serde_json::json!({
                    "schema": report::SCHEMA,
                    "scenario": path.map_or_else(|| "<demo>".to_string(), |p| p.display().to_string()),
                    "error": msg,
                    "passed": false,
                });
                println!("{doc:#}");
            }
            Output::Human => eprintln!("{}", style_error(&err_style, &msg)),
        }
        ExitCode::from(EXIT_SETUP)
    };
    let scenario = match load(path) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let mut sim = match Sim::new(scenario, capture) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    if let Err(e) = sim.start(&say).await {
        sim.finish().await;
        return fail(e.to_string());
    }
    sim.run_all(&say).await;
    let report = sim.finish().await;
    match output {
        Output::Json => match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(format!("cannot encode the report: {e}")),
        },
        Output::Human => print!("{}", render::report(&style, &report)),
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
