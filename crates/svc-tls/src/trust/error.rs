//! Why a trust verifier could not be built, and why one handshake-time reload of the
//! trust failed.

use super::source::ReloadError;
use crate::origin::TrustOrigin;
use crate::watch::{ConfigMapSourceError, SourceError};

/// Why a trust verifier could not be built (start-up).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The CA Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The CA ConfigMap's cache could not be started (refused, timed out).
    #[error(transparent)]
    ConfigMapSource(#[from] ConfigMapSourceError),
    /// The source holds no usable root set now: the CA Secret does not exist or holds
    /// no usable root (naming the Secret and the data key), or there is no usable
    /// SPIFFE bundle; the same reasons a handshake-time reload fails for.
    #[error(transparent)]
    Unusable(#[from] ReloadError),
    /// webpki's verifier could not be built for the roots.
    #[error("building the server-certificate verifier for {origin} failed: {source}")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
}

/// Why one handshake-time reload of the trust failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustFailure {
    /// The source had no usable roots.
    #[error(transparent)]
    Reload(#[from] ReloadError),
    /// webpki's verifier could not be built for the new roots.
    #[error("building the server-certificate verifier for {origin} failed: {source}")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
}
