//! Whether an identity chains to a CA (the ingress's): its `tls.crt` chain verified
//! as a client certificate by webpki, as rustls's verifying servers (and the test
//! support's) do it.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::{problem, tls_problem};
use crate::report::{ChainReport, Problem};

/// The CA an identity is checked against.
#[derive(Debug, Clone)]
pub struct ChainCa {
    /// `secret NAMESPACE/NAME` or `file PATH`.
    pub label: String,
    /// Its roots.
    pub roots: RootCertStore,
    /// The subjects of its certificates.
    pub subjects: Vec<String>,
}

/// Verifies `chain` (leaf first) as a client certificate against `ca`.
pub fn check(
    identity: &str,
    chain: &[CertificateDer<'static>],
    ca: &ChainCa,
    provider: &Arc<CryptoProvider>,
) -> ChainReport {
    let mut report = ChainReport {
        identity: identity.to_owned(),
        ca: ca.label.clone(),
        roots: ca.subjects.clone(),
        ok: false,
        error: None,
    };
    let Some((leaf, intermediates)) = chain.split_first() else {
        report.error = Some(Problem {
            kind: "NoCertificate".to_owned(),
            message: format!("{identity}: no certificate to check"),
        });
        return report;
    };
    let verifier = match WebPkiClientVerifier::builder_with_provider(
        Arc::new(ca.roots.clone()),
        provider.clone(),
    )
    .build()
    {
        Ok(verifier) => verifier,
        Err(error) => {
            report.error = Some(problem(&error, &error));
            return report;
        }
    };
    match verifier.verify_client_cert(leaf, intermediates, UnixTime::now()) {
        Ok(_) => report.ok = true,
        Err(error) => report.error = Some(tls_problem(&error)),
    }
    report
}
