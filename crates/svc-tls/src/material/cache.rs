//! The identity cache: a handshake with unchanged Secret bytes reuses the last
//! load instead of repeating it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use rustls::crypto::CryptoProvider;

use super::identity::{Identity, load_core};
use super::secret::{check_type, required, secret_ref_of};
use super::{MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY};

/// Remembers the last identity loaded from exactly the same Secret bytes, so a
/// handshake with an unchanged Secret costs a byte comparison instead of a full
/// load.
///
/// Contract: [`IdentityCache::load`] returns what [`load_identity`](super::load_identity)
/// would. A hit needs `tls.crt` and `tls.key` byte-for-byte equal to the last good
/// load's, and validity is re-checked against the current time on every call. A
/// miss is fully loaded at once; a failed load does not evict the last good entry.
/// Lock-free (`ArcSwapOption`).
///
/// The last *failed* bytes are remembered too, with their error: while a Secret
/// stays broken, every handshake (and every principal signature) gets the same
/// error back for the cost of a byte comparison instead of a full re-parse (up
/// to a millisecond for RSA-4096, on a Tokio worker). An error that depends on
/// the time is reused only while it still holds: a not-yet-valid leaf is loaded
/// again once its `notBefore` has passed.
///
/// Why it exists (aws-lc-rs RSA key loading costs hundreds of microseconds per
/// handshake) is recorded once, in `docs/decisions.md`, section
/// *IdentityCache: reuse a load for byte-identical Secret data*.
pub struct IdentityCache {
    provider: Arc<CryptoProvider>,
    last: arc_swap::ArcSwapOption<Cached>,
    failed: arc_swap::ArcSwapOption<Failed>,
    /// Full loads (certificate and key parsed) so far: the misses.
    full_loads: AtomicU64,
}

struct Failed {
    cert_pem: Box<[u8]>,
    key_pem: Box<[u8]>,
    error: MaterialError,
}

impl Failed {
    /// Whether the remembered error is still the answer at `now`.
    fn holds_at(&self, now: SystemTime) -> bool {
        match self.error.kind() {
            MaterialErrorKind::CertificateNotYetValid { not_before, .. } => now < *not_before,
            MaterialErrorKind::CertificateExpired { not_after, .. } => now > *not_after,
            _ => true,
        }
    }
}

struct Cached {
    cert_pem: Box<[u8]>,
    key_pem: Box<[u8]>,
    identity: Identity,
}

impl IdentityCache {
    /// An empty cache loading keys with `provider` (see [`crypto_provider`](super::crypto_provider)).
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            last: arc_swap::ArcSwapOption::empty(),
            failed: arc_swap::ArcSwapOption::empty(),
            full_loads: AtomicU64::new(0),
        }
    }

    /// How many times this cache has parsed a certificate and key (its misses, failed
    /// loads included); a hit compares bytes only. What proves that no handshake after
    /// a rotation pays a key parse: the watch's loader parses each new version, so
    /// this does not move during the handshakes that follow (`cargo xtask bench`).
    pub fn full_loads(&self) -> u64 {
        self.full_loads.load(Ordering::Relaxed)
    }

    /// The crypto provider keys are loaded with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }

    /// [`load_identity`](super::load_identity), reusing the previous result when `tls.crt` and
    /// `tls.key` are byte-for-byte the same as last time.
    pub fn load(&self, secret: &Secret) -> Result<Identity, MaterialError> {
        self.load_at(secret, SystemTime::now())
    }

    /// [`IdentityCache::load`] with validity checked at `now`.
    pub fn load_at(&self, secret: &Secret, now: SystemTime) -> Result<Identity, MaterialError> {
        let name = || secret_ref_of(secret);
        check_type(secret, &name)?;
        let cert_pem = required(secret, TLS_CRT, &name)?;
        let key_pem = required(secret, TLS_KEY, &name)?;
        if let Some(cached) = &*self.last.load()
            && *cached.cert_pem == *cert_pem
            && *cached.key_pem == *key_pem
            && cached.identity.not_before() <= now
            && now <= cached.identity.not_after()
        {
            return Ok(cached.identity.clone());
        }
        if let Some(failed) = &*self.failed.load()
            && *failed.cert_pem == *cert_pem
            && *failed.key_pem == *key_pem
            && failed.holds_at(now)
        {
            return Err(failed.error.clone());
        }
        // A miss, or a hit outside the validity period (the full load then
        // reports the precise error). What is stored now, to detect a load of the
        // same bytes that finishes first (the watch's loader and a first handshake).
        let seen = self.last.load_full();
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        let identity = match load_core(&name, cert_pem, key_pem, &self.provider, Some(now)) {
            Ok(identity) => identity,
            Err(error) => {
                self.failed.store(Some(Arc::new(Failed {
                    cert_pem: cert_pem.into(),
                    key_pem: key_pem.into(),
                    error: error.clone(),
                })));
                return Err(error);
            }
        };
        let fresh = Arc::new(Cached {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
            identity: identity.clone(),
        });
        let before = self.last.compare_and_swap(&seen, Some(fresh));
        let stored_meanwhile = match (&*before, &seen) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, None) => false,
            _ => true,
        };
        // Another load stored first: when it is of these bytes, serve its identity,
        // so that every user holds one key (warmed once). Otherwise it is another
        // version, left in place; this one is served to this caller only.
        if stored_meanwhile
            && let Some(other) = &*before
            && *other.cert_pem == *cert_pem
            && *other.key_pem == *key_pem
        {
            return Ok(other.identity.clone());
        }
        Ok(identity)
    }

    /// Loads the Secret's identity without checking the leaf's validity period (nothing
    /// is remembered). For start-up only: an expired or not-yet-valid leaf is then
    /// served and reported instead of stopping the service, and every handshake
    /// after that goes through [`IdentityCache::load`], which does check.
    pub fn load_ignoring_validity(&self, secret: &Secret) -> Result<Identity, MaterialError> {
        let name = || secret_ref_of(secret);
        check_type(secret, &name)?;
        let cert_pem = required(secret, TLS_CRT, &name)?;
        let key_pem = required(secret, TLS_KEY, &name)?;
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        load_core(&name, cert_pem, key_pem, &self.provider, None)
    }

    /// Forgets the remembered identity and failure (the next load is a full one).
    pub fn clear(&self) {
        self.last.store(None);
        self.failed.store(None);
    }
}

impl fmt::Debug for IdentityCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.load();
        f.debug_struct("IdentityCache")
            .field("last", &last.as_ref().map(|c| &c.identity))
            .finish_non_exhaustive()
    }
}
