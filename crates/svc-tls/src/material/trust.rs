//! Trust roots: a CA Secret to a rustls [`RootCertStore`].

use k8s_openapi::api::core::v1::Secret;
use rustls::RootCertStore;

use super::pem::read_certificates;
use super::secret::{check_type, secret_ref_of, within_cap};
use super::{CA_CRT, MaterialError, MaterialErrorKind, TLS_CRT};

/// The trust roots in a CA Secret, with how many certificates were not usable.
#[derive(Debug, Clone)]
pub struct TrustRoots {
    /// Every usable certificate of `tls.crt` and `ca.crt`, as a root.
    pub roots: RootCertStore,
    /// Certificates found but not usable as trust anchors.
    pub ignored: usize,
}

/// Loads CA trust from a Secret. A `kubernetes.io/tls` Secret: every certificate in
/// `tls.crt` and, when present, `ca.crt` (the cert-manager convention) becomes a
/// root; `tls.crt` must be present (as in the Go code); an empty `tls.crt` is
/// accepted when `ca.crt` supplies certificates. A Secret of any other type (an
/// `Opaque` bundle, what trust-manager and hand-made CA Secrets are): `ca.crt` alone,
/// which must be present and non-empty; its other keys are not read. The private key
/// is never read here, so a receiving service can be given anchors without it. Unusable certificates among
/// usable ones are skipped with a warning; none usable is an error.
pub fn load_trust(secret: &Secret) -> Result<RootCertStore, MaterialError> {
    let trust = load_trust_detailed(secret)?;
    if trust.ignored > 0 {
        tracing::warn!(
            secret = %secret_ref_of(secret),
            ignored = trust.ignored,
            used = trust.roots.len(),
            "some CA certificates are not usable as trust roots and were skipped"
        );
    }
    Ok(trust.roots)
}

/// [`load_trust`] without logging, reporting how many certificates were skipped.
pub fn load_trust_detailed(secret: &Secret) -> Result<TrustRoots, MaterialError> {
    let name = || secret_ref_of(secret);
    let data = secret.data.as_ref();
    if check_type(secret, &name).is_err() {
        return anchors_only(secret, &name);
    }
    let tls_crt = data
        .and_then(|d| d.get(TLS_CRT))
        .ok_or_else(|| MaterialError::new(name(), Some(TLS_CRT), MaterialErrorKind::MissingKey))?;
    let ca_crt = data.and_then(|d| d.get(CA_CRT)).filter(|v| !v.0.is_empty());
    within_cap(&tls_crt.0, TLS_CRT, &name)?;
    if let Some(ca) = ca_crt {
        within_cap(&ca.0, CA_CRT, &name)?;
    }
    let mut certs = Vec::new();
    if !tls_crt.0.is_empty() {
        certs.extend(read_certificates(&name, TLS_CRT, &tls_crt.0)?);
    }
    if let Some(ca) = ca_crt {
        certs.extend(read_certificates(&name, CA_CRT, &ca.0)?);
    }
    if certs.is_empty() {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::EmptyKey,
        ));
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::NoUsableRoot {
                keys: if ca_crt.is_some() {
                    "tls.crt, ca.crt"
                } else {
                    TLS_CRT
                },
                ignored,
            },
        ));
    }
    Ok(TrustRoots { roots, ignored })
}

/// The roots of a non-`kubernetes.io/tls` Secret: its `ca.crt` alone.
fn anchors_only(
    secret: &Secret,
    name: &dyn Fn() -> crate::origin::MaterialOrigin,
) -> Result<TrustRoots, MaterialError> {
    let ca = super::secret::required(secret, CA_CRT, name)?;
    let certs = read_certificates(name, CA_CRT, ca)?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(MaterialError::new(
            name(),
            Some(CA_CRT),
            MaterialErrorKind::NoUsableRoot {
                keys: CA_CRT,
                ignored,
            },
        ));
    }
    Ok(TrustRoots { roots, ignored })
}
