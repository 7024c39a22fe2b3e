//! One whole root set ([`TrustAnchors`]) and the cache that loads a CA Secret's roots
//! once per distinct content ([`TrustCache`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use rustls::RootCertStore;

use super::trust::{
    ConfigMapTrustError, ConfigMapTrustProblem, ParsedRoots, configmap_ref_of, configmap_value,
    missing_key, parse_bundle, parse_secret,
};
use super::{CA_CRT, MaterialError, TLS_CRT};

/// One whole root set, as read from one snapshot of the source: svc-tls's one
/// root-set type, what the loaders ([`load_trust_detailed`](super::load_trust_detailed),
/// [`load_configmap_trust`](super::load_configmap_trust)), the caches and every
/// [`TrustSource`](crate::trust::TrustSource) return.
///
/// Sources hand out `Arc<TrustAnchors>`; the same `Arc` for the same content, so
/// that the verifier rebuilds its webpki verifier only when the roots change. A
/// clone shares the roots (one `Arc`).
#[derive(Debug, Clone)]
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

    /// The roots (an `Arc`, as rustls's `ClientConfig` and webpki's verifier
    /// builders take them).
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

    /// Whether `other` holds the same roots: the same `Arc`, or another `Arc` of the
    /// same anchors (a source that broke its "same `Arc` for the same content"
    /// contract). Compared only when the pointers differ, which a conforming source
    /// makes happen once per change.
    pub fn same_roots_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.roots, &other.roots) || self.roots.roots == other.roots.roots
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

/// Remembers the roots loaded from exactly the same CA Secret bytes, so a handshake
/// with an unchanged Secret costs a byte comparison and an `Arc` clone.
///
/// Contract: [`TrustCache::load`] succeeds exactly when
/// [`load_trust_detailed`](super::load_trust_detailed) would, with the same roots. A
/// hit needs the Secret type `kubernetes.io/tls` and `tls.crt` and `ca.crt` byte-for-byte equal to the last
/// good load's (an absent `ca.crt` equals only an absent one). A miss is fully
/// loaded. A failed load does not evict the last good entry, so a Secret restored to
/// its old bytes is a hit again; the failing bytes are remembered with their error,
/// so while a CA Secret stays broken every handshake gets the same error back for a
/// byte comparison instead of a re-parse (as [`IdentityCache`](super::IdentityCache)
/// does for identities). Lock-free (`ArcSwapOption`).
pub struct TrustCache {
    last: arc_swap::ArcSwapOption<CachedRoots>,
    failed: arc_swap::ArcSwapOption<FailedRoots>,
    full_loads: AtomicU64,
}

struct FailedRoots {
    type_: Option<String>,
    tls_crt: Option<Box<[u8]>>,
    ca_crt: Option<Box<[u8]>>,
    error: MaterialError,
}

struct CachedRoots {
    /// The Secret's type: it decides which keys are read.
    type_: Option<String>,
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
            failed: arc_swap::ArcSwapOption::empty(),
            full_loads: AtomicU64::new(0),
        }
    }

    /// How many times the roots were parsed (misses): unchanged and remembered-failing
    /// bytes are not parsed again.
    pub fn full_loads(&self) -> u64 {
        self.full_loads.load(Ordering::Relaxed)
    }

    /// The roots of `secret`, reusing the last load when the bytes are unchanged.
    pub fn load(&self, secret: &Secret) -> Result<Arc<TrustAnchors>, MaterialError> {
        let data = secret.data.as_ref();
        let tls_crt = data.and_then(|d| d.get(TLS_CRT)).map(|v| v.0.as_slice());
        let ca_crt = data.and_then(|d| d.get(CA_CRT)).map(|v| v.0.as_slice());
        if let Some(cached) = &*self.last.load()
            && cached.type_.as_deref() == secret.type_.as_deref()
            && cached.tls_crt.as_deref() == tls_crt
            && cached.ca_crt.as_deref() == ca_crt
        {
            return Ok(cached.anchors.clone());
        }
        if let Some(failed) = &*self.failed.load()
            && failed.type_.as_deref() == secret.type_.as_deref()
            && failed.tls_crt.as_deref() == tls_crt
            && failed.ca_crt.as_deref() == ca_crt
        {
            return Err(failed.error.clone());
        }
        // A miss: the full load reports the precise error.
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        let mut parsed = match parse_secret(secret) {
            Ok(loaded) => loaded,
            Err(error) => {
                self.failed.store(Some(Arc::new(FailedRoots {
                    type_: secret.type_.clone(),
                    tls_crt: tls_crt.map(Into::into),
                    ca_crt: ca_crt.map(Into::into),
                    error: error.clone(),
                })));
                return Err(error);
            }
        };
        // A bundle may hold a CA twice: one root, not two. The earliest `notAfter`
        // is read from the value the roots came from (`ca.crt`, or `tls.crt` of a
        // TLS Secret without one).
        dedupe(&mut parsed.roots);
        let loaded = CachedRoots {
            type_: secret.type_.clone(),
            tls_crt: tls_crt.map(Into::into),
            ca_crt: ca_crt.map(Into::into),
            anchors: Arc::new(parsed.into_anchors()),
        };
        Ok(install(&self.last, loaded, CachedRoots::same_bytes)
            .anchors
            .clone())
    }
}

