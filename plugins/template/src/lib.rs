//! The smallest complete NRI plugin: the plugin type [`plugin::Template`] and its command line [`cli::Args`], for running it in-process (the `nri-template` program is a thin `main` over this).

pub mod cli;
pub mod plugin;
