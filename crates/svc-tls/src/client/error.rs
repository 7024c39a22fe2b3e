//! Why a peer client could not be built.

use crate::identity::IdentityError;
use crate::material::MaterialError;
use crate::options::{HostError, OptionsError};
use crate::origin::SecretRef;
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
    /// Reading the CA Secret failed. The source is the API error as an escaped
    /// excerpt ([`KubeError`](crate::KubeError)): a `Status.message` is the API
    /// server's text, and a remote cluster's API server is not ours. Match
    /// [`KubeError::status_code`](crate::KubeError::status_code) for the status.
    #[error("reading CA Secret {secret} failed")]
    CaSecretRead {
        /// The Secret.
        secret: SecretRef,
        /// The API error, escaped and cut.
        #[source]
        source: watch_ready::KubeError,
    },
    /// The CA Secret holds no usable trust (the error names the Secret and data key).
    #[error("CA trust material")]
    Trust(#[source] MaterialError),
    /// rustls refused the configuration (e.g. the provider lacks TLS 1.3 suites), or
    /// the platform verifier could not be set up.
    #[error("TLS configuration rejected")]
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
    #[error("building the HTTP client failed")]
    Http(#[source] reqwest::Error),
    /// The peer's `--S-host` is not configured, or not a usable URL (the error names
    /// the flag and quotes the value). Building a client never returns this (Go's
    /// client did not fail on the host either); it is here for a caller that needs the
    /// URL and propagates [`PeerTls::host`](crate::PeerTls::host)'s error with `?`.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Why a request through a [`PeerClient`](super::PeerClient) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerRequestError {
    /// The server's certificate was refused after the CA trust changed under this
    /// client: the roots it verifies with were replaced by ones the server does not
    /// chain to, or the trust source withdrew its trust. Connections made before the
    /// change were retired; this is the handshake of a new one.
    #[error(
        "the server is no longer trusted: {trust} {} at {} and the server's certificate \
         was refused",
        if *withdrawn { "withdrew its trust" } else { "changed" },
        crate::material::validity::time_text(*changed_at)
    )]
    TrustChanged {
        /// Where the trust comes from (the CA Secret, the SPIFFE trust domain).
        trust: crate::origin::TrustOrigin,
        /// When this client saw the change.
        changed_at: std::time::SystemTime,
        /// Whether the source withdrew its trust (no server is trusted).
        withdrawn: bool,
        /// reqwest's error (its chain holds the TLS error).
        #[source]
        source: reqwest::Error,
    },
    /// Any other failure, as reqwest reports it.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// The client for the current identity and trust could not be built (nothing
    /// was sent).
    #[error(transparent)]
    Client(#[from] super::PeerClientError),
}

/// Whether `error` failed because a server certificate was refused (rustls's
/// `InvalidCertificate`, wherever it sits in the chain: hyper and tokio-rustls wrap
/// it in `io::Error`s, whose `source()` skips the error they carry).
pub(crate) fn is_certificate_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(rustls::Error::InvalidCertificate(_)) = error.downcast_ref::<rustls::Error>() {
            return true;
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_certificate_error(inner)
        {
            return true;
        }
        next = error.source();
    }
    false
}
