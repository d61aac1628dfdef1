//! The integration tests of nri-adaptation, one module per file, in one binary
//! (run one file's tests with `cargo test -p nri-adaptation --test suite <file>::`).

mod beyond;
mod beyond_sync;
mod external;
mod future_sizes;
mod raw;
mod scenarios;
mod soak;
mod support;
mod untrusted;
mod wasm;
