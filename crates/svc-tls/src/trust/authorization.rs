//! Which server a verified chain must belong to: its host name (webpki's check), or
//! exactly one SPIFFE ID (the chain verified against the bundle, then the leaf's one
//! URI SAN compared).

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::material::TrustAnchors;

/// Which server a verified chain must belong to, once it leads to a trusted root.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerAuthorization {
    /// The host name the client connects to (webpki's check of the DNS or IP SANs),
    /// as for any HTTPS server. The default, and the only choice for CA-Secret trust.
    HostName,
    /// Exactly this SPIFFE ID, as the one URI SAN of the server's leaf (SPIFFE mode).
    /// No host-name check is made: an X509-SVID names a workload, not a host, and the
    /// Workload API vouches for no DNS name the client could check.
    SpiffeId(spiffe::SpiffeId),
}

/// A server whose chain is trusted presented another SPIFFE ID than the one
/// authorized (or none, or several).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server presented SPIFFE ID {presented}, expected {expected}")]
pub struct SpiffeIdMismatch {
    /// The authorized SPIFFE ID.
    pub expected: String,
    /// What the leaf carries: its URI SANs, or a description when it has none.
    pub presented: String,
}

/// Verifies `end_entity`'s chain to `anchors` for server authentication at `now`,
/// without any name check.
pub(super) fn verify_chain(
    anchors: &TrustAnchors,
    provider: &CryptoProvider,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
) -> Result<(), rustls::Error> {
    verify_chain_for(
        anchors,
        provider,
        end_entity,
        intermediates,
        now,
        webpki::KeyUsage::server_auth(),
    )
}

/// [`verify_chain`] for `usage`: server authentication for the servers this
/// service calls, client authentication for the callers it serves.
pub(super) fn verify_chain_for(
    anchors: &TrustAnchors,
    provider: &CryptoProvider,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
    usage: webpki::KeyUsage,
) -> Result<(), rustls::Error> {
    use rustls::CertificateError as C;
    let cert = webpki::EndEntityCert::try_from(end_entity).map_err(pki_error)?;
    cert.verify_for_usage(
        provider.signature_verification_algorithms.all,
        &anchors.roots().roots,
        intermediates,
        now,
        usage,
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| match e {
        webpki::Error::UnknownIssuer => rustls::Error::InvalidCertificate(C::UnknownIssuer),
        other => pki_error(other),
    })
}

fn pki_error(error: webpki::Error) -> rustls::Error {
    use rustls::CertificateError as C;
    rustls::Error::InvalidCertificate(match error {
        webpki::Error::BadDer | webpki::Error::BadDerTime => C::BadEncoding,
        webpki::Error::CertExpired { .. } => C::Expired,
        webpki::Error::CertNotValidYet { .. } => C::NotValidYet,
        webpki::Error::UnknownIssuer => C::UnknownIssuer,
        webpki::Error::InvalidSignatureForPublicKey => C::BadSignature,
        other => C::Other(rustls::OtherError(Arc::new(other))),
    })
}

/// The leaf's one URI SAN must be `expected`.
pub(super) fn authorize_spiffe_id(
    end_entity: &CertificateDer<'_>,
    expected: &spiffe::SpiffeId,
) -> Result<(), rustls::Error> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let expected_text = expected.to_string();
    let mismatch = |presented: String| {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
            Arc::new(SpiffeIdMismatch {
                expected: expected_text.clone(),
                presented,
            }),
        )))
    };
    let (_, cert) = X509Certificate::from_der(end_entity.as_ref())
        .map_err(|_| rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
    let uris: Vec<&str> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::URI(uri) => Some(*uri),
                _ => None,
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(_) => return Err(mismatch("an unparseable subjectAltName".to_owned())),
    };
    match uris.as_slice() {
        [one] if spiffe::SpiffeId::new(*one).is_ok_and(|id| id == *expected) => Ok(()),
        [] => Err(mismatch("no URI SAN".to_owned())),
        several => Err(mismatch(several.join(", "))),
    }
}
