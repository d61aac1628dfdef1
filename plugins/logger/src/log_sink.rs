//! Where the log goes: standard error, or a file chosen at start or by Configure.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing_subscriber::fmt::MakeWriter;

/// A switchable log destination for `tracing_subscriber`; clones share it.
#[derive(Clone)]
pub struct LogSink {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Default for LogSink {
    fn default() -> Self {
        LogSink {
            out: Arc::new(Mutex::new(Box::new(io::stderr()))),
        }
    }
}

impl LogSink {
    /// Sends the log to `path` from now on (appending; created with mode 0644).
    pub fn open_file(&self, path: &Path) -> io::Result<()> {
        let file: File = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(path)?;
        let mut out = self.lock();
        let _ = out.flush();
        *out = Box::new(file);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Write + Send>> {
        // A writer that panicked mid-write leaves nothing inconsistent behind.
        self.out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One log record's writer.
pub struct SinkWriter<'a>(MutexGuard<'a, Box<dyn Write + Send>>);

impl Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = SinkWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        SinkWriter(self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_to_a_file_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "old\n").unwrap();
        let sink = LogSink::default();
        sink.open_file(&path).unwrap();
        sink.make_writer().write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\nnew\n");
        assert!(sink.open_file(&dir.path().join("no/such/dir/log")).is_err());
    }
}
