//! Registers at several indices and logs what the plugins between two indices changed: the plugin type [`plugin::Differ`], its [`chain::Chain`] and command line [`cli::Args`], for running it in-process (the `nri-differ` program is a thin `main` over this).

pub mod chain;
pub mod cli;
pub mod diff;
pub mod plugin;
