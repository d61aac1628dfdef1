//! NRI's default validator as a plugin: the plugin type [`plugin::Validator`], its [`config::ValidatorSettings`] and command line [`cli::Args`], for running it in-process (the `nri-default-validator` program is a thin `main` over this).

pub mod cli;
pub mod config;
pub mod plugin;
