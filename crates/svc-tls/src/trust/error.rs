//! Why a trust verifier could not be built, why one handshake-time reload of the
//! trust failed, and why a handshake is refused without looking at the chain.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::source::TrustReloadError;
use crate::origin::TrustOrigin;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::watch::WatchError;

/// Why a trust verifier could not be built (start-up).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The CA Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] WatchError<Secret>),
    /// The CA ConfigMap's cache could not be started (refused, timed out).
    #[error(transparent)]
    ConfigMapSource(#[from] WatchError<ConfigMap>),
    /// The watch of a signer's ClusterTrustBundles could not be started (refused,
    /// timed out).
    #[error(transparent)]
    ClusterTrustBundleSource(#[from] WatchError<crate::watch::ClusterTrustBundle>),
    /// The source holds no usable root set now: the CA Secret does not exist or holds
    /// no usable root (naming the Secret and the data key), or there is no usable
    /// SPIFFE bundle; the same reasons a handshake-time reload fails for.
    #[error(transparent)]
    Unusable(#[from] TrustReloadError),
    /// webpki's verifier could not be built for the roots.
    #[error("building the server-certificate verifier for {origin} failed")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
    /// A registry was set ([`WatchedBuilder::watches`](crate::watch::WatchedBuilder::watches))
    /// on a builder over a source of the caller's, which reads no object the registry
    /// could share.
    #[error(
        "a registry of watched objects was set on the builder of a verifier over {origin}, \
         a source of the caller's that reads no object; remove `.watches(..)`"
    )]
    SharedSource {
        /// Where the source's roots come from.
        origin: TrustOrigin,
    },
    /// The builder has no client to read its object through (neither its own nor a
    /// registry's). Not reachable through the public constructors.
    #[error("the builder of a verifier over {origin} has no client to read it through")]
    NoClient {
        /// The object.
        origin: TrustOrigin,
    },
}

/// Why roots a handshake-time reload read are unusable all the same: reported as the
/// cause of a [`TrustReloadError::Unavailable`], so that the recorder sees one type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TrustFailure {
    /// webpki's verifier could not be built for the new roots.
    #[error("building the server-certificate verifier for {origin} failed")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
}

/// Why a handshake is refused without looking at the server's chain.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrustRefused {
    /// The source withdrew its trust.
    #[error("the trust source withdrew its trust: no server is trusted")]
    Withdrawn,
    /// The source fails and the last good roots have expired.
    #[error(
        "the trust source fails and the last good roots expired at {}",
        crate::material::validity::time_text(*not_after)
    )]
    Expired { not_after: SystemTime },
    /// The source has been gone or unreadable for longer than the verifier keeps its
    /// last good roots.
    #[error(
        "the CA Secret has been missing or unreadable for {}s, longer than the {}s the \
         last good roots are kept: no server is trusted until it is readable again",
        failing_for.as_secs(),
        limit.as_secs()
    )]
    SourceGone {
        failing_for: Duration,
        limit: Duration,
    },
    /// The API server has refused the watch of the source (its credentials revoked,
    /// its rights removed) for longer than the verifier keeps its last good roots.
    #[error(
        "the API server has refused the watch of the CA Secret or ConfigMap (HTTP {code}) \
         for {}s, longer than the {}s the last good roots are kept: no server is trusted \
         until it is followed again",
        failing_for.as_secs(),
        limit.as_secs()
    )]
    AccessRefused {
        code: u16,
        failing_for: Duration,
        limit: Duration,
    },
}

/// The handshake's error for a refusal (its reason kept as the source).
pub(crate) fn refusal(reason: TrustRefused) -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
        Arc::new(reason),
    )))
}
