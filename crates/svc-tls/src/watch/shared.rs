//! One watched Secret as a registry shares it ([`SharedSecret`]), and its loader: each
//! new version the watch delivers is loaded once into the identity and root-set caches
//! its users read on the handshake path (the key warmed with one signature: AWS-LC
//! builds an RSA key's Montgomery contexts at its first signature), then the resolvers
//! and verifiers built over it are told (`crate::follow`).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use cluster_id::ClusterId;
use rustls::SignatureScheme;
use rustls::crypto::CryptoProvider;

use super::built::Built;
use super::lease::{Lease, Leases};
use super::runtime::RuntimeLiveness;
use super::secret::SecretSource;
use super::shareable::{EntryValue, SharedValue};
use crate::follow::{Follower, Followers};
use crate::material::{IdentityCache, TrustCache};
use crate::origin::SecretRef;

/// One watched Secret as the registry shares it: its cache, and the identity and trust
/// loads of its current version, made when the watch delivers it. Cheap to clone.
#[derive(Clone)]
pub struct SharedSecret {
    inner: Arc<Shared>,
}

struct Shared {
    /// What the options-based constructors build over this Secret (its resolver, its
    /// verifier), one of each type, so that every construction shares one.
    built: Built,
    /// What callers built over this Secret outside the registry's caches hold.
    leases: Leases,
    source: SecretSource,
    identity: Arc<IdentityCache>,
    trust: Arc<TrustCache>,
    wants_identity: AtomicBool,
    wants_trust: AtomicBool,
    /// Changes of the cache the loader has processed.
    loaded: AtomicU64,
    /// Resolvers and verifiers over this Secret, reloaded after each load.
    followers: Followers,
    /// The cluster the Secret is read from.
    cluster: ClusterId,
    /// The runtime of the caller's client, when the watch runs through it.
    client_runtime: Option<RuntimeLiveness>,
}

impl fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSecret")
            .field("cluster", &self.inner.cluster)
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl SharedSecret {
    /// Shares `source` and starts its loader (on the current runtime: the registry's).
    pub(super) fn start(
        source: SecretSource,
        cluster: ClusterId,
        provider: Arc<CryptoProvider>,
        client_runtime: Option<RuntimeLiveness>,
    ) -> Self {
        let shared = Self {
            inner: Arc::new(Shared {
                built: Built::default(),
                leases: Leases::default(),
                source,
                identity: Arc::new(IdentityCache::new(provider)),
                trust: Arc::new(TrustCache::new()),
                wants_identity: AtomicBool::new(false),
                wants_trust: AtomicBool::new(false),
                loaded: AtomicU64::new(0),
                followers: Followers::default(),
                cluster,
                client_runtime,
            }),
        };
        let changes = shared.inner.source.changes();
        tokio::spawn(load_each_version(Arc::downgrade(&shared.inner), changes));
        shared
    }

    /// The Secret.
    pub fn secret_ref(&self) -> &SecretRef {
        self.inner.source.secret_ref()
    }

    /// The cluster the Secret is read from.
    pub fn cluster(&self) -> &ClusterId {
        &self.inner.cluster
    }

    /// Whether the watch can still run: false once the runtime of the caller's client
    /// it runs through (a client without configuration) has ended.
    pub(super) fn is_alive(&self) -> bool {
        self.inner
            .client_runtime
            .as_ref()
            .is_none_or(RuntimeLiveness::is_alive)
    }

    /// The watched Secret's cache.
    pub fn source(&self) -> &SecretSource {
        &self.inner.source
    }

    /// How many changes of the Secret's cache have been loaded so far (the first list
    /// counts as one): a caller that wrote a new version waits for this to move to
    /// know the version's load is done.
    pub fn loaded_changes(&self) -> u64 {
        self.inner.loaded.load(Ordering::Acquire)
    }

    /// The identity cache every user of this Secret reads; from now on each new
    /// version is loaded into it (and its key warmed) when the watch delivers it.
    pub fn identity_cache(&self) -> Arc<IdentityCache> {
        if !self.inner.wants_identity.swap(true, Ordering::AcqRel) {
            self.inner.load_identity();
        }
        self.inner.identity.clone()
    }

    /// The root-set cache every user of this Secret as a CA reads; from now on each
    /// new version is loaded into it when the watch delivers it.
    pub fn trust_cache(&self) -> Arc<TrustCache> {
        if !self.inner.wants_trust.swap(true, Ordering::AcqRel) {
            self.inner.load_trust();
        }
        self.inner.trust.clone()
    }

    /// Reloads `follower` after each version the loader loads (before
    /// [`SharedSecret::loaded_changes`] moves), so what it serves follows the Secret
    /// without waiting for a handshake.
    pub(crate) fn follow(&self, follower: Box<dyn Follower>) {
        self.inner.followers.add(follower);
    }
}

