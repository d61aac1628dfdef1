//! Random differential testing of the runtime adaptation: random
//! multi-plugin scenarios replayed by the Go reference runtime
//! (`nri-ref-runtime`) and by nri-rs's (`nri-rs-ref-runtime`), whose
//! output documents must be equal after the normalizations of the
//! documented decisions ([`normalize`]).
//!
//! * [`Prng`] — a tiny seeded generator, so a seed means the same cases
//!   everywhere.
//! * [`Case`] — one container and what 1–4 plugins do for it: random
//!   adjustments over every `ContainerAdjustment` field (keys from small
//!   pools, so conflicts, removals and remove-then-set happen often),
//!   container updates (of the container being created, of others),
//!   evictions, handler errors, validator rejections; and its steps
//!   (CreateContainer, then maybe Start/Update/Stop/RemoveContainer).
//! * [`Batch`] — one pool of 2–6 plugin processes (the reference plugin,
//!   `nri-ref-plugin`, pre-installed with a drop-in configuration whose
//!   `by_container` section holds every case's behaviour) and ~100 cases,
//!   replayed as one scenario.
//! * [`run`] — generates the batches of a seed, runs both runtimes side by
//!   side, compares, shrinks divergent cases and returns a [`Summary`].
//!
//! ```no_run
//! use nri_interop::random::{run, Options, RuntimeProgram};
//!
//! let go = nri_interop::harness_bin("nri-ref-runtime");
//! // Go against itself: shows the generator avoids Go's nondeterminism.
//! let opts = Options::new(
//!     1,
//!     200,
//!     RuntimeProgram::new("reference", &go),
//!     RuntimeProgram::new("candidate", &go),
//!     nri_interop::harness_bin("nri-ref-plugin"),
//! );
//! let summary = run(&opts).unwrap();
//! assert!(summary.divergences.is_empty(), "{summary}");
//! ```

mod batch;
mod case;
mod compare;
mod fields;
mod normalize;
mod prng;
mod runner;
mod shrink;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use batch::{Batch, BatchFiles};
pub use case::{case_of_container, container_name, Behavior, Case, Pool, PoolPlugin};
pub use compare::{compare, Divergence};
pub use fields::{ADJUST_FIELDS, UPDATE_FIELDS};
pub use normalize::{
    decision_15_evictions, decision_16_first_rejecting_validator, decision_7_update_pids,
    normalize, rejection_text,
};
pub use prng::Prng;
pub use runner::{run_pair, RuntimeProgram};

use crate::error::{HarnessError, Result};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The seed.
    pub seed: u64,
    /// Number of cases (case numbers `0..cases`).
    pub cases: u64,
    /// Cases per batch (one scenario run per side each).
    pub batch_size: u64,
    /// Run only this case (alone in its batch).
    pub only_case: Option<u64>,
    /// Run only this batch (cases `B * batch_size ..`, whatever `cases`).
    pub only_batch: Option<u64>,
    /// The reference runtime (Go).
    pub reference: RuntimeProgram,
    /// The runtime under test.
    pub candidate: RuntimeProgram,
    /// The plugin program (`nri-ref-plugin`).
    pub plugin: PathBuf,
    /// Keep the files of divergent batches here.
    pub keep_failures: Option<PathBuf>,
    /// Minimize at most this many divergent cases.
    pub shrink: usize,
    /// Time limit of one runtime run.
    pub timeout: Duration,
}

impl Options {
    /// Options with batches of 100, no kept files, shrinking of up to 3
    /// cases and a 120 s limit per run.
    pub fn new(
        seed: u64,
        cases: u64,
        reference: RuntimeProgram,
        candidate: RuntimeProgram,
        plugin: impl Into<PathBuf>,
    ) -> Self {
        Self {
            seed,
            cases,
            batch_size: 100,
            only_case: None,
            only_batch: None,
            reference,
            candidate,
            plugin: plugin.into(),
            keep_failures: None,
            shrink: 3,
            timeout: Duration::from_secs(120),
        }
    }

