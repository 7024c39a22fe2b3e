//! Trust roots: a CA Secret, or a ConfigMap's PEM bundle, to a rustls
//! [`RootCertStore`].

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use rustls::RootCertStore;

use super::anchors::{TrustAnchors, earliest_not_after};
use super::pem::read_certificates;
use super::secret::{check_type, secret_ref_of, within_cap};
use super::{CA_CRT, MAX_CERTIFICATE_VALUE_BYTES, MaterialError, MaterialErrorKind, TLS_CRT};
use crate::origin::{ConfigMapRef, MaterialOrigin, SecretRef};

/// Roots parsed from one PEM value, before they become a [`TrustAnchors`]: the
/// caches de-duplicate them first.
pub(super) struct ParsedRoots<'a> {
    /// Every usable certificate of the value, as a root.
    pub(super) roots: RootCertStore,
    /// Certificates found but not usable as trust anchors.
    pub(super) ignored: usize,
    /// The PEM value the roots were read from (for their earliest `notAfter`).
    pub(super) pem: &'a [u8],
}

impl ParsedRoots<'_> {
    /// The root set, its earliest `notAfter` read from the value.
    pub(super) fn into_anchors(self) -> TrustAnchors {
        let not_after = earliest_not_after(self.pem);
        TrustAnchors::new(self.roots, self.ignored, not_after)
    }
}

/// Loads CA trust from a Secret. A `kubernetes.io/tls` Secret: every certificate in
/// `ca.crt` (the cert-manager convention) when it is present and not empty, and
/// only then; else every certificate in `tls.crt`, which must then be present (as in
/// the Go code, whose CA Secrets hold `tls.crt` only). When `ca.crt` is there,
/// `tls.crt` is not a root: in the Secret of an intermediate or a leaf it is not the
/// CA the operator chose to trust. A Secret of any other type (an `Opaque` bundle,
/// what trust-manager and hand-made CA Secrets are): `ca.crt` alone, which must be
/// present and non-empty; its other keys are not read. Only `CERTIFICATE` blocks are
/// read: a private key is never parsed here (a `ca.crt` that embeds one is flagged by
/// the trust-only watch, which drops the key before caching). Unusable certificates
/// among usable ones are skipped with a warning; none usable is an error.
pub fn load_trust(secret: &Secret) -> Result<RootCertStore, MaterialError> {
    let trust = parse_secret(secret)?;
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

/// [`load_trust`] without logging, as the one root-set type: how many certificates
/// were skipped ([`TrustAnchors::ignored`]) and the earliest `notAfter` among the
/// certificates of the value read ([`TrustAnchors::not_after`]).
pub fn load_trust_detailed(secret: &Secret) -> Result<TrustAnchors, MaterialError> {
    parse_secret(secret).map(ParsedRoots::into_anchors)
}

/// The roots of a CA Secret, as [`load_trust`] documents, with the value read.
pub(super) fn parse_secret(secret: &Secret) -> Result<ParsedRoots<'_>, MaterialError> {
    let name = || secret_ref_of(secret);
    let data = secret.data.as_ref();
    if check_type(secret, &name).is_err() {
        return anchors_only(secret, &name);
    }
    let ca_crt = data.and_then(|d| d.get(CA_CRT)).filter(|v| !v.0.is_empty());
    let (key, pem) = match ca_crt {
        Some(ca) => (CA_CRT, ca),
        None => (
            TLS_CRT,
            data.and_then(|d| d.get(TLS_CRT)).ok_or_else(|| {
                MaterialError::new(name(), Some(TLS_CRT), MaterialErrorKind::MissingKey)
            })?,
        ),
    };
    within_cap(&pem.0, key, &name)?;
    if pem.0.is_empty() {
        return Err(MaterialError::new(
            name(),
            Some(TLS_CRT),
            MaterialErrorKind::EmptyKey,
        ));
    }
    let certs = read_certificates(&name, key, &pem.0)?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(MaterialError::new(
            name(),
            Some(key),
            MaterialErrorKind::NoUsableRoot { keys: key, ignored },
        ));
    }
    Ok(ParsedRoots {
        roots,
        ignored,
        pem: &pem.0,
    })
}

/// The roots of a non-`kubernetes.io/tls` Secret: its `ca.crt` alone.
fn anchors_only<'a>(
    secret: &'a Secret,
    name: &dyn Fn() -> crate::origin::MaterialOrigin,
) -> Result<ParsedRoots<'a>, MaterialError> {
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
    Ok(ParsedRoots {
        roots,
        ignored,
        pem: ca,
    })
}

/// Why a ConfigMap's PEM bundle cannot serve as CA trust: which ConfigMap, which
/// data key, and what is wrong ([`ConfigMapTrustProblem`]). Never carries the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CA ConfigMap {configmap} key {key}: {problem}")]
pub struct ConfigMapTrustError {
    /// The ConfigMap.
    pub configmap: ConfigMapRef,
    /// The data key read.
    pub key: String,
    /// What is wrong.
    pub problem: ConfigMapTrustProblem,
}

