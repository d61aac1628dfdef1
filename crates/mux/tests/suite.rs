//! The integration tests of nri-mux, one module per file, in one binary
//! (run one file's tests with `cargo test -p nri-mux --test suite <file>::`).

mod common;
mod direct_write;
mod frames;
mod lifecycle;
mod roundtrip;
