//! Logs the NRI requests it subscribes to and can inject an annotation or environment variable: the plugin type [`plugin::Logger`], its [`config::Config`] and command line [`cli::Args`], for running it in-process (the `nri-logger` program is a thin `main` over this).

pub mod cli;
pub mod config;
pub mod log_sink;
pub mod plugin;
