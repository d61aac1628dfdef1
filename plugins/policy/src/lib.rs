//! The policy validator as an NRI plugin: the plugin type [`plugin::PolicyPlugin`], its
//! command line [`cli::Args`], the reload loop [`reload`] and the `/metrics` endpoint
//! [`http`], for running it in-process (the `nri-policy` program is a thin `main` over
//! this).

pub mod cli;
pub mod http;
pub mod plugin;
pub mod reload;
