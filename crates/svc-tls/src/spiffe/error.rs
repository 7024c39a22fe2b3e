//! What can go wrong with the SPIFFE source: at start-up, per handshake, and in one SVID.

use std::fmt;
use std::time::Duration;

use crate::material::MaterialErrorKind;

/// Why the SPIFFE source could not start. Each variant is one thing an operator
/// fixes differently, so each is its own error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpiffeStartError {
    /// `SPIFFE_ENDPOINT_SOCKET` is not set (or empty).
    #[error(
        "--client-certificate-source=spiffe needs the Workload API address in SPIFFE_ENDPOINT_SOCKET, which is not set (mount the SPIRE agent or SPIFFE CSI driver socket and set it, e.g. unix:///spiffe-workload-api/spire-agent.sock)"
    )]
    EndpointUnset,
    /// `SPIFFE_ENDPOINT_SOCKET` is not a Workload API address.
    #[error(
        "SPIFFE_ENDPOINT_SOCKET={value:?} is not a Workload API address ({reason}); expected unix:<path> or tcp:<ip>:<port>"
    )]
    EndpointInvalid {
        /// The value found.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Nothing answered at the address within the timeout.
    #[error("SPIFFE Workload API at {endpoint} is unreachable (tried for {timeout:?}): {error}")]
    Unreachable {
        /// The address.
        endpoint: String,
        /// How long it was tried.
        timeout: Duration,
        /// The last connection error.
        error: String,
    },
    /// The agent answered and issued no identity to this workload (its selectors
    /// match no registration entry).
    #[error(
        "SPIFFE Workload API at {endpoint} issued no identity to this workload within {timeout:?} (check its registration entry): {error}"
    )]
    NoIdentityIssued {
        /// The address.
        endpoint: String,
        /// How long it was tried.
        timeout: Duration,
        /// The agent's answer.
        error: String,
    },
    /// The stream was open and no SVID arrived within the timeout.
    #[error("SPIFFE Workload API at {endpoint} sent no X509-SVID within {timeout:?}{}",
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    NoSvid {
        /// The address.
        endpoint: String,
        /// The bound that passed.
        timeout: Duration,
        /// The last stream error, if any.
        last_error: Option<String>,
    },
    /// The agent sent an SVID that cannot be used.
    #[error("SPIFFE Workload API at {endpoint} sent an unusable X509-SVID")]
    InvalidSvid {
        /// The address.
        endpoint: String,
        /// What is wrong with it.
        #[source]
        error: SvidError,
    },
}

/// Why the SPIFFE source could not give an identity at one handshake (the resolver
/// then serves the last good SVID).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SpiffeError {
    /// The Workload API stream is down; the newest SVID may be out of date.
    #[error("SPIFFE Workload API stream at {endpoint} is down: {error}")]
    StreamDown {
        /// The address.
        endpoint: String,
        /// The last stream error.
        error: String,
    },
    /// The newest SVID cannot be used (for example, it has expired).
    #[error(transparent)]
    Svid(SvidError),
}

/// What is wrong with one X509-SVID. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvidError {
    pub(super) spiffe_id: String,
    pub(super) part: &'static str,
    pub(super) kind: MaterialErrorKind,
}

impl SvidError {
    /// The SVID's SPIFFE ID (as the agent sent it).
    pub fn spiffe_id(&self) -> &str {
        &self.spiffe_id
    }

    /// The part at fault: `x509_svid` (the chain) or `x509_svid_key` (the key), the
    /// Workload API's field names.
    pub fn part(&self) -> &'static str {
        self.part
    }

    /// What is wrong, in the terms used for Secrets.
    pub fn kind(&self) -> &MaterialErrorKind {
        &self.kind
    }
}

impl fmt::Display for SvidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use MaterialErrorKind as K;
        let (id, part) = (&self.spiffe_id, self.part);
        match &self.kind {
            K::InvalidCertificate { reason } => {
                write!(
                    f,
                    "X509-SVID {id}: {part}: the leaf certificate cannot be parsed: {reason}"
                )
            }
            K::NoCertificate => write!(f, "X509-SVID {id}: {part} holds no certificate"),
            K::UnparseableKey { reason } => {
                write!(
                    f,
                    "X509-SVID {id}: {part}: the private key cannot be loaded: {reason}"
                )
            }
            K::UnsupportedAlgorithm { algorithm } => write!(
                f,
                "X509-SVID {id}: {part}: unsupported key algorithm {algorithm}"
            ),
            K::KeyMismatch { detail, .. } => write!(
                f,
                "X509-SVID {id}: the private key does not match the certificate: {detail}"
            ),
            K::CertificateExpired { not_after_text, .. } => {
                write!(
                    f,
                    "X509-SVID {id}: the certificate expired at {not_after_text}"
                )
            }
            K::CertificateNotYetValid {
                not_before_text, ..
            } => write!(
                f,
                "X509-SVID {id}: the certificate is not valid before {not_before_text}"
            ),
            K::EncryptedKey => write!(f, "X509-SVID {id}: {part}: the private key is encrypted"),
            other => write!(f, "X509-SVID {id}: {part}: {other:?}"),
        }
    }
}

impl std::error::Error for SvidError {}

/// The Workload API holds no usable X.509 bundle for a trust domain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no usable SPIFFE bundle for trust domain {trust_domain}: {reason}")]
pub(crate) struct BundleError {
    /// The trust domain.
    pub(crate) trust_domain: String,
    /// Why (a fixed text).
    pub(crate) reason: &'static str,
}