impl CachedRoots {
    fn same_bytes(&self, other: &Self) -> bool {
        self.type_ == other.type_ && self.tls_crt == other.tls_crt && self.ca_crt == other.ca_crt
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

/// Keeps one root per subject and public key (a bundle may hold a CA twice).
fn dedupe(roots: &mut RootCertStore) {
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
}

/// Remembers the roots loaded from exactly the same ConfigMap value (the PEM bundle
/// under one key), so a handshake with an unchanged bundle costs a byte comparison
/// and an `Arc` clone, as [`TrustCache`] does for a CA Secret.
///
/// Contract: [`ConfigMapTrustCache::load`] succeeds exactly when
/// [`load_configmap_trust`](super::load_configmap_trust) would, with the same roots.
/// A failed load does not evict the last good entry; the failing bytes are
/// remembered with their problem, so a bundle that stays broken is not parsed again.
/// Lock-free (`ArcSwapOption`).
#[allow(unreachable_pub)] // named by the trust adapter's sealed trait only
pub struct ConfigMapTrustCache {
    key: String,
    last: arc_swap::ArcSwapOption<CachedBundle>,
    failed: arc_swap::ArcSwapOption<FailedBundle>,
    full_loads: AtomicU64,
}

struct CachedBundle {
    value: Box<[u8]>,
    anchors: Arc<TrustAnchors>,
}

struct FailedBundle {
    value: Box<[u8]>,
    problem: ConfigMapTrustProblem,
}

impl ConfigMapTrustCache {
    /// An empty cache of the bundle under `key`.
    pub(crate) fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            last: arc_swap::ArcSwapOption::empty(),
            failed: arc_swap::ArcSwapOption::empty(),
            full_loads: AtomicU64::new(0),
        }
    }

    /// How many times a bundle was parsed (misses).
    pub(crate) fn full_loads(&self) -> u64 {
        self.full_loads.load(Ordering::Relaxed)
    }

    /// The roots of the bundle under this cache's key in `configmap`, reusing the last
    /// load when the bytes are unchanged.
    pub(crate) fn load(
        &self,
        configmap: &ConfigMap,
    ) -> Result<Arc<TrustAnchors>, ConfigMapTrustError> {
        let Some(value) = configmap_value(configmap, &self.key) else {
            // Names the keys present; no bytes to remember.
            return Err(missing_key(configmap, &self.key));
        };
        if let Some(cached) = &*self.last.load()
            && *cached.value == *value
        {
            return Ok(cached.anchors.clone());
        }
        let named =
            |problem| ConfigMapTrustError::new(configmap_ref_of(configmap), &*self.key, problem);
        if let Some(failed) = &*self.failed.load()
            && *failed.value == *value
        {
            return Err(named(failed.problem.clone()));
        }
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        let mut parsed = match parse_bundle(value) {
            Ok(loaded) => loaded,
            Err(problem) => {
                self.failed.store(Some(Arc::new(FailedBundle {
                    value: value.into(),
                    problem: problem.clone(),
                })));
                return Err(named(problem));
            }
        };
        dedupe(&mut parsed.roots);
        let loaded = CachedBundle {
            value: value.into(),
            anchors: Arc::new(parsed.into_anchors()),
        };
        Ok(install(&self.last, loaded, |a, b| a.value == b.value)
            .anchors
            .clone())
    }
}

/// Makes a full load the last good one of `slot` and returns it, unless a load of the
/// same bytes was installed while it ran: then that one, so that every caller of the
/// same bytes holds one `Arc<TrustAnchors>`. The verifier and the pooled client rely
/// on that (two `Arc`s of one content would look like a trust change and retire the
/// connection pools built on it), and the watch's loader and a builder's first read
/// can both miss on the same new version at once.
fn install<C>(slot: &arc_swap::ArcSwapOption<C>, loaded: C, same: fn(&C, &C) -> bool) -> Arc<C> {
    let loaded = Arc::new(loaded);
    let mut current = slot.load_full();
    loop {
        if let Some(current) = &current
            && same(current, &loaded)
        {
            return current.clone();
        }
        let before = slot.compare_and_swap(&current, Some(loaded.clone()));
        let swapped = match (&*before, &current) {
            (Some(before), Some(current)) => Arc::ptr_eq(before, current),
            (None, None) => true,
            _ => false,
        };
        if swapped {
            return loaded;
        }
        current = arc_swap::Guard::into_inner(before);
    }
}

impl fmt::Debug for ConfigMapTrustCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.load();
        f.debug_struct("ConfigMapTrustCache")
            .field("key", &self.key)
            .field("roots", &last.as_ref().map(|c| c.anchors.len()))
            .finish()
    }
}

