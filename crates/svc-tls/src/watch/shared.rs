//! One watched object as a registry shares it ([`SharedObject<K>`]), and its loader:
//! each new version the watch delivers is loaded once into what its kind's users read
//! on the handshake path (a Secret's identity and root-set caches, its key warmed with
//! one signature), then the resolvers and verifiers built over it are told
//! (`crate::follow`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use cluster_id::ClusterId;
use rustls::crypto::CryptoProvider;

use super::held::Held;
use super::kind::{WatchedKind, resource_version};
use super::object::WatchedObject;
use super::runtime::RuntimeLiveness;
use super::shareable::{EntryValue, SharedValue};
use crate::follow::{Follower, Followers};

/// One watched object as the registry shares it: its cache, what its kind loads from
/// each version when the watch delivers it, and what was built over it. Cheap to
/// clone; a clone held outside the registry keeps the entry (and its watch).
#[derive(Clone)]
pub struct SharedObject<K: WatchedKind> {
    inner: Arc<Shared<K>>,
}

struct Shared<K: WatchedKind> {
    source: WatchedObject<K>,
    /// What the kind loads from each version (a Secret's identity and trust caches).
    loads: <K as super::kind::sealed::Sealed>::Loads,
    /// What the constructors built over this object (its resolver, its verifiers),
    /// one per type and name, so that every construction shares one.
    built: Held,
    /// Changes of the cache the loader has processed.
    loaded: AtomicU64,
    /// Resolvers and verifiers over this object, reloaded after each load.
    followers: Followers,
    /// The cluster the object is read from.
    cluster: ClusterId,
    /// The runtime of the caller's client, when the watch runs through it.
    client_runtime: Option<RuntimeLiveness>,
}

impl<K: WatchedKind> fmt::Debug for SharedObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedObject")
            .field("cluster", &self.inner.cluster)
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl<K: WatchedKind> SharedObject<K> {
    /// Shares `source` and starts its loader (on the current runtime: the registry's).
    pub(super) fn start(
        source: WatchedObject<K>,
        cluster: ClusterId,
        provider: Arc<CryptoProvider>,
        client_runtime: Option<RuntimeLiveness>,
    ) -> Self {
        let changes = source.changes();
        let shared = Self {
            inner: Arc::new(Shared {
                loads: K::loads(provider),
                source,
                built: Held::default(),
                loaded: AtomicU64::new(0),
                followers: Followers::default(),
                cluster,
                client_runtime,
            }),
        };
        tokio::spawn(load_each_version(Arc::downgrade(&shared.inner), changes));
        shared
    }

    /// The object.
    pub fn object_ref(&self) -> &K::Ref {
        self.inner.source.object_ref()
    }

    /// The cluster the object is read from.
    pub fn cluster(&self) -> &ClusterId {
        &self.inner.cluster
    }

    /// The watched object's cache.
    pub fn source(&self) -> &WatchedObject<K> {
        &self.inner.source
    }

    /// How many changes of the object's cache have been loaded so far (the first list
    /// counts as one): a caller that wrote a new version waits for this to move to
    /// know the version's load is done.
    pub fn loaded_changes(&self) -> u64 {
        self.inner.loaded.load(Ordering::Acquire)
    }

    /// What the kind loads from each version.
    pub(super) fn loads(&self) -> &<K as super::kind::sealed::Sealed>::Loads {
        &self.inner.loads
    }

    /// Reloads `follower` after each version the loader loads (before
    /// [`SharedObject::loaded_changes`] moves), so what it serves follows the object
    /// without waiting for a handshake.
    pub(crate) fn follow(&self, follower: Box<dyn Follower>) {
        self.inner.followers.add(follower);
    }

    /// The `T` built over this object for `name` by the first successful `build`,
    /// shared by every later caller (a failed build is not remembered). Construction
    /// path only.
    pub(crate) fn built<T: SharedValue, E>(
        &self,
        name: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.inner.built.get_or_build(name, build)
    }
}

impl<K: WatchedKind> EntryValue for SharedObject<K> {
    /// Whether the watch can still run: false once the runtime of the caller's client
    /// it runs through (a client without configuration) has ended.
    fn is_alive(&self) -> bool {
        self.inner
            .client_runtime
            .as_ref()
            .is_none_or(RuntimeLiveness::is_alive)
    }

    /// Held outside the registry: this handle cloned (a caller of
    /// `WatchedObjects::watch`, or what a builder built over it), or a clone of what
    /// the registry built over it.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.inner) > 1 || self.inner.built.any_in_use()
    }
}

/// The loader task of one shared object: each time the watch changes the cache, load
/// what its users read. Ends when the watch stops or the object is no longer shared.
async fn load_each_version<K: WatchedKind>(
    shared: Weak<Shared<K>>,
    mut changes: tokio::sync::watch::Receiver<u64>,
) {
    let mut newest: Option<u64> = None;
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        newest = warn_if_rolled_back(&shared, newest);
        // Loading an RSA key takes up to a few milliseconds: off the async workers.
        let loaded = tokio::task::spawn_blocking(move || {
            if let Some(object) = shared.source.get() {
                K::load(&shared.loads, &object);
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
fn warn_if_rolled_back<K: WatchedKind>(shared: &Shared<K>, newest: Option<u64>) -> Option<u64> {
    let current = shared
        .source
        .get()
        .and_then(|object| resource_version(&*object));
    let (newest, rolled_back) = newest_version(newest, current);
    if rolled_back && let (Some(newest), Some(current)) = (newest, current) {
        tracing::warn!(
            kind = K::KIND,
            object = %shared.source.object_ref(),
            cluster = %shared.cluster,
            resource_version = current,
            newest_seen = newest,
            "the watch delivered an older resourceVersion of the object than one already \
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
        // A deleted object (no version) keeps the newest seen.
        assert_eq!(newest_version(Some(7), None), (Some(7), false));
    }
}
