//! Behind the nginx ingress: the forwarded client certificate and the
//! `X-Principal` header of a request.

use std::fmt;

use reqwest::header::{HeaderMap, HeaderValue};
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use serde::de::DeserializeOwned;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;

use super::PRINCIPAL_HEADER;
use super::jws::{AlgorithmPolicy, sender_text};
use super::verify::{CertificateError, DEFAULT_MAX_TOKEN_BYTES, PeerCertificate, VerifyError};

/// The ingress header carrying the peer's certificate as URL-encoded PEM.
pub const INGRESS_CLIENT_CERT_HEADER: &str = "ssl-client-cert";

/// The ingress header carrying the outcome of client-certificate verification.
pub const INGRESS_CLIENT_VERIFY_HEADER: &str = "ssl-client-verify";

/// The only `ssl-client-verify` value under which the forwarded certificate is trusted.
pub const INGRESS_VERIFY_SUCCESS: &str = "SUCCESS";

/// The default cap on the `ssl-client-cert` header, in bytes, checked before it is
/// decoded. A real client certificate is 0.5 to 3 KiB of PEM (RSA-4096 with a few
/// SANs); even a 16 KiB PEM with every byte percent-encoded fits in 48 KiB.
pub const DEFAULT_MAX_CERT_HEADER_BYTES: usize = 48 * 1024;

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
    /// Trust anchors are configured and the forwarded certificate does not chain
    /// to one of them, is outside its validity period, or is not for client
    /// authentication.
    #[error(
        "ssl-client-cert is not a valid client certificate issued under the configured trust anchors"
    )]
    Untrusted(#[source] webpki::Error),
    /// An allow-list is configured and none of the certificate's subject common
    /// names, subject DN or SANs (DNS, URI, e-mail) is on it.
    #[error("ssl-client-cert names no allowed peer (subject {subject:?})")]
    NotAllowed {
        /// The certificate's subject DN, truncated to 64 characters and shown
        /// Debug-escaped.
        subject: String,
    },
    /// A configured trust anchor is not a usable CA certificate.
    #[error("an ingress trust anchor is not a usable CA certificate")]
    TrustAnchor(#[source] webpki::Error),
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

/// Why an ingress request's principal was not accepted ([`verify_ingress_request`]).
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
}

/// The receiving side behind the ingress, configured: size caps, and optionally
/// the trust anchors the forwarded certificate must chain to and an allow-list of
/// peer names.
///
/// Without trust anchors the forwarded certificate is believed because the
/// ingress says `ssl-client-verify: SUCCESS`; anyone who reaches the service
/// without passing the mTLS ingress can send those headers with a self-made
/// certificate and sign any principal. Either configure anchors (the CA that
/// issues client certificates), or make sure the service is reachable only
/// through the mTLS ingress (for example with a NetworkPolicy); see
/// `docs/operations.md`.
#[derive(Clone)]
pub struct IngressVerifier {
    policy: AlgorithmPolicy,
    max_token_bytes: usize,
    max_cert_header_bytes: usize,
    anchors: Option<Vec<TrustAnchor<'static>>>,
    intermediates: Vec<CertificateDer<'static>>,
    allowed: Option<Vec<String>>,
}

impl fmt::Debug for IngressVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IngressVerifier")
            .field("policy", &self.policy)
            .field("max_token_bytes", &self.max_token_bytes)
            .field("max_cert_header_bytes", &self.max_cert_header_bytes)
            .field("anchors", &self.anchors.as_ref().map(Vec::len))
            .field("intermediates", &self.intermediates.len())
            .field("allowed", &self.allowed)
            .finish()
    }
}

impl Default for IngressVerifier {
    fn default() -> Self {
        Self::new(AlgorithmPolicy::default())
    }
}

impl IngressVerifier {
    /// Default caps, no trust anchors, no allow-list: what
    /// [`peer_certificate_from_ingress`] and [`verify_ingress_request`] do.
    pub fn new(policy: AlgorithmPolicy) -> Self {
        Self {
            policy,
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
            max_cert_header_bytes: DEFAULT_MAX_CERT_HEADER_BYTES,
            anchors: None,
            intermediates: Vec::new(),
            allowed: None,
        }
    }

    /// The cap on the `X-Principal` token (default [`DEFAULT_MAX_TOKEN_BYTES`]).
    #[must_use]
    pub fn with_max_token_bytes(mut self, max: usize) -> Self {
        self.max_token_bytes = max;
        self
    }

    /// The cap on the `ssl-client-cert` header (default
    /// [`DEFAULT_MAX_CERT_HEADER_BYTES`]).
    #[must_use]
    pub fn with_max_cert_header_bytes(mut self, max: usize) -> Self {
        self.max_cert_header_bytes = max;
        self
    }

    /// The CA certificates the forwarded certificate must chain to. With them,
    /// the certificate is checked as rustls would check it in the handshake
    /// (webpki path building, validity at the current time, client-auth usage).
    ///
    /// # Errors
    /// [`IngressError::TrustAnchor`] when a certificate is not a usable anchor.
    pub fn with_trust_anchors<I>(mut self, anchors: I) -> Result<Self, IngressError>
    where
        I: IntoIterator<Item = CertificateDer<'static>>,
    {
        let mut out = Vec::new();
        for der in anchors {
            let anchor = webpki::anchor_from_trusted_cert(&der)
                .map_err(IngressError::TrustAnchor)?
                .to_owned();
            out.push(anchor);
        }
        self.anchors = Some(out);
        Ok(self)
    }

