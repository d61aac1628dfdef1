//! `nri-sim` as a library: the scenario format ([`scenario`]), the
//! simulated runtime ([`runner::Sim`]) and its report ([`report`]). The
//! `nri-sim` program is a thin command line over these; the library exists
//! so that scenario parsing can be fuzzed and the simulator embedded in
//! tests.
//!
//! ```
//! let s = nri_sim::scenario::load_str(
//!     "pods: [{name: web}]\ncontainers: [{name: app}]\nsteps: [{run_pod: web}, {create: app}]\n",
//!     "inline.yaml",
//!     std::path::Path::new("."),
//! )
//! .unwrap();
//! assert_eq!(s.steps.len(), 2);
//! ```

pub mod adjust;
pub mod checks;
pub mod cli;
pub mod convert;
pub mod diff;
pub mod features;
pub mod observe;
pub mod plugins;
pub mod recording;
pub mod render;
pub mod replay;
pub mod report;
pub mod runner;
pub mod samples;
pub mod scenario;
pub mod serve;
pub mod spec;
pub mod units;
pub mod world;
