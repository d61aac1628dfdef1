//! `nri-misbehave`: an NRI plugin that misbehaves on command.
//!
//! See the crate's README for the options and the faults.

use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;

use nri_misbehave::{Fault, FaultKind, Misbehave, Outcome, Target};

const USAGE: &str = "usage: nri-misbehave --fault <kind> [options]

  --fault <kind>          never-register | hang | exit | garbage | oversized-frame |
                          truncated-frame | close-during-sync | flood-updates |
                          duplicate-identity | conflict
  --name <name>           plugin name (default: $NRI_PLUGIN_NAME or misbehave)
  --index <idx>           plugin index (default: $NRI_PLUGIN_IDX or 50)
  --socket <path>         runtime socket (default: /var/run/nri/nri.sock); ignored
                          when NRI_PLUGIN_SOCKET hands over a connection
  --at <method|connect>   when hang, exit, garbage, oversized-frame and
                          truncated-frame fire (default: CreateContainer)
  --annotation <key=val>  what conflict sets (default: owner=nri-misbehave)
  --flood-inflight <n>    unanswered updates at a time (default: 16)
  --flood-count <n>       updates to send (default: until disconnected)
  --flood-container <id>  container named in the updates (default: flood)
  --flood-ignore-replies  stop reading once the flood starts

Exit status: 0 when the runtime closed the connection, 3 when the exit or
close-during-sync fault fired, 1 on errors, 2 on bad usage.";

/// Exit status when the fault ended the process.
const EXIT_FAULT: u8 = 3;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (fault, socket) = match parse(&args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("nri-misbehave: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let handed = match handed_over() {
        Ok(handed) => handed,
        Err(e) => {
            eprintln!("nri-misbehave: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nri-misbehave: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plugin = Misbehave::new(fault);
    tracing::info!(fault = %plugin.fault().kind, plugin = %plugin.fault().full_name(), "starting");
    let result = runtime.block_on(async {
        let target = match handed {
            Some(s) => tokio::net::UnixStream::from_std(s).map(Target::Stream),
            None => Ok(Target::Socket(socket)),
        };
        match target {
            Ok(target) => plugin.run(target).await,
            Err(e) => Err(e.into()),
        }
    });
    match result {
        Ok(Outcome::Disconnected) => {
            tracing::info!("runtime closed the connection");
            ExitCode::SUCCESS
        }
        Ok(outcome) => {
            tracing::info!(?outcome, "fault ended the plugin");
            // Leave at once, as a crashing plugin would.
            std::process::exit(i32::from(EXIT_FAULT));
        }
        Err(e) => {
            eprintln!("nri-misbehave: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The socket a runtime handed over in `NRI_PLUGIN_SOCKET`, if any.
fn handed_over() -> Result<Option<std::os::unix::net::UnixStream>, String> {
    let Ok(value) = std::env::var(nri_api::plugin::PLUGIN_SOCKET_ENV) else {
        return Ok(None);
    };
    if value.is_empty() {
        return Ok(None);
    }
    let fd: i32 = value
        .parse()
        .map_err(|e| format!("invalid NRI_PLUGIN_SOCKET {value:?}: {e}"))?;
    // SAFETY: fcntl(F_GETFD) only inspects the descriptor number.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(format!("NRI_PLUGIN_SOCKET {fd} is not an open descriptor"));
    }
    // SAFETY: the launching runtime handed the open descriptor (checked
    // above) over to this process for the plugin connection; it is taken
    // once and owned by nothing else here.
    let stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    stream
        .set_nonblocking(true)
        .map_err(|e| format!("NRI_PLUGIN_SOCKET {fd}: {e}"))?;
    Ok(Some(stream))
}

/// The fault and the socket path, `None` for `--help`.
fn parse(args: &[String]) -> Result<Option<(Fault, PathBuf)>, String> {
    let mut kind = None;
    let mut name = std::env::var(nri_api::plugin::PLUGIN_NAME_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "misbehave".into());
    let mut index = std::env::var(nri_api::plugin::PLUGIN_IDX_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "50".into());
    let mut socket = PathBuf::from("/var/run/nri/nri.sock");
    let mut at = None;
    let mut annotation = None;
    let mut inflight = None;
    let mut count = None;
    let mut container = None;
    let mut ignore_replies = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(None);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--fault" => kind = Some(value()?.parse::<FaultKind>().map_err(|e| e.to_string())?),
            "--name" => name = value()?,
            "--index" => index = value()?,
            "--socket" => socket = PathBuf::from(value()?),
            "--at" => at = Some(value()?),
            "--annotation" => {
                let v = value()?;
                let (k, v) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--annotation {v:?}: expected key=value"))?;
                annotation = Some((k.to_string(), v.to_string()));
            }
            "--flood-inflight" => {
                inflight = Some(value()?.parse::<usize>().map_err(|e| e.to_string())?)
            }
            "--flood-count" => count = Some(value()?.parse::<u64>().map_err(|e| e.to_string())?),
            "--flood-container" => container = Some(value()?),
            "--flood-ignore-replies" => ignore_replies = true,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    let kind = kind.ok_or("--fault is required")?;
    let mut fault = Fault::new(kind, name, index);
    if let Some(at) = at {
        fault.trigger = at
            .parse()
            .map_err(|e: nri_misbehave::ParseFaultError| e.to_string())?;
    }
    if let Some((k, v)) = annotation {
        fault.conflict_key = k;
        fault.conflict_value = v;
    }
    if let Some(n) = inflight {
        fault.flood_inflight = n;
    }
    fault.flood_count = count.or(fault.flood_count);
    if let Some(c) = container {
        fault.flood_container = c;
    }
    fault.flood_ignore_replies = ignore_replies;
    Ok(Some((fault, socket)))
}