    /// Intermediate CA certificates for path building (nginx forwards the leaf
    /// only).
    #[must_use]
    pub fn with_intermediates<I>(mut self, intermediates: I) -> Self
    where
        I: IntoIterator<Item = CertificateDer<'static>>,
    {
        self.intermediates = intermediates.into_iter().collect();
        self
    }

    /// Peer names allowed to send principals: each is compared exactly with the
    /// certificate's subject common names, its subject DN as
    /// `CN=..., O=...` text, and its DNS, URI and e-mail SANs.
    #[must_use]
    pub fn with_allowed_peers<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The peer certificate forwarded by the nginx ingress: `ssl-client-verify`
    /// must be exactly `SUCCESS`, and the certificate must pass the configured
    /// anchors and allow-list.
    ///
    /// # Errors
    /// An [`IngressError`] naming the missing, repeated, oversized, unusable or
    /// untrusted header.
    pub fn peer_certificate(&self, headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
        let verify =
            single(headers, INGRESS_CLIENT_VERIFY_HEADER)?.ok_or(IngressError::MissingVerify)?;
        if verify.as_bytes() != INGRESS_VERIFY_SUCCESS.as_bytes() {
            return Err(IngressError::NotVerified {
                value: sender_text(&String::from_utf8_lossy(verify.as_bytes())),
            });
        }
        let cert =
            single(headers, INGRESS_CLIENT_CERT_HEADER)?.ok_or(IngressError::MissingCertificate)?;
        if cert.len() > self.max_cert_header_bytes {
            return Err(IngressError::TooLarge {
                name: INGRESS_CLIENT_CERT_HEADER,
                len: cert.len(),
                max: self.max_cert_header_bytes,
            });
        }
        let pem: Vec<u8> = percent_encoding::percent_decode(cert.as_bytes()).collect();
        if std::str::from_utf8(&pem).is_err() {
            return Err(IngressError::CertificateEncoding);
        }
        let certificate = PeerCertificate::from_pem(&pem).map_err(IngressError::Certificate)?;
        if let Some(anchors) = &self.anchors {
            let end_entity = webpki::EndEntityCert::try_from(certificate.der())
                .map_err(IngressError::Untrusted)?;
            end_entity
                .verify_for_usage(
                    webpki::ALL_VERIFICATION_ALGS,
                    anchors,
                    &self.intermediates,
                    UnixTime::now(),
                    webpki::KeyUsage::client_auth(),
                    None,
                    None,
                )
                .map_err(IngressError::Untrusted)?;
        }
        if let Some(allowed) = &self.allowed {
            let (subject, names) = peer_names(certificate.der())?;
            if !names.iter().any(|n| allowed.contains(n)) {
                return Err(IngressError::NotAllowed {
                    subject: sender_text(&subject),
                });
            }
        }
        Ok(certificate)
    }

    /// The whole receiving side: the forwarded peer certificate, then the single
    /// `X-Principal` header, verified and decoded.
    ///
    /// # Errors
    /// A [`RequestPrincipalError`] naming which step failed.
    pub fn verify_request<T: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
    ) -> Result<T, RequestPrincipalError> {
        let certificate = self.peer_certificate(headers)?;
        let mut values = headers.get_all(PRINCIPAL_HEADER).iter();
        let (Some(token), None) = (values.next(), values.next()) else {
            return Err(RequestPrincipalError::MissingPrincipal);
        };
        if token.len() > self.max_token_bytes {
            return Err(VerifyError::TooLarge {
                len: token.len(),
                max: self.max_token_bytes,
            }
            .into());
        }
        let token = token
            .to_str()
            .map_err(|_| RequestPrincipalError::MissingPrincipal)?;
        Ok(certificate.verify_with_max_len(token, self.policy, self.max_token_bytes)?)
    }
}

/// The subject DN and every name an allow-list entry may match.
fn peer_names(der: &CertificateDer<'_>) -> Result<(String, Vec<String>), IngressError> {
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
        .map_err(|e| IngressError::Certificate(CertificateError::X509(e.to_string())))?;
    let subject = cert.subject().to_string();
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
        .collect();
    names.push(subject.clone());
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(n) | GeneralName::URI(n) | GeneralName::RFC822Name(n) = name
            {
                names.push((*n).to_owned());
            }
        }
    }
    Ok((subject, names))
}

/// The peer certificate forwarded by the nginx ingress, trusted only when
/// `ssl-client-verify` is exactly `SUCCESS`. Default caps, no trust anchors and
/// no allow-list: see [`IngressVerifier`] for those, and for why the service must
/// otherwise be reachable only through the mTLS ingress.
///
/// # Errors
/// An [`IngressError`] naming the missing, repeated or unusable header.
pub fn peer_certificate_from_ingress(headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
    IngressVerifier::default().peer_certificate(headers)
}

/// The receiving side in one call: the ingress-forwarded peer certificate, the
/// `X-Principal` header, verified and decoded. Default caps, no trust anchors, no
/// allow-list ([`IngressVerifier`] configures them).
///
/// # Errors
/// A [`RequestPrincipalError`] naming which step failed.
pub fn verify_ingress_request<T: DeserializeOwned>(
    headers: &HeaderMap,
    policy: AlgorithmPolicy,
) -> Result<T, RequestPrincipalError> {
    IngressVerifier::new(policy).verify_request(headers)
}

fn single<'a>(
    headers: &'a HeaderMap,
    name: &'static str,
) -> Result<Option<&'a HeaderValue>, IngressError> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => Ok(Some(value)),
        (Some(_), Some(_)) => Err(IngressError::Duplicate { name }),
    }
}
