//! Why a peer client could not be built.

use crate::identity::IdentityError;
use crate::material::MaterialError;
use crate::options::{HostError, OptionsError, SecretRef};
use crate::spiffe::SpiffeStartError;
use crate::trust::TrustError;

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerClientError {
    /// The CA Secret does not exist.
    #[error("CA Secret {secret} not found")]
    CaSecretNotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// Reading the CA Secret failed.
    #[error("reading CA Secret {secret} failed: {source}")]
    CaSecretRead {
        /// The Secret.
        secret: SecretRef,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The CA Secret holds no usable trust (the error names the Secret and data key).
    #[error("CA {0}")]
    Trust(#[source] MaterialError),
    /// rustls refused the configuration (e.g. the provider lacks TLS 1.3 suites), or
    /// the platform verifier could not be set up.
    #[error("TLS configuration rejected: {0}")]
    Tls(#[from] rustls::Error),
    /// The options do not describe a usable setup (e.g. a half-set Secret reference).
    #[error(transparent)]
    Config(#[from] OptionsError),
    /// The client identity could not be loaded.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The watched CA trust could not be started (missing or malformed CA Secret,
    /// refused or unsynced watch; the error names the Secret).
    #[error(transparent)]
    CaTrust(#[from] TrustError),
    /// The SPIFFE Workload API could not be used (address unset or invalid, agent
    /// unreachable, no identity issued, no SVID in time; each its own variant).
    #[error(transparent)]
    Spiffe(#[from] SpiffeStartError),
    /// reqwest could not build its client.
    #[error("building the HTTP client failed: {0}")]
    Http(#[source] reqwest::Error),
    /// The peer's `--S-host` is not configured, or not a usable URL (the error names
    /// the flag and quotes the value). Building a client never returns this (Go's
    /// client did not fail on the host either); it is here for a caller that needs the
    /// URL and propagates [`PeerTls::host`](crate::PeerTls::host)'s error with `?`.
    #[error(transparent)]
    Host(#[from] HostError),
}