impl SharedSecret {
    /// The `T` built over this Secret by the first successful `build`, shared by every
    /// later caller (a failed build is not remembered). Construction path only.
    pub(crate) fn built<T, E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        T: SharedValue,
    {
        self.inner.built.get_or_build(build)
    }

    /// A use of this Secret by something built over it outside the registry's caches
    /// (a builder's verifier or resolver): the entry stays while the lease lives.
    pub(crate) fn lease(&self) -> Lease {
        self.inner.leases.lease()
    }
}

impl EntryValue for SharedSecret {
    fn is_alive(&self) -> bool {
        SharedSecret::is_alive(self)
    }

    /// Held outside the registry: this handle cloned (a caller of
    /// `SecretWatches::watch`), a lease, or a clone of what was built over it.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
            || self.inner.leases.any()
            || self.inner.built.any_in_use()
    }
}

impl Shared {
    /// Loads the current version as an identity (a failure is remembered by the cache
    /// and reported by the resolver) and warms a new key with one signature.
    fn load_identity(&self) {
        let Some(object) = self.source.get() else {
            return;
        };
        if let Ok(identity) = self.identity.load(&object) {
            warm(identity.certified_key());
        }
    }

    /// Loads the current version as a root set (the cache keeps the last good one).
    fn load_trust(&self) {
        if let Some(object) = self.source.get() {
            let _ = self.trust.load(&object);
        }
    }
}

/// One signature with the key, so the first handshake does not pay for the key's
/// lazily built state. Idempotent; cheap when already warm.
fn warm(key: &rustls::sign::CertifiedKey) {
    const SCHEMES: &[SignatureScheme] = &[
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP521_SHA512,
        SignatureScheme::ED25519,
    ];
    if let Some(signer) = key.key.choose_scheme(SCHEMES) {
        let _ = signer.sign(b"svc-tls key warm-up");
    }
}

/// The loader task of one shared Secret: each time the watch changes the cache, load
/// what its users read. Ends when the watch stops or the Secret is no longer shared.
async fn load_each_version(shared: Weak<Shared>, mut changes: tokio::sync::watch::Receiver<u64>) {
    let mut newest: Option<u64> = None;
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        newest = warn_if_rolled_back(&shared, newest);
        // Loading an RSA key takes up to a few milliseconds: off the async workers.
        let loaded = tokio::task::spawn_blocking(move || {
            if shared.wants_identity.load(Ordering::Acquire) {
                shared.load_identity();
            }
            if shared.wants_trust.load(Ordering::Acquire) {
                shared.load_trust();
            }
            shared.followers.notify();
            shared.loaded.fetch_add(1, Ordering::AcqRel);
        })
        .await;
        if loaded.is_err() {
            return;
        }
    }
}

/// The newest `resourceVersion` seen so far, with a WARN when the watch delivers one
/// older than it: a restored backup or a rolled-back etcd puts older material back,
/// and the handshake path refuses to go back to it (it keeps serving the newer
/// version), so an operator must hear of it.
fn warn_if_rolled_back(shared: &Shared, newest: Option<u64>) -> Option<u64> {
    let current = shared
        .source
        .get()
        .and_then(|secret| super::secret::resource_version(&secret));
    let (newest, rolled_back) = newest_version(newest, current);
    if rolled_back && let (Some(newest), Some(current)) = (newest, current) {
        tracing::warn!(
                secret = %shared.source.secret_ref(),
                cluster = %shared.cluster,
                resource_version = current,
                newest_seen = newest,
                "the watch delivered an older resourceVersion of the Secret than one already \
                 seen (a restored backup or a rolled-back API server?): the newer material \
                 stays in use until a newer version arrives"
        );
    }
    newest
}

/// The newest `resourceVersion` seen once `current` is delivered after `newest`, and
/// whether `current` went back (older than one already seen).
fn newest_version(newest: Option<u64>, current: Option<u64>) -> (Option<u64>, bool) {
    match (newest, current) {
        (Some(newest), Some(current)) if current < newest => (Some(newest), true),
        (_, Some(current)) => (Some(current), false),
        (newest, None) => (newest, false),
    }
}

#[cfg(test)]
mod tests {
    use super::newest_version;

    #[test]
    fn an_older_resource_version_is_a_rollback_and_does_not_lower_the_newest() {
        assert_eq!(newest_version(None, Some(5)), (Some(5), false));
        assert_eq!(newest_version(Some(5), Some(7)), (Some(7), false));
        assert_eq!(newest_version(Some(5), Some(5)), (Some(5), false));
        assert_eq!(newest_version(Some(7), Some(5)), (Some(7), true));
        // A deleted Secret (no version) keeps the newest seen.
        assert_eq!(newest_version(Some(7), None), (Some(7), false));
    }
}
