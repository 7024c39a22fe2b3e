//! [`TrustVerifier`] on the serving side: a caller's certificate chain verified for
//! client authentication against the roots served now, one snapshot per handshake,
//! no lock and no I/O (what [`crate::serving::CallerVerifier`] calls).

use rustls_pki_types::{CertificateDer, UnixTime};

use super::TrustVerifier;
use crate::trust::authorization::verify_chain_for;

impl TrustVerifier {
    /// Verifies a caller's chain for client authentication against the roots in force
    /// now, read as a handshake reads them (the last good roots while the source
    /// fails, counted and warned about at most once a period).
    ///
    /// # Errors
    /// The handshake's refusal: the trust withdrawn, the source gone past its bound
    /// or the last good roots expired; otherwise why the chain does not verify.
    pub(crate) fn verify_caller_chain(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let served = self.reload(crate::last_good::slot::ReadBy::Handshake).0?;
        verify_chain_for(
            &served.value.anchors,
            &self.inner.provider,
            end_entity,
            intermediates,
            now,
            webpki::KeyUsage::client_auth(),
        )
    }

    /// The crypto provider whose algorithms check the handshake's signatures.
    pub(crate) fn provider(&self) -> &std::sync::Arc<rustls::crypto::CryptoProvider> {
        &self.inner.provider
    }
}
