//! The error type of the harness helpers.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Everything that can go wrong while driving the Go harness programs.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON document could not be written or parsed.
    #[error("{context}: {source}")]
    Json {
        /// What was being parsed or written.
        context: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A process or condition did not finish in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
    /// Building a program of the workspace failed.
    #[error("{what} failed:\n{stderr}")]
    Build {
        /// The build.
        what: String,
        /// cargo's standard error.
        stderr: String,
    },
    /// A harness program produced no usable output.
    #[error("{program} exited with {status} and no output at {output}; stderr:\n{stderr}")]
    NoOutput {
        /// Program name.
        program: String,
        /// Its exit status.
        status: ExitStatus,
        /// Where its output was expected.
        output: PathBuf,
        /// Its standard error.
        stderr: String,
    },
}

impl HarnessError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Self::Json {
            context: context.into(),
            source,
        }
    }
}

/// Result alias of the harness helpers.
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;
