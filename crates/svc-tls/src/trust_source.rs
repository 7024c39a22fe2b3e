//! The trust seam: where the handshake-time server-certificate verifier reads the
//! roots it verifies peers against.
//!
//! A [`TrustSource`] says what it holds *now*: one whole root set
//! ([`TrustAnchors`]), or why it has none. The verifier ([`crate::verifier`]) owns
//! everything around that answer: falling back to the last good roots, the
//! rate-limited warning, the visible state and the recorder. This mirrors the
//! identity seam ([`crate::identity_source`]); the SPIFFE bundle source
//! ([`crate::spiffe::SpiffeTrustSource`]) sits beside [`SecretTrustSource`].
//!
//! [`TrustSource::current`] runs on every TLS handshake: no I/O, no lock held while
//! parsing, and no allocation beyond an `Arc` clone when nothing changed. The
//! Secret source gets there with a [`TrustCache`]: the roots are parsed again only
//! when `tls.crt` or `ca.crt` differ byte for byte from the last good load, and an
//! unchanged Secret returns the *same* `Arc<TrustAnchors>`, which is how the
//! verifier knows it can keep the webpki verifier it built for those roots.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use rustls::RootCertStore;

use crate::material::{
    CA_CRT, MaterialError, SECRET_TYPE_TLS, TLS_CRT, TrustRoots, load_trust_detailed,
};
use crate::secret_ref::SecretRef;
use crate::source::SecretSource;

/// Which source the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustOrigin {
    /// A CA Secret (`tls.crt` and `ca.crt`), watched through the API server.
    Secret(SecretRef),
    /// The X.509 bundle of a SPIFFE trust domain, from the Workload API.
    SpiffeBundle {
        /// The trust domain (e.g. `example.org`).
        trust_domain: String,
    },
}

impl fmt::Display for TrustOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "CA Secret {secret}"),
            Self::SpiffeBundle { trust_domain } => {
                write!(f, "SPIFFE bundle of trust domain {trust_domain}")
            }
        }
    }
}

/// One whole root set, as read from one snapshot of the source.
///
/// Sources hand out `Arc<TrustAnchors>`; the same `Arc` for the same content, so
/// that the verifier rebuilds its webpki verifier only when the roots change.
#[derive(Debug)]
pub struct TrustAnchors {
    roots: Arc<RootCertStore>,
    ignored: usize,
    not_after: Option<SystemTime>,
}

impl TrustAnchors {
    /// A root set from parsed roots; `ignored` certificates were not usable.
    pub fn new(roots: RootCertStore, ignored: usize, not_after: Option<SystemTime>) -> Self {
        Self {
            roots: Arc::new(roots),
            ignored,
            not_after,
        }
    }

    /// The roots.
    pub fn roots(&self) -> &Arc<RootCertStore> {
        &self.roots
    }

    /// How many roots the set holds.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// Whether the set holds no root (sources never hand out such a set).
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Certificates found in the source but not usable as trust anchors.
    pub fn ignored(&self) -> usize {
        self.ignored
    }

    /// The earliest `notAfter` among the root certificates, when known.
    pub fn not_after(&self) -> Option<SystemTime> {
        self.not_after
    }
}

/// Why one handshake-time read of the roots failed (the last good roots were used).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustReloadError {
    /// The CA Secret is not in the cache (deleted, or not yet recreated).
    #[error("CA Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The CA Secret holds no usable root (the error names the Secret and data key).
    #[error("CA {0}")]
    Material(#[source] MaterialError),
    /// The Workload API holds no usable bundle for the trust domain.
    #[error("no usable SPIFFE bundle for trust domain {trust_domain}: {reason}")]
    NoBundle {
        /// The trust domain.
        trust_domain: String,
        /// Why.
        reason: &'static str,
    },
}

/// A source of the trusted roots, read on every handshake.
///
/// Object safe: the verifier holds an `Arc<dyn TrustSource>`.
pub trait TrustSource: Any + Send + Sync + fmt::Debug {
    /// Where the roots come from (for the state, logs and the recorder).
    fn origin(&self) -> &TrustOrigin;

    /// The root set the source holds now, or why it holds none. Returns the same
    /// `Arc` as long as the content is unchanged.
    ///
    /// Called on the handshake path: it must not do I/O and must not hold a lock
    /// while parsing.
    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError>;

    /// The last error of the watch or stream behind the source, if it is failing now.
    fn watch_error(&self) -> Option<String> {
        None
    }
}

/// Remembers the roots loaded from exactly the same CA Secret bytes, so a handshake
/// with an unchanged Secret costs a byte comparison and an `Arc` clone.
///
/// Contract: [`TrustCache::load`] succeeds exactly when
/// [`load_trust_detailed`] would, with the same roots. A hit needs the Secret type
/// `kubernetes.io/tls` and `tls.crt` and `ca.crt` byte-for-byte equal to the last
/// good load's (an absent `ca.crt` equals only an absent one). A miss is fully
/// loaded; a failed load is never remembered and does not evict the last good
/// entry, so a Secret restored to its old bytes is a hit again. Lock-free
/// (`ArcSwapOption`).
pub struct TrustCache {
    last: arc_swap::ArcSwapOption<CachedRoots>,
}

struct CachedRoots {
    tls_crt: Option<Box<[u8]>>,
    ca_crt: Option<Box<[u8]>>,
    anchors: Arc<TrustAnchors>,
}

impl Default for TrustCache {
    fn default() -> Self {
        Self::new()
    }
}

