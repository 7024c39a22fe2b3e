//! What can go wrong starting or driving the emulator.

/// What can go wrong starting or driving the emulator.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The runtime thread could not be started.
    #[error("cannot start the testbed runtime: {0}")]
    Runtime(String),
    /// The port could not be bound.
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// The OS error.
        source: std::io::Error,
    },
    /// Generating the CA / serving certificate failed.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    /// Writing files failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// An object given to [`Testbed::try_upsert`](crate::Testbed::try_upsert) was rejected.
    #[error("object rejected ({code}): {message}")]
    Rejected {
        /// The HTTP status the API would answer.
        code: u16,
        /// The Status message.
        message: String,
    },
}
