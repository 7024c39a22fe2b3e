//! The identity cache: a handshake with unchanged Secret bytes reuses the last
//! load instead of repeating it.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use rustls::crypto::CryptoProvider;

use super::identity::{Identity, load_core};
use super::secret::{check_type, required, secret_ref_of};
use super::{MaterialError, MaterialErrorKind, TLS_CRT, TLS_KEY};
use crate::origin::MaterialOrigin;

/// Remembers the last identity loaded from exactly the same Secret bytes, so a
/// handshake with an unchanged Secret costs a byte comparison instead of a full
/// load.
///
/// Contract: [`IdentityCache::load`] returns what [`load_identity`](super::load_identity)
/// would. A hit needs `tls.crt` and `tls.key` byte-for-byte equal to the last good
/// load's (or the very object the watch's loader loaded them from, still alive: the
/// same bytes without comparing them), and validity is re-checked against the
/// current time on every call. A
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
/// handshake) is recorded once, in `docs/decisions/per-handshake-reload-cost.md`.
pub struct IdentityCache {
    provider: Arc<CryptoProvider>,
    last: arc_swap::ArcSwapOption<Cached>,
    failed: arc_swap::ArcSwapOption<Failed>,
    /// Full loads (certificate and key parsed) so far: the misses.
    full_loads: AtomicU64,
    /// The load in flight, if any: a handshake that misses while it runs is told so
    /// instead of parsing the same bytes a second time (single flight).
    loading: arc_swap::ArcSwapOption<InFlight>,
}

/// A full load in progress, and how the callers that may wait for it do.
struct InFlight {
    cert_pem: Box<[u8]>,
    key_pem: Box<[u8]>,
    done: Mutex<bool>,
    finished: Condvar,
}

impl InFlight {
    fn is_of(&self, cert_pem: &[u8], key_pem: &[u8]) -> bool {
        *self.cert_pem == *cert_pem && *self.key_pem == *key_pem
    }

    /// Blocks until the load finishes, at most `LOAD_WAIT`. Never on a handshake.
    fn wait(&self) {
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self
            .finished
            .wait_timeout_while(done, LOAD_WAIT, |done| !*done);
    }

    fn finish(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.finished.notify_all();
    }
}

/// How long a caller off the handshake path waits for another caller's load of the
/// same bytes before loading them itself (a load takes milliseconds).
const LOAD_WAIT: Duration = Duration::from_secs(2);

/// Ends a claimed load: clears the slot and wakes the waiters, on every path out.
struct Claimed<'a> {
    cache: &'a IdentityCache,
    flight: Arc<InFlight>,
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        let _ = self
            .cache
            .loading
            .compare_and_swap(&Some(self.flight.clone()), None::<Arc<InFlight>>);
        self.flight.finish();
    }
}

/// What a handshake's read of the cache gives: the identity, or word that another
/// caller is loading a new version right now (the handshake then presents the
/// identity already served instead of parsing a second time).
#[derive(Debug)]
pub enum HandshakeLoad {
    /// The identity of the Secret's bytes.
    Loaded(Identity),
    /// Another caller (the watch's loader, usually) is loading new bytes now.
    InProgress,
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
    /// The shared Secret these bytes were read from, when the watch's loader named
    /// it ([`IdentityCache::load_shared`]); `Weak::new()` otherwise. A handshake
    /// reading that same object skips the byte comparison: while this `Weak` lives,
    /// the object's allocation is not freed, so no other object can have its
    /// address, and an `Arc`'s value cannot be changed in place while a `Weak` to
    /// it exists (`Arc::get_mut` refuses, `Arc::make_mut` moves it out).
    object: Weak<Secret>,
}

impl Cached {
    fn valid_at(&self, now: SystemTime) -> bool {
        self.identity.not_before() <= now && now <= self.identity.not_after()
    }
}

impl IdentityCache {
    /// An empty cache loading keys with `provider` (see [`crypto_provider`](super::crypto_provider)).
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            last: arc_swap::ArcSwapOption::empty(),
            failed: arc_swap::ArcSwapOption::empty(),
            full_loads: AtomicU64::new(0),
            loading: arc_swap::ArcSwapOption::empty(),
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