impl TrustCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self {
            last: arc_swap::ArcSwapOption::empty(),
        }
    }

    /// The roots of `secret`, reusing the last load when the bytes are unchanged.
    pub fn load(&self, secret: &Secret) -> Result<Arc<TrustAnchors>, MaterialError> {
        let data = secret.data.as_ref();
        let tls_crt = data.and_then(|d| d.get(TLS_CRT)).map(|v| v.0.as_slice());
        let ca_crt = data.and_then(|d| d.get(CA_CRT)).map(|v| v.0.as_slice());
        if secret.type_.as_deref() == Some(SECRET_TYPE_TLS)
            && let Some(cached) = &*self.last.load()
            && cached.tls_crt.as_deref() == tls_crt
            && cached.ca_crt.as_deref() == ca_crt
        {
            return Ok(cached.anchors.clone());
        }
        // A miss: the full load reports the precise error.
        let TrustRoots { mut roots, ignored } = load_trust_detailed(secret)?;
        // cert-manager writes the CA to both tls.crt and ca.crt: one root, not two.
        let mut seen = Vec::with_capacity(roots.roots.len());
        roots.roots.retain(|anchor| {
            let key = (
                anchor.subject.as_ref().to_vec(),
                anchor.subject_public_key_info.as_ref().to_vec(),
            );
            let new = !seen.contains(&key);
            if new {
                seen.push(key);
            }
            new
        });
        let not_after = earliest_not_after(&[tls_crt, ca_crt]);
        let anchors = Arc::new(TrustAnchors::new(roots, ignored, not_after));
        self.last.store(Some(Arc::new(CachedRoots {
            tls_crt: tls_crt.map(Into::into),
            ca_crt: ca_crt.map(Into::into),
            anchors: anchors.clone(),
        })));
        Ok(anchors)
    }
}

impl fmt::Debug for TrustCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.load();
        f.debug_struct("TrustCache")
            .field("roots", &last.as_ref().map(|c| c.anchors.len()))
            .finish()
    }
}

/// The earliest `notAfter` of the parseable certificates in these PEM values (for
/// the state only: an unparseable certificate is simply not counted).
fn earliest_not_after(values: &[Option<&[u8]>]) -> Option<SystemTime> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    values
        .iter()
        .flatten()
        .flat_map(|pem| CertificateDer::pem_slice_iter(pem).flatten())
        .filter_map(|der| {
            let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
            let secs = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
            SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))
        })
        .min()
}

/// The roots in a watched CA Secret: the Secret from the watch cache
/// ([`SecretSource`], a map read and an `Arc` clone), loaded through a
/// [`TrustCache`] so that unchanged bytes cost a comparison.
pub struct SecretTrustSource {
    origin: TrustOrigin,
    source: SecretSource,
    cache: TrustCache,
}

impl SecretTrustSource {
    /// The roots in `source`'s Secret.
    pub fn new(source: SecretSource) -> Self {
        Self {
            origin: TrustOrigin::Secret(source.secret_ref().clone()),
            source,
            cache: TrustCache::new(),
        }
    }

    /// The watched Secret's cache.
    pub fn secret_source(&self) -> &SecretSource {
        &self.source
    }
}

impl fmt::Debug for SecretTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretTrustSource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl TrustSource for SecretTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        match self.source.get() {
            Some(object) => self.cache.load(&object).map_err(TrustReloadError::Material),
            None => Err(TrustReloadError::NotFound {
                secret: self.source.secret_ref().clone(),
            }),
        }
    }

    fn watch_error(&self) -> Option<String> {
        self.source.last_watch_error()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::ByteString;
    use kube_testbed::pki::TestCa;

    fn ca_secret(tls_crt: &str, ca_crt: Option<&str>) -> Secret {
        let mut data = std::collections::BTreeMap::new();
        data.insert(TLS_CRT.to_owned(), ByteString(tls_crt.as_bytes().to_vec()));
        if let Some(ca) = ca_crt {
            data.insert(CA_CRT.to_owned(), ByteString(ca.as_bytes().to_vec()));
        }
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("ca".into()),
                ..Default::default()
            },
            type_: Some(SECRET_TYPE_TLS.into()),
            data: Some(data),
            ..Default::default()
        }
    }

    #[test]
    fn same_bytes_same_roots_changed_bytes_new_roots_failures_keep_the_entry() {
        let (a, b) = (TestCa::new("A"), TestCa::new("B"));
        let cache = TrustCache::new();
        let first = cache.load(&ca_secret(&a.pem(), Some(&a.pem()))).unwrap();
        assert_eq!(first.len(), 1, "the CA in tls.crt and ca.crt is one root");
        assert!(first.not_after().is_some());
        let again = cache.load(&ca_secret(&a.pem(), Some(&a.pem()))).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "unchanged bytes reuse the roots"
        );

        let both = format!("{}{}", a.pem(), b.pem());
        let overlap = cache.load(&ca_secret(&a.pem(), Some(&both))).unwrap();
        assert!(!Arc::ptr_eq(&first, &overlap));
        assert_eq!(overlap.len(), 2);
        // ca.crt removed: a different Secret, even though tls.crt is the same.
        let without = cache.load(&ca_secret(&a.pem(), None)).unwrap();
        assert!(!Arc::ptr_eq(&overlap, &without));

        // A failed load is not remembered and does not evict the good entry.
        let err = cache.load(&ca_secret("junk", None)).unwrap_err();
        assert_eq!(err.data_key(), Some(TLS_CRT));
        let restored = cache.load(&ca_secret(&a.pem(), None)).unwrap();
        assert!(Arc::ptr_eq(&without, &restored));

        // Same bytes, wrong type: not a hit.
        let mut wrong = ca_secret(&a.pem(), None);
        wrong.type_ = Some("Opaque".into());
        assert!(cache.load(&wrong).is_err());
    }
}
