//! One real server per test binary: started from synchronous code by the first test
//! that asks, shared by the rest, stopped when the test process ends.

use std::sync::OnceLock;

use crate::{Options, RealServer, StartError};

/// Starts a [`RealServer`] from synchronous code (a test binary's shared server): on a
/// thread of its own with a runtime of its own, so it may be called from any test.
pub fn start_blocking(options: Options) -> Result<RealServer, StartError> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StartError::Setup(format!("a runtime to start the server: {e}")))?;
        runtime.block_on(RealServer::start(options))
    })
    .join()
    .unwrap_or_else(|_| Err(StartError::Setup("the start thread panicked".to_owned())))
}

/// The test binary's one real server with default [`Options`], started by the first
/// test that asks and shared by the rest (stopped when the test process ends).
///
/// # Panics
/// When it cannot be started, with the reason: `cargo xtask real-peers` when the
/// binaries are not built.
pub fn shared() -> &'static RealServer {
    static SHARED: OnceLock<RealServer> = OnceLock::new();
    shared_in(&SHARED, Options::default)
}

/// [`shared`] with a binary's own cell and options (the first caller starts it).
///
/// # Panics
/// As [`shared`].
pub fn shared_in(
    cell: &'static OnceLock<RealServer>,
    options: fn() -> Options,
) -> &'static RealServer {
    cell.get_or_init(|| match start_blocking(options()) {
        Ok(server) => server,
        Err(error) => panic!("the real-server tier cannot run: {error}"),
    })
}