    /// [`IdentityCache::load`] of the watch's shared object, remembered as the
    /// object these bytes came from: a handshake that then reads the same object
    /// ([`IdentityCache::load_on_handshake`] with a reference into this `Arc`) is
    /// answered without comparing the bytes again (on the first handshake after a
    /// rotation, the loader's copy is in another core's cache).
    pub(crate) fn load_shared(&self, secret: &Arc<Secret>) -> Result<Identity, MaterialError> {
        let identity = self.load_from(secret, Arc::downgrade(secret), SystemTime::now())?;
        // A hit (a new object with the same bytes: a label changed) names it here; a
        // full load stored it with the entry.
        self.remember_object(secret);
        Ok(identity)
    }

    /// Names `secret` as the object of the remembered bytes, when they are its bytes.
    fn remember_object(&self, secret: &Arc<Secret>) {
        let current = self.last.load_full();
        let Some(cached) = &current else {
            return;
        };
        if std::ptr::eq(cached.object.as_ptr(), Arc::as_ptr(secret)) {
            return;
        }
        let name = || secret_ref_of(secret);
        let Ok((cert_pem, key_pem)) = pems(secret, &name) else {
            return;
        };
        if *cached.cert_pem != *cert_pem || *cached.key_pem != *key_pem {
            // Another version was stored meanwhile: nothing to name.
            return;
        }
        let named = Arc::new(Cached {
            cert_pem: cached.cert_pem.clone(),
            key_pem: cached.key_pem.clone(),
            identity: cached.identity.clone(),
            object: Arc::downgrade(secret),
        });
        // Lost to a newer store: that one stands.
        let _ = self.last.compare_and_swap(&current, Some(named));
    }

    /// [`IdentityCache::load`] with validity checked at `now`. A load of the same
    /// bytes already in flight (another caller's) is waited for, not repeated.
    pub fn load_at(&self, secret: &Secret, now: SystemTime) -> Result<Identity, MaterialError> {
        self.load_from(secret, Weak::new(), now)
    }

    /// [`IdentityCache::load_at`], a full load remembering `object` (see
    /// `Cached::object`) with its bytes.
    fn load_from(
        &self,
        secret: &Secret,
        object: Weak<Secret>,
        now: SystemTime,
    ) -> Result<Identity, MaterialError> {
        let name = || secret_ref_of(secret);
        let (cert_pem, key_pem) = pems(secret, &name)?;
        if let Some(hit) = self.hit(cert_pem, key_pem, now) {
            return hit;
        }
        let claimed = match self.claim(cert_pem, key_pem) {
            Ok(claimed) => {
                // A load that finished just before the claim: its answer stands.
                if let Some(hit) = self.hit(cert_pem, key_pem, now) {
                    return hit;
                }
                Some(claimed)
            }
            Err(other) if other.is_of(cert_pem, key_pem) => {
                other.wait();
                if let Some(hit) = self.hit(cert_pem, key_pem, now) {
                    return hit;
                }
                None
            }
            // Other bytes in flight: these are loaded too.
            Err(_) => None,
        };
        let loaded = self.full_load(&name, cert_pem, key_pem, now, object);
        drop(claimed);
        loaded
    }

    /// The handshake's read: [`IdentityCache::load`], except that a miss while another
    /// caller's load is in flight returns [`HandshakeLoad::InProgress`] at once
    /// instead of parsing (no lock, no wait): a handshake racing the watch's loader
    /// never pays a key parse, and concurrent handshakes never parse one version twice.
    pub fn load_on_handshake(&self, secret: &Secret) -> Result<HandshakeLoad, MaterialError> {
        self.load_on_handshake_at(secret, SystemTime::now())
    }

