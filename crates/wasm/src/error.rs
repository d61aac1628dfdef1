//! [`WasmError`]: why loading or calling a plugin module failed.

use std::path::PathBuf;
use std::time::Duration;

/// Why a plugin module could not be loaded or a call failed. Every variant
/// but [`Plugin`](WasmError::Plugin) names the plugin.
#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    /// The module file could not be read.
    #[error("failed to read WASM plugin {}: {source}", .path.display())]
    Read {
        /// The module file.
        path: PathBuf,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// The shared engine could not be set up, or a blocking entry point
    /// ([`WasmPlugin::load`](crate::WasmPlugin::load),
    /// [`WasmPlugin::call_blocking`](crate::WasmPlugin::call_blocking))
    /// could not start the runtime it runs the module on.
    #[error("failed to set up the WASM engine: {0}")]
    Engine(String),
    /// The module is not valid WebAssembly or could not be compiled.
    #[error("WASM plugin {plugin}: failed to compile: {message}")]
    Compile {
        /// The plugin.
        plugin: String,
        /// The compiler's error.
        message: String,
    },
    /// The module could not be instantiated (a missing import, or its
    /// initialization trapped).
    #[error("WASM plugin {plugin}: failed to instantiate: {message}")]
    Instantiate {
        /// The plugin.
        plugin: String,
        /// What went wrong.
        message: String,
    },
    /// The module's initialization exited with a non-zero code.
    #[error("WASM plugin {plugin}: unexpected exit_code: {code}")]
    ExitCode {
        /// The plugin.
        plugin: String,
        /// The exit code passed to `proc_exit`.
        code: i32,
    },
    /// A required export is missing.
    #[error("WASM plugin {plugin}: {export} is not exported")]
    MissingExport {
        /// The plugin.
        plugin: String,
        /// The export's name.
        export: &'static str,
    },
    /// A required export has the wrong type.
    #[error("WASM plugin {plugin}: {export} has the wrong signature: {message}")]
    Signature {
        /// The plugin.
        plugin: String,
        /// The export's name.
        export: &'static str,
        /// The type mismatch.
        message: String,
    },
    /// `plugin_api_version` returned another version than this host's.
    #[error("WASM plugin {plugin}: API version mismatch, host: {host}, plugin: {version}")]
    ApiVersion {
        /// The plugin.
        plugin: String,
        /// The host's API version.
        host: u64,
        /// The version the module reported.
        version: u64,
    },
    /// The call did not finish within its timeout. The instance was
    /// discarded.
    #[error("WASM plugin {plugin}: {export} did not finish within {timeout:?}")]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The export that was running.
        export: &'static str,
        /// The call's timeout.
        timeout: Duration,
    },
    /// The module trapped (or exited, or hit its memory limit). The
    /// instance was discarded.
    #[error("WASM plugin {plugin}: {export} failed: {message}")]
    Trap {
        /// The plugin.
        plugin: String,
        /// The export that was running.
        export: &'static str,
        /// The trap, with its wasm backtrace if any.
        message: String,
    },
    /// A pointer and length the module returned (or `malloc` gave) lie
    /// outside its memory.
    #[error("WASM plugin {plugin}: {export}: {what} {ptr:#x}+{len} is outside the plugin's memory of {memory} bytes")]
    OutOfBounds {
        /// The plugin.
        plugin: String,
        /// The export that returned the range.
        export: &'static str,
        /// Which buffer.
        what: &'static str,
        /// Start of the range.
        ptr: u32,
        /// Length of the range.
        len: u32,
        /// Size of the memory.
        memory: usize,
    },
    /// The plugin's handler returned an error; this is its text.
    #[error("{0}")]
    Plugin(String),
    /// The plugin is closed. Calls run on the caller's task and hold the
    /// plugin, so this crate no longer returns it; it stays for callers
    /// that match on it.
    #[error("WASM plugin {plugin} is closed")]
    Closed {
        /// The plugin.
        plugin: String,
    },
}

impl WasmError {
    /// Whether the error is a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, WasmError::Timeout { .. })
    }
}
