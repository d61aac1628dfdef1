//! Sets container rlimits (ulimits) from pod annotations: the plugin type [`plugin::UlimitAdjuster`] and its command line [`cli::Args`], for running it in-process (the `nri-ulimit-adjuster` program is a thin `main` over this).

pub mod cli;
pub mod plugin;
pub mod ulimits;
