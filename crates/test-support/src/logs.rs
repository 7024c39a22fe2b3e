//! Log capture for tests: a cloneable writer that keeps everything written to
//! it, to hand to a `tracing` subscriber (`.with_writer(move || captured.clone())`)
//! and read back as text.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Everything written to any clone of it, in order.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's capture: on first use, installs a global `tracing` subscriber
    /// (INFO and above, no ANSI colours) that writes here. A test binary that reads
    /// its logs uses this one capture, since a process has one global subscriber.
    pub fn global() -> &'static CapturedLogs {
        static GLOBAL: OnceLock<CapturedLogs> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let captured = CapturedLogs::new();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::INFO)
                .with_writer(move || writer.clone())
                .finish();
            // Another global subscriber already set means the test binary set one
            // itself; the capture then stays empty, and its assertions say so.
            let _ = tracing::subscriber::set_global_default(subscriber);
            captured
        })
    }

    /// What was written so far, as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
