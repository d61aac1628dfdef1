//! WebAssembly plugins for NRI.
//!
//! A plugin module is a WASI preview 1 *reactor*: the host runs its
//! `_initialize`, checks that `plugin_api_version` returns 1, and then calls
//! one export per NRI request (`plugin_configure`, `plugin_create_container`,
//! … — see [`WasmEvent`]) with a protobuf-encoded request in the module's
//! memory. The module answers with a pointer and size packed into a `u64`.
//! The module can log through the host import `env.log`. See the
//! repository's `docs/wasm.md` for the whole ABI.
//!
//! This crate only moves bytes; encoding requests and decoding responses
//! (the `nri-api` types) is the caller's business.
//!
//! ```no_run
//! use std::time::Duration;
//! use nri_wasm::{WasmEvent, WasmOptions, WasmPlugin};
//!
//! # async fn f() -> Result<(), nri_wasm::WasmError> {
//! let plugin = WasmPlugin::load("/opt/nri/plugins/10-logger".as_ref(), "10-logger",
//!     &WasmOptions::default())?;
//! let reply = plugin.call(WasmEvent::Configure, Vec::new(), Duration::from_secs(2)).await?;
//! # let _ = reply; Ok(()) }
//! ```

mod engine;
mod error;
mod event;
mod plugin;

pub use error::WasmError;
pub use event::WasmEvent;
pub use plugin::{default_cache_dir, WasmOptions, WasmPlugin, API_VERSION};

/// The first eight bytes of a WebAssembly module: `\0asm` and version 1.
pub const WASM_MAGIC: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Whether `bytes` start with [`WASM_MAGIC`].
pub fn has_wasm_magic(bytes: &[u8]) -> bool {
    bytes.starts_with(&WASM_MAGIC)
}