    /// [`IdentityCache::load_on_handshake`] with validity checked at `now`.
    pub(crate) fn load_on_handshake_at(
        &self,
        secret: &Secret,
        now: SystemTime,
    ) -> Result<HandshakeLoad, MaterialError> {
        // The object the loader named: no byte comparison (see `Cached::object`).
        if let Some(cached) = &*self.last.load()
            && std::ptr::eq(cached.object.as_ptr(), secret)
            && cached.valid_at(now)
        {
            return Ok(HandshakeLoad::Loaded(cached.identity.clone()));
        }
        let name = || secret_ref_of(secret);
        let (cert_pem, key_pem) = pems(secret, &name)?;
        if let Some(hit) = self.hit(cert_pem, key_pem, now) {
            return hit.map(HandshakeLoad::Loaded);
        }
        let Ok(claimed) = self.claim(cert_pem, key_pem) else {
            return Ok(HandshakeLoad::InProgress);
        };
        // A load that finished just before the claim: its answer stands.
        if let Some(hit) = self.hit(cert_pem, key_pem, now) {
            return hit.map(HandshakeLoad::Loaded);
        }
        let loaded = self.full_load(&name, cert_pem, key_pem, now, Weak::new());
        drop(claimed);
        loaded.map(HandshakeLoad::Loaded)
    }

    /// The remembered answer for these bytes at `now`, if there is one.
    fn hit(
        &self,
        cert_pem: &[u8],
        key_pem: &[u8],
        now: SystemTime,
    ) -> Option<Result<Identity, MaterialError>> {
        if let Some(cached) = &*self.last.load()
            && *cached.cert_pem == *cert_pem
            && *cached.key_pem == *key_pem
            && cached.valid_at(now)
        {
            return Some(Ok(cached.identity.clone()));
        }
        if let Some(failed) = &*self.failed.load()
            && *failed.cert_pem == *cert_pem
            && *failed.key_pem == *key_pem
            && failed.holds_at(now)
        {
            return Some(Err(failed.error.clone()));
        }
        None
    }

    /// Claims the load slot for these bytes, or returns the load in flight.
    fn claim(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<Claimed<'_>, Arc<InFlight>> {
        let flight = Arc::new(InFlight {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
            done: Mutex::new(false),
            finished: Condvar::new(),
        });
        let before = self
            .loading
            .compare_and_swap(&None::<Arc<InFlight>>, Some(flight.clone()));
        match &*before {
            None => Ok(Claimed {
                cache: self,
                flight,
            }),
            Some(other) => Err(other.clone()),
        }
    }

