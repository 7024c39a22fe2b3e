//! One watched ConfigMap as a registry shares it ([`SharedConfigMap`]): its cache,
//! and what the options-based constructors built over it (the verifier of each data
//! key), shared by every construction with the same cluster and credentials.

use std::fmt;
use std::sync::{Arc, Weak};

use cluster_id::ClusterId;

use super::built::Built;
use super::configmap::ConfigMapSource;
use super::lease::{Lease, Leases};
use super::runtime::RuntimeLiveness;
use super::shareable::{EntryValue, SharedValue};
use crate::follow::{Follower, Followers};
use crate::origin::ConfigMapRef;

/// One watched ConfigMap as the registry shares it. Cheap to clone.
#[derive(Clone)]
pub struct SharedConfigMap {
    inner: Arc<Shared>,
}

struct Shared {
    source: ConfigMapSource,
    /// Verifiers over this ConfigMap, reloaded after each change the watch delivers
    /// (so their pools retire on a new bundle without waiting for a handshake).
    followers: Followers,
    cluster: ClusterId,
    built: Built,
    leases: Leases,
    /// The runtime of the caller's client, when the watch runs through it.
    client_runtime: Option<RuntimeLiveness>,
}

impl fmt::Debug for SharedConfigMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedConfigMap")
            .field("cluster", &self.inner.cluster)
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl SharedConfigMap {
    /// Shares `source` and starts its follower task (on the current runtime: the
    /// registry's).
    pub(super) fn new(
        source: ConfigMapSource,
        cluster: ClusterId,
        client_runtime: Option<RuntimeLiveness>,
    ) -> Self {
        let changes = source.changes();
        let shared = Self {
            inner: Arc::new(Shared {
                followers: Followers::default(),
                source,
                cluster,
                built: Built::default(),
                leases: Leases::default(),
                client_runtime,
            }),
        };
        tokio::spawn(notify_each_change(Arc::downgrade(&shared.inner), changes));
        shared
    }

    /// Reloads `follower` after each change of the ConfigMap's cache.
    pub(crate) fn follow(&self, follower: Box<dyn Follower>) {
        self.inner.followers.add(follower);
    }

    /// The ConfigMap.
    pub fn configmap_ref(&self) -> &ConfigMapRef {
        self.inner.source.configmap_ref()
    }

    /// The cluster it is read from.
    pub fn cluster(&self) -> &ClusterId {
        &self.inner.cluster
    }

    /// The watched ConfigMap's cache.
    pub fn source(&self) -> &ConfigMapSource {
        &self.inner.source
    }

    /// The `T` built over this ConfigMap for `name` (a data key) by the first
    /// successful `build`, shared by every later caller. Construction path only.
    pub(crate) fn built<T: SharedValue, E>(
        &self,
        name: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.inner.built.get_or_build_named(name, build)
    }

    /// A use of this ConfigMap by something built over it outside the registry's
    /// caches: the entry stays while the lease lives.
    #[allow(dead_code)]
    pub(crate) fn lease(&self) -> Lease {
        self.inner.leases.lease()
    }
}

/// The follower task of one shared ConfigMap: each time the watch changes the cache,
/// tell the verifiers over it. Ends when the watch stops or the ConfigMap is no longer
/// shared.
async fn notify_each_change(shared: Weak<Shared>, mut changes: tokio::sync::watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.followers.notify();
    }
}

impl EntryValue for SharedConfigMap {
    fn is_alive(&self) -> bool {
        self.inner
            .client_runtime
            .as_ref()
            .is_none_or(RuntimeLiveness::is_alive)
    }

    fn in_use(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
            || self.inner.leases.any()
            || self.inner.built.any_in_use()
    }
}