    fn batches(&self) -> Vec<(u64, Vec<u64>)> {
        let size = self.batch_size.max(1);
        if let Some(k) = self.only_case {
            return vec![(k / size, vec![k])];
        }
        if let Some(b) = self.only_batch {
            return vec![(b, (b * size..(b + 1) * size).collect())];
        }
        let n = self.cases.div_ceil(size);
        (0..n)
            .map(|b| (b, (b * size..((b + 1) * size).min(self.cases)).collect()))
            .collect()
    }
}

/// A minimized divergent case.
#[derive(Debug, Clone)]
pub struct Minimized {
    /// The case number.
    pub case: u64,
    /// The smallest batch that still diverges (one case).
    pub batch: Batch,
    /// Its divergences.
    pub divergences: Vec<Divergence>,
}

impl Minimized {
    /// The minimized case as JSON: plugins (with events), steps, and each
    /// plugin's behaviour.
    pub fn describe(&self) -> Value {
        let Some(case) = self.batch.cases.first() else {
            return Value::Null;
        };
        let plugins: Vec<Value> = self
            .batch
            .pool
            .plugins
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut v = json!({"plugin": p.full_name(), "events": p.events});
                if let Some(b) = case.behaviors.get(&i) {
                    v["by_container"] = b.to_config();
                }
                if !p.sync_updates.is_empty() {
                    v["sync_updates"] = json!(p.sync_updates);
                }
                if let Some(u) = &p.unsolicited {
                    v["unsolicited"] = u.clone();
                }
                v
            })
            .collect();
        json!({"container": case.definition, "steps": case.steps(), "plugins": plugins})
    }
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The seed.
    pub seed: u64,
    /// Cases run.
    pub cases: u64,
    /// Batches run (scenario runs per side).
    pub batches: u64,
    /// Every divergence found.
    pub divergences: Vec<Divergence>,
    /// Minimized divergent cases.
    pub minimized: Vec<Minimized>,
    /// How often each adjustment field was generated.
    pub fields: BTreeMap<String, u64>,
    /// Outcomes of the steps in the reference's output, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Wall time.
    pub elapsed: Duration,
}

impl Summary {
    /// Case numbers with at least one divergence.
    pub fn divergent_cases(&self) -> Vec<u64> {
        let set: std::collections::BTreeSet<u64> =
            self.divergences.iter().filter_map(|d| d.case).collect();
        set.into_iter().collect()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {}: {} cases in {} batches, {:.1} s, {} divergences in {} cases",
            self.seed,
            self.cases,
            self.batches,
            self.elapsed.as_secs_f64(),
            self.divergences.len(),
            self.divergent_cases().len()
        )?;
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "reference outcomes: {}", outcomes.join(", "))?;
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "adjustment fields generated: {}", fields.join(", "))?;
        for d in &self.divergences {
            writeln!(f, "DIVERGENCE {d}")?;
        }
        for m in &self.minimized {
            writeln!(
                f,
                "MINIMIZED seed {} case {}: {}",
                self.seed,
                m.case,
                m.describe()
            )?;
            for d in &m.divergences {
                writeln!(f, "  {}", d.place)?;
                writeln!(f, "    reference: {}", d.reference)?;
                writeln!(f, "    candidate: {}", d.candidate)?;
            }
        }
        Ok(())
    }
}

/// Classifies the reference's result of a lifecycle step.
fn outcome(step: &Value) -> Option<String> {
    let op = step["op"].as_str()?;
    if !matches!(
        op,
        "CreateContainer"
            | "UpdateContainer"
            | "StopContainer"
            | "StartContainer"
            | "RemoveContainer"
    ) {
        return None;
    }
    let err = step["error"].as_str().unwrap_or_default();
    let kind = if err.is_empty() {
        "ok"
    } else if err.contains("both tried to set") {
        "conflict"
    } else if err.contains("rejected container adjustment") {
        "rejected"
    } else if err.contains("during creation") {
        "update-of-created"
    } else if err.contains("rpc error") {
        "plugin-error"
    } else {
        "other-error"
    };
    Some(format!("{op}:{kind}"))
}