/// The roots in a PEM bundle read from a file: every usable `CERTIFICATE` section
/// (none usable, an empty or oversized value, or no PEM, is the problem returned).
pub(crate) fn anchors_from_pem(value: &[u8]) -> Result<TrustAnchors, ConfigMapTrustProblem> {
    parse_bundle(value).map(ParsedRoots::into_anchors)
}

/// The earliest `notAfter` of the parseable certificates in this PEM value (for
/// the state only: an unparseable certificate is simply not counted).
pub(super) fn earliest_not_after(pem: &[u8]) -> Option<SystemTime> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .flatten()
        .filter_map(|der| {
            let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
            let secs = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
            SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))
        })
        .min()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::material::{CA_CRT, SECRET_TYPE_TLS, TLS_CRT};
    use k8s_openapi::ByteString;
    use test_support::pki::TestCa;

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

    /// The watch's loader and a builder's first read both miss on one new version:
    /// the load that finishes second must hand out the roots the first installed
    /// (before, it installed its own `Arc` of the same roots, which the verifier took
    /// for a trust change, retiring the pooled client's warm pool: issue 48).
    #[test]
    fn a_load_finishing_after_another_of_the_same_bytes_gets_the_installed_roots() {
        let a = TestCa::new("A");
        let secret = ca_secret(&a.pem(), Some(&a.pem()));
        let cache = TrustCache::new();
        // The second miss: parsed before the first is installed, installed after.
        let racing = CachedRoots {
            type_: secret.type_.clone(),
            tls_crt: Some(a.pem().into_bytes().into()),
            ca_crt: Some(a.pem().into_bytes().into()),
            anchors: Arc::new(TrustAnchors::new(
                (**crate::material::load_trust_detailed(&secret)
                    .unwrap()
                    .roots())
                .clone(),
                0,
                None,
            )),
        };
        let first = cache.load(&secret).unwrap();
        let second = install(&cache.last, racing, CachedRoots::same_bytes);
        assert!(
            Arc::ptr_eq(&first, &second.anchors),
            "two Arcs for one content"
        );
        assert!(Arc::ptr_eq(&first, &cache.load(&secret).unwrap()));
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

        // A failed load does not evict the good entry, and is remembered: the same
        // broken bytes are not parsed again.
        let err = cache.load(&ca_secret("junk", None)).unwrap_err();
        assert_eq!(err.data_key(), Some(TLS_CRT));
        let parsed = cache.full_loads();
        assert_eq!(cache.load(&ca_secret("junk", None)).unwrap_err(), err);
        assert_eq!(
            cache.full_loads(),
            parsed,
            "the broken bytes were parsed again"
        );
        let restored = cache.load(&ca_secret(&a.pem(), None)).unwrap();
        assert!(Arc::ptr_eq(&without, &restored));

        // Same bytes, wrong type: not a hit.
        let mut wrong = ca_secret(&a.pem(), None);
        wrong.type_ = Some("Opaque".into());
        assert!(cache.load(&wrong).is_err());
    }

    fn bundle(key: &str, value: &str) -> ConfigMap {
        ConfigMap {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("bundle".into()),
                ..Default::default()
            },
            data: Some([(key.to_owned(), value.to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn configmap_bundle_same_bytes_same_roots_failures_remembered_and_keep_the_entry() {
        let (a, b) = (TestCa::new("A"), TestCa::new("B"));
        let cache = ConfigMapTrustCache::new("trust-bundle.pem");
        let twice = format!("{}{}", a.pem(), a.pem());
        let first = cache.load(&bundle("trust-bundle.pem", &twice)).unwrap();
        assert_eq!(first.len(), 1, "a CA listed twice is one root");
        assert!(first.not_after().is_some());
        let again = cache.load(&bundle("trust-bundle.pem", &twice)).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "unchanged bytes reuse the roots"
        );
        assert_eq!(
            cache.full_loads(),
            1,
            "unchanged bytes are not parsed again"
        );

        let both = format!("{}{}", a.pem(), b.pem());
        let replaced = cache.load(&bundle("trust-bundle.pem", &both)).unwrap();
        assert!(!Arc::ptr_eq(&first, &replaced));
        assert_eq!(replaced.len(), 2);

        let err = cache.load(&bundle("trust-bundle.pem", "junk")).unwrap_err();
        assert!(matches!(err.problem, ConfigMapTrustProblem::NotPem { .. }));
        assert_eq!(err.configmap.to_string(), "ns/bundle");
        assert_eq!(err.key, "trust-bundle.pem");
        let parsed = cache.full_loads();
        assert_eq!(
            cache.load(&bundle("trust-bundle.pem", "junk")).unwrap_err(),
            err
        );
        assert_eq!(
            cache.full_loads(),
            parsed,
            "the broken bytes were parsed again"
        );
        let restored = cache.load(&bundle("trust-bundle.pem", &both)).unwrap();
        assert!(Arc::ptr_eq(&replaced, &restored));

        // Another key of the same ConfigMap is not read.
        let missing = cache.load(&bundle("ca.crt", &both)).unwrap_err();
        assert_eq!(
            missing.problem,
            ConfigMapTrustProblem::MissingKey {
                present: vec!["ca.crt".to_owned()]
            }
        );
    }
}
