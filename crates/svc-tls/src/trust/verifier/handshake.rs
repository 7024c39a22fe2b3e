//! [`TrustVerifier`] as rustls's [`ServerCertVerifier`]: what every handshake calls,
//! one snapshot of the roots per handshake, no lock and no I/O.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::TrustVerifier;
use crate::trust::authorization::{ServerAuthorization, authorize_spiffe_id, verify_chain};

impl ServerCertVerifier for TrustVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // One snapshot: the whole chain is verified against one root set.
        let served = self.reload(crate::last_good::slot::ReadBy::Handshake).0?;
        let roots = &served.value;
        match &self.inner.authorization {
            ServerAuthorization::HostName => roots.verifier.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            ServerAuthorization::SpiffeId(expected) => {
                verify_chain(
                    &roots.anchors,
                    &self.inner.provider,
                    end_entity,
                    intermediates,
                    now,
                )?;
                authorize_spiffe_id(end_entity, expected)?;
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    // Signatures depend on the provider only, not on the roots: checked directly with
    // its algorithms, as webpki's verifier does.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.inner.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.inner.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner
            .provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
