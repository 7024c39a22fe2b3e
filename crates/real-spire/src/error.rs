//! Why the real SPIRE could not be started or driven.

use std::path::PathBuf;
use std::time::Duration;

/// Why the real SPIRE could not be started or did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SpireError {
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
    #[error("{what} was not ready within {timeout:?}; {log}")]
    NotReady {
        /// Which peer.
        what: &'static str,
        /// How long it was given.
        timeout: Duration,
        /// The end of its log.
        log: String,
    },
    /// A file of the set-up.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// A `spire-server` command (entry, bundle, token, mint) failed.
    #[error("`spire-server {command}` failed ({status}): {output}")]
    Command {
        /// The subcommand and its arguments.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard output and error (cut to the last lines).
        output: String,
    },
    /// The agent did not serve what was asked for in time.
    #[error("the agent did not serve {what} within {timeout:?} (last seen: {last})")]
    NotServed {
        /// What was awaited (an SVID for an ID, a federated bundle, its withdrawal).
        what: String,
        /// How long it was given.
        timeout: Duration,
        /// What the Workload API answered last.
        last: String,
    },
    /// A PEM file written by `spire-server` did not parse.
    #[error("{0}: not PEM certificates and a key")]
    Pem(PathBuf),
}
