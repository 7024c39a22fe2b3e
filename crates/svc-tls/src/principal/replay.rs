//! [`ReplayCache`]: the signed principals a receiver has accepted, by their `jti`, so
//! that a captured token is refused the second time it is presented.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The default bound on the `jti`s a [`ReplayCache`] remembers at once. An entry
/// lives until its token's `exp` plus the clock skew (at most
/// [`DEFAULT_MAX_PRINCIPAL_LIFETIME`](super::DEFAULT_MAX_PRINCIPAL_LIFETIME) plus
/// the skew): 100 000 entries hold more than 300 distinct principals a second over
/// that lifetime, in about 10 MB.
pub const DEFAULT_REPLAY_CAPACITY: usize = 100_000;

/// The longest `jti` accepted, in bytes (this crate's senders write 22).
pub(crate) const MAX_JTI_BYTES: usize = 64;

/// Why [`ReplayCache::accept`] refused a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its `jti` was accepted before.
    Replayed,
    /// `capacity` unexpired entries are held.
    Full {
        /// The bound.
        capacity: usize,
    },
}

/// The `jti`s of accepted signed principals, each kept until its token expires (with
/// the clock skew), at most `capacity` at once.
///
/// **Bound and eviction**: an entry goes when its token's `exp` (plus the skew) has
/// passed, checked on each insertion, oldest expiry first. When `capacity`
/// unexpired entries are held, a new token is refused
/// ([`VerifyError::ReplayCacheFull`](super::VerifyError::ReplayCacheFull), counted) rather than an entry evicted early:
/// evicting would let the evicted token be replayed while it is still valid. Only a
/// sender holding a trusted key can fill it (tokens are checked here after their
/// signature, times and audience), and the count says so.
///
/// Share one per receiver (an `Arc` in [`VerifyOptions`](super::VerifyOptions) or on
/// an [`IngressVerifier`](super::IngressVerifier)); a `Mutex` guards it, held for one
/// map lookup and insertion per request (never on a TLS handshake).
pub struct ReplayCache {
    capacity: usize,
    seen: Mutex<Seen>,
    replays: AtomicU64,
    full: AtomicU64,
}

#[derive(Default)]
struct Seen {
    /// `jti` → the time (Unix seconds) after which its token is no longer accepted.
    by_jti: HashMap<Box<str>, u64>,
    /// The same entries ordered by that time, for eviction.
    by_expiry: BTreeSet<(u64, Box<str>)>,
}

impl fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .field("replays", &self.replays())
            .field("refused_full", &self.refused_full())
            .finish()
    }
}

/// One cache is equal only to itself (what [`VerifyOptions`](super::VerifyOptions)'s
/// equality compares).
impl PartialEq for ReplayCache {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for ReplayCache {}

impl Default for ReplayCache {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_CAPACITY)
    }
}

impl ReplayCache {
    /// A cache of at most `capacity` unexpired `jti`s (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            seen: Mutex::new(Seen::default()),
            replays: AtomicU64::new(0),
            full: AtomicU64::new(0),
        }
    }

    /// Records `jti` as used until `until` (Unix seconds), `now` being the time of the
    /// check.
    ///
    /// # Errors
    /// [`Refused::Replayed`] when it was accepted before and has not expired;
    /// [`Refused::Full`] when `capacity` unexpired entries are held (the verifier
    /// turns them into its `VerifyError`s).
    pub(crate) fn accept(&self, jti: &str, until: u64, now: u64) -> Result<(), Refused> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(first) = seen.by_expiry.first()
            && first.0 < now
        {
            if let Some((_, expired)) = seen.by_expiry.pop_first() {
                seen.by_jti.remove(&expired);
            }
        }
        if seen.by_jti.contains_key(jti) {
            self.replays.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Replayed);
        }
        if seen.by_jti.len() >= self.capacity {
            self.full.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Full {
                capacity: self.capacity,
            });
        }
        let jti: Box<str> = jti.into();
        seen.by_expiry.insert((until, jti.clone()));
        seen.by_jti.insert(jti, until);
        Ok(())
    }

    /// How many `jti`s are held now (expired ones included until the next insertion).
    pub fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_jti
            .len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tokens refused because their `jti` was accepted before.
    pub fn replays(&self) -> u64 {
        self.replays.load(Ordering::Relaxed)
    }

    /// Tokens refused because the cache was full.
    pub fn refused_full(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_second_use_is_refused_until_the_token_expires() {
        let cache = ReplayCache::new(10);
        cache.accept("a", 100, 50).unwrap();
        assert!(matches!(cache.accept("a", 100, 60), Err(Refused::Replayed)));
        assert_eq!(cache.replays(), 1);
        // Past its expiry the entry is gone (the token itself is refused as expired
        // by the time checks before it gets here).
        cache.accept("b", 200, 101).unwrap();
        assert_eq!(cache.len(), 1);
        cache.accept("a", 300, 101).unwrap();
    }

    #[test]
    fn a_flood_of_distinct_tokens_stays_within_the_bound_and_is_refused_past_it() {
        let cache = ReplayCache::new(1_000);
        for i in 0..1_000 {
            cache.accept(&format!("jti-{i}"), 1_000 + i, 0).unwrap();
        }
        for i in 0..5_000 {
            assert!(matches!(
                cache.accept(&format!("flood-{i}"), 10_000, 10),
                Err(Refused::Full { capacity: 1_000 })
            ));
        }
        assert_eq!(cache.len(), 1_000);
        assert_eq!(cache.refused_full(), 5_000);
        // As entries expire, room is made, oldest first: at 1 500 the 500 tokens that
        // expired before are gone, and the new one is held.
        cache.accept("later", 10_000, 1_500).unwrap();
        assert_eq!(cache.len(), 501);
    }
}
