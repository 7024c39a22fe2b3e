//! [`CallerVerifier`]: rustls's client-certificate verifier over a watched trust, so
//! a caller is checked against the client CA served now on every handshake.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerifier};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::trust::TrustVerifier;

/// Verifies callers' certificates (chain, validity, client-auth usage) against the
/// roots a [`TrustVerifier`] serves at each handshake: a client CA Secret, a CA
/// ConfigMap bundle or a SPIFFE trust domain's bundle, following their rotations,
/// refusing every caller at once when a SPIFFE domain is withdrawn and once the
/// source has been gone for longer than its bound, exactly as the client half
/// refuses servers. The roots are read from memory: no lock, no I/O.
///
/// It sends no list of acceptable CAs (the roots change under it, and rustls asks
/// for the list once): Go, OpenSSL and rustls clients then present the certificate
/// they have.
#[derive(Clone, Debug)]
pub struct CallerVerifier {
    trust: TrustVerifier,
    required: bool,
}

impl CallerVerifier {
    /// Every caller must present a certificate that verifies.
    pub fn required(trust: TrustVerifier) -> Self {
        Self {
            trust,
            required: true,
        }
    }

    /// A caller may present none (its requests then have no
    /// [`Caller`](super::Caller)); one it presents must verify.
    pub fn optional(trust: TrustVerifier) -> Self {
        Self {
            trust,
            required: false,
        }
    }

    /// Whether a caller must present a certificate.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// The trust callers are verified against.
    pub fn trust(&self) -> &TrustVerifier {
        &self.trust
    }
}

impl ClientCertVerifier for CallerVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    /// Called once per full handshake in which the caller presented a certificate.
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.trust
            .verify_caller_chain(end_entity, intermediates, now)
            .map(|()| ClientCertVerified::assertion())
    }

    // Signatures depend on the provider only: the client half's verifier checks them,
    // with the same provider's algorithms, for both directions.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        ServerCertVerifier::verify_tls12_signature(&self.trust, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        ServerCertVerifier::verify_tls13_signature(&self.trust, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        ServerCertVerifier::supported_verify_schemes(&self.trust)
    }
}
