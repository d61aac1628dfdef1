//! Random differential test of the runtime adaptation: 1,000 random
//! multi-plugin cases (fixed seed) replayed by the Go reference runtime and
//! by `nri-rs-ref-runtime`; the output documents must be equal after the
//! normalizations of documented decisions. See `interop/README.md`
//! ("Random differential test") and `nri-differential` for more cases.
//!
//! `NRI_DIFFERENTIAL_KEEP=DIR` keeps the files of divergent batches.

use nri_interop::harness_bin;
use nri_interop::random::{run, Options, RuntimeProgram, Summary, ADJUST_FIELDS};

/// The fixed seed of the CI run.
const SEED: u64 = 20_251_122;

fn options(cases: u64, candidate: RuntimeProgram) -> Options {
    let mut opts = Options::new(
        SEED,
        cases,
        RuntimeProgram::new("reference", harness_bin("nri-ref-runtime")),
        candidate,
        harness_bin("nri-ref-plugin"),
    );
    opts.keep_failures = std::env::var_os("NRI_DIFFERENTIAL_KEEP").map(Into::into);
    opts
}

fn outcome(summary: &Summary, key: &str) -> u64 {
    summary.outcomes.get(key).copied().unwrap_or(0)
}

#[test]
fn random_cases_match_the_go_runtime() {
    let candidate = RuntimeProgram::new("candidate", env!("CARGO_BIN_EXE_nri-rs-ref-runtime"));
    let summary = run(&options(1000, candidate)).expect("run the differential test");
    println!("{summary}");
    assert_eq!(summary.cases, 1000);
    assert_eq!(summary.batches, 10);
    // The cases reach every kind of outcome and every adjustment field.
    for kind in [
        "CreateContainer:ok",
        "CreateContainer:conflict",
        "CreateContainer:rejected",
        "CreateContainer:plugin-error",
        "CreateContainer:update-of-created",
        "UpdateContainer:ok",
        "UpdateContainer:conflict",
        "StopContainer:ok",
        "StartContainer:ok",
        "RemoveContainer:ok",
    ] {
        assert!(outcome(&summary, kind) > 0, "no {kind} in\n{summary}");
    }
    for field in ADJUST_FIELDS {
        let n = summary.fields.get(*field).copied().unwrap_or(0);
        assert!(n >= 50, "field {field} generated only {n} times");
    }
    assert!(
        summary.divergences.is_empty(),
        "divergences from the Go runtime:\n{summary}"
    );
}

/// The generator leaves out what the Go runtime does not do
/// deterministically: Go against itself never diverges.
#[test]
fn the_go_runtime_agrees_with_itself() {
    let go = RuntimeProgram::new("candidate", harness_bin("nri-ref-runtime"));
    let mut opts = options(500, go);
    opts.shrink = 0;
    let summary = run(&opts).expect("run Go against Go");
    println!("{summary}");
    assert_eq!(summary.cases, 500);
    assert!(summary.divergences.is_empty(), "{summary}");
}