    /// Parses the certificate and key, remembering the result (and `object`, the
    /// shared Secret they were read from when the loader names it).
    fn full_load(
        &self,
        name: &dyn Fn() -> MaterialOrigin,
        cert_pem: &[u8],
        key_pem: &[u8],
        now: SystemTime,
        object: Weak<Secret>,
    ) -> Result<Identity, MaterialError> {
        // A miss, or a hit outside the validity period (the full load then
        // reports the precise error). What is stored now, to detect a load of the
        // same bytes that finishes first (the watch's loader and a first handshake).
        let seen = self.last.load_full();
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        let identity = match load_core(name, cert_pem, key_pem, &self.provider, Some(now)) {
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
            object,
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

/// The Secret's type checked and its `tls.crt` and `tls.key`.
fn pems<'a>(
    secret: &'a Secret,
    name: &dyn Fn() -> MaterialOrigin,
) -> Result<(&'a [u8], &'a [u8]), MaterialError> {
    check_type(secret, name)?;
    Ok((
        required(secret, TLS_CRT, name)?,
        required(secret, TLS_KEY, name)?,
    ))
}

impl fmt::Debug for IdentityCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.load();
        f.debug_struct("IdentityCache")
            .field("last", &last.as_ref().map(|c| &c.identity))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use test_support::pki::TestCa;

    fn secret(cert_pem: &str, key_pem: &str) -> Secret {
        serde_json::from_value(test_support::secret::tls_secret(
            "ns", "id", cert_pem, key_pem,
        ))
        .unwrap()
    }

    fn cache() -> IdentityCache {
        IdentityCache::new(Arc::new(crate::material::crypto_provider()))
    }

    #[test]
    fn a_handshake_that_misses_while_a_load_is_in_flight_does_not_parse() {
        let leaf = TestCa::new("clients").client_leaf("a", 1);
        let cache = cache();
        // The loader has claimed the new version and is parsing it.
        let claimed = cache
            .claim(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
            .ok()
            .unwrap();
        let secret = secret(&leaf.cert_pem, &leaf.key_pem);
        for _ in 0..3 {
            assert!(matches!(
                cache.load_on_handshake(&secret).unwrap(),
                HandshakeLoad::InProgress
            ));
        }
        assert_eq!(cache.full_loads(), 0, "a handshake parsed");
        drop(claimed);
        assert!(matches!(
            cache.load_on_handshake(&secret).unwrap(),
            HandshakeLoad::Loaded(_)
        ));
        assert_eq!(cache.full_loads(), 1);
    }

    fn loaded(load: HandshakeLoad) -> Identity {
        match load {
            HandshakeLoad::Loaded(identity) => identity,
            HandshakeLoad::InProgress => panic!("in progress"),
        }
    }

    #[test]
    fn a_handshake_on_the_loaders_object_is_answered_and_another_object_never_taken_for_it() {
        let ca = TestCa::new("clients");
        let (one, two) = (ca.client_leaf("a", 1), ca.client_leaf("b", 2));
        let cache = cache();
        let first = Arc::new(secret(&one.cert_pem, &one.key_pem));
        let identity = cache.load_shared(&first).unwrap();
        assert_eq!(cache.full_loads(), 1);
        let read = loaded(cache.load_on_handshake(&first).unwrap());
        assert!(Arc::ptr_eq(read.certified_key(), identity.certified_key()));
        assert_eq!(cache.full_loads(), 1);

        // The loader's object gone: a new object (the allocator's next block of
        // that size, were the old one freed) is read by its bytes, never by address.
        drop(first);
        let second = Arc::new(secret(&two.cert_pem, &two.key_pem));
        let read = loaded(cache.load_on_handshake(&second).unwrap());
        assert_eq!(read.serial_hex(), "02");
        assert_eq!(cache.full_loads(), 2);
    }

    #[test]
    fn the_loaders_object_is_still_checked_for_validity_and_renamed_on_a_metadata_change() {
        let leaf = TestCa::new("clients").client_leaf("a", 1);
        let cache = cache();
        let first = Arc::new(secret(&leaf.cert_pem, &leaf.key_pem));
        let identity = cache.load_shared(&first).unwrap();
        let later = identity.not_after() + Duration::from_secs(86_400);
        let error = cache.load_on_handshake_at(&first, later).err().unwrap();
        assert!(
            matches!(error.kind(), MaterialErrorKind::CertificateExpired { .. }),
            "{error:?}"
        );

        // A new version with the same bytes (a label changed): no parse, and the
        // new object is the one named.
        let mut relabelled = (*first).clone();
        relabelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("rotated".into(), "no".into());
        let relabelled = Arc::new(relabelled);
        let before = cache.full_loads();
        cache.load_shared(&relabelled).unwrap();
        assert_eq!(cache.full_loads(), before);
        let named = cache.last.load_full().unwrap();
        assert!(std::ptr::eq(
            named.object.as_ptr(),
            Arc::as_ptr(&relabelled)
        ));
        let read = loaded(cache.load_on_handshake(&relabelled).unwrap());
        assert!(Arc::ptr_eq(read.certified_key(), identity.certified_key()));
    }

    #[test]
    fn a_load_of_the_bytes_in_flight_waits_for_it_instead_of_parsing_again() {
        let leaf = TestCa::new("clients").client_leaf("a", 1);
        let cache = Arc::new(cache());
        let secret = secret(&leaf.cert_pem, &leaf.key_pem);
        let claimed = cache
            .claim(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
            .ok()
            .unwrap();
        let waiter = {
            let (cache, secret) = (cache.clone(), secret.clone());
            std::thread::spawn(move || cache.load(&secret).map(|i| i.serial_hex().to_owned()))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            cache.full_loads(),
            0,
            "the waiter parsed instead of waiting"
        );
        let name = || secret_ref_of(&secret);
        let (cert, key) = pems(&secret, &name).unwrap();
        cache
            .full_load(&name, cert, key, SystemTime::now(), Weak::new())
            .unwrap();
        drop(claimed);
        assert_eq!(waiter.join().unwrap().unwrap(), "01");
        assert_eq!(cache.full_loads(), 1);
    }
}
