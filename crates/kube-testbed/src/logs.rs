//! Log capture for tests: a cloneable writer that keeps everything written to
//! it, to hand to a `tracing` subscriber (`.with_writer(move || captured.clone())`)
//! and read back as text.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Everything written to any clone of it, in order.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
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
