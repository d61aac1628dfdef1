//! The integration tests of nri-stub, one module per file, in one binary
//! (run one file's tests with `cargo test -p nri-stub --test suite <file>::`).

mod blocking;
mod configure;
mod connection;
mod lifecycle;
mod panics;
mod support;
