//! Why a forwarded certificate or a request's principal was refused.

use super::*;

/// Why the ingress-forwarded headers give no trusted peer certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngressError {
    /// `ssl-client-verify` is absent: the ingress did not check a client certificate.
    #[error("ssl-client-verify header is missing: no verified client certificate")]
    MissingVerify,
    /// `ssl-client-verify` is not `SUCCESS`.
    #[error("client certificate was not verified by the ingress (ssl-client-verify: {value:?})")]
    NotVerified {
        /// The value received (e.g. `NONE`, `FAILED:...`), truncated to 64
        /// characters and shown Debug-escaped.
        value: String,
    },
    /// A header is longer than its cap; refused before it is decoded.
    #[error("header {name} is {len} bytes, more than the {max}-byte limit")]
    TooLarge {
        /// The header name.
        name: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The cap in force.
        max: usize,
    },
    /// The forwarded certificate does not chain to one of the trust anchors, is
    /// outside its validity period, or is not for client authentication.
    #[error(
        "ssl-client-cert is not a valid client certificate issued under the configured trust anchors"
    )]
    Untrusted(#[source] webpki::Error),
    /// An allow-list is configured and none of the certificate's typed names (URI
    /// SANs, DNS SANs, its one subject common name) is on it.
    #[error("ssl-client-cert names no allowed peer (subject {subject:?})")]
    NotAllowed {
        /// The certificate's subject DN, truncated to 64 characters and shown
        /// Debug-escaped.
        subject: String,
    },
    /// A configured trust anchor is not a usable CA certificate.
    #[error("an ingress trust anchor is not a usable CA certificate")]
    TrustAnchor(#[source] webpki::Error),
    /// The watched CA gives no roots to verify against now: its source withdrew its
    /// trust, or fails and the last good roots have expired. Every forwarded
    /// certificate is refused until it recovers.
    #[error("the ingress CA trust gives no usable roots now")]
    AnchorsUnavailable(#[source] rustls::Error),
    /// `ssl-client-cert` is absent.
    #[error("ssl-client-cert header is missing")]
    MissingCertificate,
    /// A header appears more than once (ambiguous; possibly injected).
    #[error("header {name} appears more than once")]
    Duplicate {
        /// The header name.
        name: &'static str,
    },
    /// `ssl-client-cert` is not URL-encoded UTF-8 text.
    #[error("ssl-client-cert header is not URL-encoded PEM text")]
    CertificateEncoding,
    /// The certificate itself is unusable.
    #[error("ssl-client-cert header holds no usable certificate")]
    Certificate(#[source] CertificateError),
}

/// Why an ingress request's principal was not accepted ([`IngressVerifier::verify_request`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestPrincipalError {
    /// No trusted peer certificate.
    #[error(transparent)]
    Ingress(#[from] IngressError),
    /// No (or more than one) `X-Principal` header, or not visible ASCII.
    #[error("X-Principal header is missing, repeated or not ASCII")]
    MissingPrincipal,
    /// The principal token was rejected.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// The unsigned form (base64url JSON, what most Go senders send), refused in
    /// the strict mode ([`ReceivingMode::Strict`](super::ReceivingMode::Strict)).
    #[error(
        "X-Principal is unsigned (a Go sender's base64url JSON form), and the strict receiving mode accepts signed principals only"
    )]
    Unsigned,
    /// The receiver cannot judge any principal: it names no audience
    /// ([`ReceiverConfigError`](super::ReceiverConfigError)).
    #[error("the receiver is not configured to accept principals")]
    Configuration(#[source] super::ReceiverConfigError),
}

impl IngressError {
    /// Why, as one of [`VERIFY_RESULTS`](crate::principal::VERIFY_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingVerify | Self::MissingCertificate => "certificate_missing",
            Self::NotVerified { .. } => "certificate_not_verified",
            Self::TooLarge { .. } => "too_large",
            Self::Duplicate { .. } | Self::CertificateEncoding | Self::Certificate(_) => {
                "certificate_invalid"
            }
            Self::Untrusted(_) => "certificate_untrusted",
            Self::NotAllowed { .. } => "peer_not_allowed",
            Self::TrustAnchor(_) | Self::AnchorsUnavailable(_) => "trust_unavailable",
        }
    }
}

impl RequestPrincipalError {
    /// Why, as one of [`VERIFY_RESULTS`](crate::principal::VERIFY_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Ingress(e) => e.reason(),
            Self::MissingPrincipal => "principal_missing",
            Self::Verify(e) => e.reason(),
            Self::Unsigned => "unsigned",
            Self::Configuration(_) => "not_configured",
        }
    }
}