/// What is wrong with a CA ConfigMap (see [`ConfigMapTrustError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigMapTrustProblem {
    /// The ConfigMap does not exist (not created yet, or deleted).
    #[error("the ConfigMap does not exist")]
    NotFound,
    /// The ConfigMap has no such key in `data` or `binaryData`.
    #[error("the key is missing (the ConfigMap holds {})", keys_text(present))]
    MissingKey {
        /// The keys the ConfigMap does hold (names only), sorted.
        present: Vec<String>,
    },
    /// The key is present but empty.
    #[error("the key is empty")]
    EmptyKey,
    /// The value is larger than [`MAX_CERTIFICATE_VALUE_BYTES`](super::MAX_CERTIFICATE_VALUE_BYTES)
    /// (refused before parsing).
    #[error("the value is {len} bytes, more than the {max} bytes accepted")]
    TooLarge {
        /// The value's length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// The value is not PEM, or a PEM section is malformed.
    #[error("the value is not valid PEM: {reason}")]
    NotPem {
        /// What is wrong (a fixed text, never the data).
        reason: &'static str,
    },
    /// The value is PEM but holds no `CERTIFICATE` section.
    #[error("the value holds no PEM CERTIFICATE section")]
    NoCertificate,
    /// The value holds certificates, none usable as a trust anchor.
    #[error("none of the {ignored} certificate(s) is usable as a trust root")]
    NoUsableRoot {
        /// How many certificates were rejected.
        ignored: usize,
    },
}

fn keys_text(present: &[String]) -> String {
    if present.is_empty() {
        "no keys".to_owned()
    } else {
        format!("keys {}", present.join(", "))
    }
}

impl ConfigMapTrustError {
    /// An error about `configmap`'s `key`.
    pub fn new(
        configmap: ConfigMapRef,
        key: impl Into<String>,
        problem: ConfigMapTrustProblem,
    ) -> Self {
        Self {
            configmap,
            key: key.into(),
            problem,
        }
    }
}

/// The value of `key` in a ConfigMap: `data` (what trust-manager writes) first, then
/// `binaryData`.
pub fn configmap_value<'a>(configmap: &'a ConfigMap, key: &str) -> Option<&'a [u8]> {
    configmap
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.as_bytes())
        .or_else(|| {
            configmap
                .binary_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|v| v.0.as_slice())
        })
}

/// Loads CA trust from the PEM bundle under `key` of a ConfigMap (trust-manager's
/// default Bundle target): every usable `CERTIFICATE` of the value becomes a root;
/// other PEM sections are skipped. Unusable certificates among usable ones are
/// counted in [`TrustAnchors::ignored`]; none usable is an error, as are a missing or
/// empty key, a value over the cap, and PEM that does not parse.
pub fn load_configmap_trust(
    configmap: &ConfigMap,
    key: &str,
) -> Result<TrustAnchors, ConfigMapTrustError> {
    let Some(value) = configmap_value(configmap, key) else {
        return Err(missing_key(configmap, key));
    };
    parse_bundle(value)
        .map(ParsedRoots::into_anchors)
        .map_err(|problem| ConfigMapTrustError::new(configmap_ref_of(configmap), key, problem))
}

/// The error of a ConfigMap without `key`, naming the keys it holds.
pub(super) fn missing_key(configmap: &ConfigMap, key: &str) -> ConfigMapTrustError {
    let mut present: Vec<String> = configmap
        .data
        .iter()
        .flat_map(|d| d.keys())
        .chain(configmap.binary_data.iter().flat_map(|d| d.keys()))
        .cloned()
        .collect();
    present.sort();
    present.dedup();
    ConfigMapTrustError::new(
        configmap_ref_of(configmap),
        key,
        ConfigMapTrustProblem::MissingKey { present },
    )
}

/// The roots of one PEM bundle (a ConfigMap value), or what is wrong with it.
pub(super) fn parse_bundle(value: &[u8]) -> Result<ParsedRoots<'_>, ConfigMapTrustProblem> {
    if value.is_empty() {
        return Err(ConfigMapTrustProblem::EmptyKey);
    }
    if value.len() > MAX_CERTIFICATE_VALUE_BYTES {
        return Err(ConfigMapTrustProblem::TooLarge {
            len: value.len(),
            max: MAX_CERTIFICATE_VALUE_BYTES,
        });
    }
    // The one PEM reader of the material layer; its error names a Secret, so only
    // its kind is kept (the caller names the ConfigMap and key).
    let unnamed = || MaterialOrigin::Secret(SecretRef::new("", ""));
    let certs = read_certificates(&unnamed, CA_CRT, value).map_err(|e| match e.kind() {
        MaterialErrorKind::NotPem { reason } => ConfigMapTrustProblem::NotPem { reason },
        _ => ConfigMapTrustProblem::NoCertificate,
    })?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(ConfigMapTrustProblem::NoUsableRoot { ignored });
    }
    Ok(ParsedRoots {
        roots,
        ignored,
        pem: value,
    })
}

pub(super) fn configmap_ref_of(configmap: &ConfigMap) -> ConfigMapRef {
    ConfigMapRef::new(
        configmap.metadata.namespace.clone().unwrap_or_default(),
        configmap.metadata.name.clone().unwrap_or_default(),
    )
}
