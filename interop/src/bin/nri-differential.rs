//! `nri-differential`: random differential test of the runtime adaptation.
//!
//! ```text
//! nri-differential [--seed N] [--cases N] [--batch-size N] [--case K] [--batch B]
//!                  [--keep-failures DIR] [--shrink N]
//!                  [--reference PATH] [--candidate PATH|go] [--plugin PATH]
//! ```
//!
//! Generates `--cases` random multi-plugin cases from `--seed` (default: a
//! new seed from the clock, printed), replays them with the Go reference
//! runtime and with `nri-rs-ref-runtime` (built next to this program), and
//! prints a summary and every divergence with its seed and case number.
//! Exit status 0 without divergences, 1 with, 2 on bad usage or when a
//! runtime could not be run. `--candidate go` runs Go against itself.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use nri_interop::random::{run, Options, RuntimeProgram};

const USAGE: &str = "usage: nri-differential [--seed N] [--cases N] [--batch-size N] [--case K] \
[--batch B] [--keep-failures DIR] [--shrink N] [--reference PATH] [--candidate PATH|go] [--plugin PATH]";

struct Args {
    seed: Option<u64>,
    cases: u64,
    batch_size: u64,
    case: Option<u64>,
    batch: Option<u64>,
    keep: Option<PathBuf>,
    shrink: usize,
    reference: Option<PathBuf>,
    candidate: Option<String>,
    plugin: Option<PathBuf>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seed: None,
        cases: 1000,
        batch_size: 100,
        case: None,
        batch: None,
        keep: None,
        shrink: 3,
        reference: None,
        candidate: None,
        plugin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--seed" => a.seed = Some(num(&value)?),
            "--cases" => a.cases = num(&value)?,
            "--batch-size" => a.batch_size = num(&value)?.max(1),
            "--case" => a.case = Some(num(&value)?),
            "--batch" => a.batch = Some(num(&value)?),
            "--keep-failures" => a.keep = Some(PathBuf::from(value)),
            "--shrink" => a.shrink = num(&value)? as usize,
            "--reference" => a.reference = Some(PathBuf::from(value)),
            "--candidate" => a.candidate = Some(value),
            "--plugin" => a.plugin = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("nri-differential: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let go_runtime = || nri_interop::harness_bin("nri-ref-runtime");
    let reference = args.reference.unwrap_or_else(go_runtime);
    let candidate = match args.candidate.as_deref() {
        Some("go") => go_runtime(),
        Some(path) => PathBuf::from(path),
        None => {
            let exe = std::env::current_exe().unwrap_or_default();
            exe.with_file_name("nri-rs-ref-runtime")
        }
    };
    if !candidate.is_file() {
        eprintln!(
            "nri-differential: candidate runtime {} not found (build it: cargo build -p nri-interop --release --bins)",
            candidate.display()
        );
        return ExitCode::from(2);
    }
    let plugin = args
        .plugin
        .unwrap_or_else(|| nri_interop::harness_bin("nri-ref-plugin"));
    let mut opts = Options::new(
        seed,
        args.cases,
        RuntimeProgram::new("reference", reference),
        RuntimeProgram::new("candidate", candidate),
        plugin,
    );
    opts.batch_size = args.batch_size;
    opts.only_case = args.case;
    opts.only_batch = args.batch;
    opts.keep_failures = args.keep;
    opts.shrink = args.shrink;
    println!(
        "nri-differential: seed {seed}, {} cases, reference {}, candidate {}",
        match (args.case, args.batch) {
            (Some(_), _) => 1,
            (None, Some(_)) => args.batch_size,
            (None, None) => args.cases,
        },
        opts.reference.path.display(),
        opts.candidate.path.display()
    );
    match run(&opts) {
        Ok(summary) => {
            print!("{summary}");
            if summary.divergences.is_empty() {
                ExitCode::SUCCESS
            } else {
                println!(
                    "reproduce: nri-differential --seed {seed} --case <K> (batch size {})",
                    opts.batch_size
                );
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("nri-differential: {e}");
            ExitCode::from(2)
        }
    }
}
