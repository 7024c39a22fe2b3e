//! Why a real server could not be started.

use std::path::PathBuf;

/// Why the real server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `cargo xtask real-peers` has not been run on this machine.
    #[error(
        "the real {what} is not built on this machine (no {path}): run `cargo xtask real-peers` \
         (once per machine; `cargo xtask test` runs it first)"
    )]
    NotBuilt {
        /// The component and version.
        what: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A process could not be started.
    #[error("could not start {0}: {1}")]
    Spawn(&'static str, std::io::Error),
    /// A process exited while starting.
    #[error("{what} exited while starting ({status}); {log}")]
    Exited {
        /// Which peer.
        what: &'static str,
        /// Its exit status.
        status: String,
        /// The end of its log.
        log: String,
    },
    /// A process did not become ready in time.
    #[error("{what} was not ready in time; {log}")]
    NotReady {
        /// Which peer.
        what: &'static str,
        /// The end of its log.
        log: String,
    },
    /// A file of the set-up.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// Generating the certificates or keys.
    #[error("generating credentials: {0}")]
    Credentials(String),
    /// A request to the started server (installing the CRDs).
    #[error("{0}")]
    Setup(String),
}
