//! The integration tests of nri-ttrpc, one module per file, in one binary
//! (run one file's tests with `cargo test -p nri-ttrpc --test suite <file>::`).

mod busy_poll;
mod calls;
mod client_wire;
mod common;
mod flow_control;
mod inline;
mod metadata;
mod server_wire;