/// Runs one batch on both runtimes in `dir`; returns the divergences and
/// the normalized reference document.
pub fn run_batch(opts: &Options, batch: &Batch, dir: &Path) -> Result<(Vec<Divergence>, Value)> {
    let files = batch.write(dir, &opts.plugin)?;
    let (r, c) = run_pair(&opts.reference, &opts.candidate, &files, dir, opts.timeout);
    let run_failure = |which: &str, e: &HarnessError| Divergence {
        seed: batch.seed,
        batch: batch.number,
        case: None,
        place: format!("run ({which})"),
        reference: Value::Null,
        candidate: Value::String(e.to_string()),
    };
    let (mut r, mut c) = match (r, c) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(e), _) => return Err(e),
        (Ok(r), Err(e)) => return Ok((vec![run_failure("candidate", &e)], r)),
    };
    normalize(
        batch,
        &mut r,
        &mut c,
        opts.candidate.path == opts.reference.path,
    );
    Ok((compare(batch.seed, batch.number, &r, &c), r))
}

fn shrink_case(opts: &Options, case: u64, work: &Path) -> Result<Option<Minimized>> {
    let size = opts.batch_size.max(1);
    let mut best = Batch::generate(opts.seed, case / size, [case]);
    let mut attempt = 0u64;
    let mut try_batch = |b: &Batch| -> Result<Vec<Divergence>> {
        attempt += 1;
        let dir = work.join(format!("shrink-{case}-{attempt}"));
        let result = run_batch(opts, b, &dir).map(|(d, _)| d);
        let _ = fs::remove_dir_all(&dir);
        result
    };
    let mut divergences = try_batch(&best)?;
    if divergences.is_empty() {
        return Ok(None);
    }
    'outer: loop {
        for smaller in shrink::candidates(&best) {
            let d = try_batch(&smaller)?;
            if !d.is_empty() {
                best = smaller;
                divergences = d;
                continue 'outer;
            }
        }
        break;
    }
    Ok(Some(Minimized {
        case,
        batch: best,
        divergences,
    }))
}

/// Generates and runs every batch of `opts`, then minimizes up to
/// `opts.shrink` divergent cases.
pub fn run(opts: &Options) -> Result<Summary> {
    let start = Instant::now();
    let work = tempfile::Builder::new()
        .prefix("nri-differential-")
        .tempdir()
        .map_err(|e| HarnessError::io("create work dir", e))?;
    let mut summary = Summary {
        seed: opts.seed,
        ..Summary::default()
    };
    for (number, cases) in opts.batches() {
        let batch = Batch::generate(opts.seed, number, cases);
        for c in &batch.cases {
            for f in &c.fields {
                *summary.fields.entry((*f).to_owned()).or_default() += 1;
            }
        }
        let dir = match &opts.keep_failures {
            Some(keep) => keep.join(format!("seed-{}-batch-{number}", opts.seed)),
            None => work.path().join(format!("batch-{number}")),
        };
        let _ = fs::remove_dir_all(&dir);
        let (divergences, reference) = run_batch(opts, &batch, &dir)?;
        for step in reference["steps"].as_array().into_iter().flatten() {
            if let Some(o) = outcome(step) {
                *summary.outcomes.entry(o).or_default() += 1;
            }
        }
        summary.cases += batch.cases.len() as u64;
        summary.batches += 1;
        if divergences.is_empty() {
            let _ = fs::remove_dir_all(&dir);
        } else if opts.keep_failures.is_some() {
            let text: Vec<String> = divergences.iter().map(ToString::to_string).collect();
            let path = dir.join("divergences.txt");
            fs::write(&path, text.join("\n") + "\n")
                .map_err(|e| HarnessError::io(format!("write {}", path.display()), e))?;
        }
        summary.divergences.extend(divergences);
    }
    let to_shrink: Vec<u64> = summary
        .divergent_cases()
        .into_iter()
        .take(opts.shrink)
        .collect();
    for case in to_shrink {
        if let Some(m) = shrink_case(opts, case, work.path())? {
            summary.minimized.push(m);
        }
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}
