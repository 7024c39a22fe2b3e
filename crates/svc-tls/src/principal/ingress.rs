//! Behind the nginx ingress: the forwarded client certificate and the
//! `X-Principal` header of a request.

use reqwest::header::{HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;

use super::PRINCIPAL_HEADER;
use super::jws::AlgorithmPolicy;
use super::verify::{CertificateError, PeerCertificate, VerifyError};

/// The ingress header carrying the peer's certificate as URL-encoded PEM.
pub const INGRESS_CLIENT_CERT_HEADER: &str = "ssl-client-cert";

/// The ingress header carrying the outcome of client-certificate verification.
pub const INGRESS_CLIENT_VERIFY_HEADER: &str = "ssl-client-verify";

/// The only `ssl-client-verify` value under which the forwarded certificate is trusted.
pub const INGRESS_VERIFY_SUCCESS: &str = "SUCCESS";

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
        /// The value received (e.g. `NONE`, `FAILED:...`).
        value: String,
    },
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

/// The peer certificate forwarded by the nginx ingress, trusted only when
/// `ssl-client-verify` is exactly `SUCCESS`.
///
/// # Errors
/// An [`IngressError`] naming the missing, repeated or unusable header.
pub fn peer_certificate_from_ingress(headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
    let verify =
        single(headers, INGRESS_CLIENT_VERIFY_HEADER)?.ok_or(IngressError::MissingVerify)?;
    if verify.as_bytes() != INGRESS_VERIFY_SUCCESS.as_bytes() {
        return Err(IngressError::NotVerified {
            value: String::from_utf8_lossy(verify.as_bytes()).into_owned(),
        });
    }
    let cert =
        single(headers, INGRESS_CLIENT_CERT_HEADER)?.ok_or(IngressError::MissingCertificate)?;
    let pem: Vec<u8> = percent_encoding::percent_decode(cert.as_bytes()).collect();
    if std::str::from_utf8(&pem).is_err() {
        return Err(IngressError::CertificateEncoding);
    }
    PeerCertificate::from_pem(&pem).map_err(IngressError::Certificate)
}

/// The receiving side in one call: the ingress-forwarded peer certificate, the
/// `X-Principal` header, verified and decoded.
///
/// # Errors
/// A [`RequestPrincipalError`] naming which step failed.
pub fn verify_ingress_request<T: DeserializeOwned>(
    headers: &HeaderMap,
    policy: AlgorithmPolicy,
) -> Result<T, RequestPrincipalError> {
    let certificate = peer_certificate_from_ingress(headers)?;
    let mut values = headers.get_all(PRINCIPAL_HEADER).iter();
    let (Some(token), None) = (values.next(), values.next()) else {
        return Err(RequestPrincipalError::MissingPrincipal);
    };
    let token = token
        .to_str()
        .map_err(|_| RequestPrincipalError::MissingPrincipal)?;
    Ok(certificate.verify(token, policy)?)
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
