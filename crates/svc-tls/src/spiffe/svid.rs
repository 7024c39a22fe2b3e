//! An X509-SVID to an [`Identity`], and an X.509 bundle to [`TrustAnchors`]: the same
//! loader as a Secret's identity (leaf parsed once, key type and validity checked, key
//! matched to the leaf), fed with the DER the Workload API sends.

use std::time::SystemTime;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use spiffe::{X509Bundle, X509Svid};
use x509_parser::prelude::FromDer;

use super::error::SvidError;
use crate::material::{
    CertificateValidity, Identity, MaterialError, TrustAnchors, validity::time_text,
};
use crate::material::{
    MaterialErrorKind, TLS_CRT, TLS_KEY, identity::KeyInput, identity::build_identity,
};
use crate::origin::MaterialOrigin;

/// The Workload API's field names, used in errors.
const SVID_FIELD: &str = "x509_svid";
const KEY_FIELD: &str = "x509_svid_key";

/// Loads `svid` as a client identity, checking validity at `now` (`None`: not checked).
pub(super) fn identity_of(
    svid: &X509Svid,
    provider: &CryptoProvider,
    now: Option<SystemTime>,
) -> Result<Identity, SvidError> {
    let spiffe_id = svid.spiffe_id().to_string();
    let chain: Vec<CertificateDer<'static>> = svid
        .cert_chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_bytes().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        svid.private_key().as_bytes().to_vec(),
    ));
    // The loader's errors are translated to the Workload API's terms below.
    let name = || MaterialOrigin::Svid {
        spiffe_id: spiffe_id.clone(),
    };
    build_identity(&name, chain, KeyInput::Der(key), provider, now)
        .map(|identity| identity.with_spiffe_id(&spiffe_id))
        .map_err(|error| svid_error(spiffe_id, &error))
}

/// The validity check of an already loaded identity, at `now` (the same rule as a
/// Secret's identity: [`CertificateValidity`]).
pub(crate) fn check_validity(identity: &Identity, now: SystemTime) -> Result<(), SvidError> {
    let kind = match CertificateValidity::of(identity, now) {
        CertificateValidity::Valid => return Ok(()),
        CertificateValidity::NotYetValid { not_before } => {
            MaterialErrorKind::CertificateNotYetValid {
                not_before,
                not_before_text: time_text(not_before),
            }
        }
        CertificateValidity::Expired { not_after } => MaterialErrorKind::CertificateExpired {
            not_after,
            not_after_text: time_text(not_after),
        },
    };
    Err(SvidError {
        spiffe_id: identity.spiffe_id().unwrap_or_default().to_owned(),
        part: SVID_FIELD,
        kind,
    })
}

fn svid_error(spiffe_id: String, error: &MaterialError) -> SvidError {
    let part = match error.data_key() {
        Some(TLS_KEY) => KEY_FIELD,
        Some(TLS_CRT) | Some(_) | None => SVID_FIELD,
    };
    SvidError {
        spiffe_id,
        part,
        kind: error.kind().clone(),
    }
}

/// The bundle's authorities as trust anchors. Authorities that are not usable as
/// anchors are counted, not fatal; a bundle with none usable gives `None`.
pub(super) fn anchors_of(bundle: &X509Bundle) -> Option<TrustAnchors> {
    let mut roots = RootCertStore::empty();
    let mut ignored = 0;
    let mut not_after: Option<SystemTime> = None;
    for authority in bundle.authorities() {
        let der = CertificateDer::from(authority.as_bytes());
        match roots.add(der.into_owned()) {
            Ok(()) => {
                if let Ok((_, cert)) =
                    x509_parser::certificate::X509Certificate::from_der(authority.as_bytes())
                {
                    let t = cert.validity().not_after.timestamp();
                    let t = SystemTime::UNIX_EPOCH
                        + std::time::Duration::from_secs(u64::try_from(t).unwrap_or(0));
                    not_after = Some(not_after.map_or(t, |n| n.min(t)));
                }
            }
            Err(_) => ignored += 1,
        }
    }
    (!roots.is_empty()).then(|| TrustAnchors::new(roots, ignored, not_after))
}

/// Whether two bundles hold the same authorities, byte for byte, in the same order.
pub(super) fn same_bundle(a: &X509Bundle, b: &X509Bundle) -> bool {
    a.authorities().len() == b.authorities().len()
        && a.authorities()
            .iter()
            .zip(b.authorities())
            .all(|(x, y)| x.as_bytes() == y.as_bytes())
}

/// Whether two SVIDs are the same bytes: ID, chain and key.
pub(super) fn same_svid(a: &X509Svid, b: &X509Svid) -> bool {
    a.spiffe_id() == b.spiffe_id()
        && a.private_key().as_bytes() == b.private_key().as_bytes()
        && a.cert_chain().len() == b.cert_chain().len()
        && a.cert_chain()
            .iter()
            .zip(b.cert_chain())
            .all(|(x, y)| x.as_bytes() == y.as_bytes())
}
