//! The keyed entries of one watched kind (Secrets, ConfigMaps): one cell per
//! (cluster, credential, object, use), started once and shared, and evicted once
//! nothing outside the registry has used it for the grace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::watch::kind::WatchedKind;
use crate::watch::shareable::EntryValue;
use crate::watch::shared::SharedObject;
use cluster_id::{ClusterClient, ClusterId, CredentialId};
use tokio::sync::OnceCell;

/// What the registry tells its entries apart by: the cluster, the credentials the
/// watch runs under, the object, and whether the entry is for trust only (its cache
/// never holds key material).
///
/// The credential is part of the key so that a caller is served only what its own
/// credentials were allowed to read: a cache hit needs the same cluster **and** the
/// same credentials, and a credential the API server refused is never the one
/// another caller's watch runs under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct EntryKey<O> {
    pub(super) cluster: ClusterId,
    pub(super) credential: CredentialId,
    pub(super) object: O,
    pub(super) use_: Use,
}

impl<O> EntryKey<O> {
    pub(super) fn new(client: &ClusterClient, object: O, use_: Use) -> Self {
        Self {
            cluster: client.cluster().clone(),
            credential: client.credential().clone(),
            object,
            use_,
        }
    }
}

/// What an entry's users read from its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Use {
    /// Everything: an identity (certificate and key), and trust from the same Secret.
    Identity,
    /// Trust anchors only: key material is dropped before caching.
    TrustOnly,
}

struct Entry<V> {
    cell: Arc<OnceCell<V>>,
    /// When the reaper first saw the started entry unused (reset when used again).
    idle_since: Option<Instant>,
}

/// What the registry asks of every kind's entries without knowing the kind:
/// eviction and counts.
pub(super) trait KindEntries: Send + Sync {
    /// The kind (`Secret`, `ConfigMap`).
    fn kind(&self) -> &'static str;
    /// How many entries are started.
    fn started(&self) -> usize;
    /// Whether an entry (started or starting) reads `cluster` as `credential`.
    fn reads(&self, cluster: &ClusterId, credential: &CredentialId) -> bool;
    /// Drops the started entries unused for `grace`; how many.
    fn evict_idle(&self, now: Instant, grace: Duration) -> usize;
}

type Key<K> = EntryKey<<K as WatchedKind>::Ref>;
type Value<K> = SharedObject<K>;

/// The entries of one kind.
pub(super) struct Entries<K: WatchedKind> {
    map: Mutex<HashMap<Key<K>, Entry<Value<K>>>>,
}

impl<K: WatchedKind> KindEntries for Entries<K> {
    fn kind(&self) -> &'static str {
        K::KIND
    }

    fn started(&self) -> usize {
        self.started_keys().len()
    }

    fn reads(&self, cluster: &ClusterId, credential: &CredentialId) -> bool {
        Entries::reads(self, cluster, credential)
    }

    fn evict_idle(&self, now: Instant, grace: Duration) -> usize {
        Entries::evict_idle(self, now, grace)
    }
}

impl<K: WatchedKind> Entries<K> {
    pub(super) fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key<K>, Entry<Value<K>>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cell of `key`, a fresh one when it has none or its watch died with the
    /// runtime of the client it was started with. Marks the entry used.
    pub(super) fn cell(&self, key: &Key<K>) -> Arc<OnceCell<Value<K>>> {
        let mut map = self.lock();
        let entry = map.entry(key.clone()).or_insert_with(|| Entry {
            cell: Arc::default(),
            idle_since: None,
        });
        entry.idle_since = None;
        if entry.cell.get().is_some_and(|value| !value.is_alive()) {
            tracing::info!(
                kind = K::KIND,
                cluster = %key.cluster,
                credential = %key.credential,
                object = %key.object,
                "the watch of a shared object ended with its client's runtime; starting a new one"
            );
            entry.cell = Arc::default();
        }
        entry.cell.clone()
    }

    /// The started, living value of `key`, if any (marks it used).
    pub(super) fn started(&self, key: &Key<K>) -> Option<Value<K>> {
        let mut map = self.lock();
        let entry = map.get_mut(key)?;
        let value = entry.cell.get().cloned().filter(EntryValue::is_alive)?;
        entry.idle_since = None;
        Some(value)
    }

    /// Removes `key`'s entry if it is still `cell` and never started (a failed or
    /// cancelled start leaves nothing behind).
    pub(super) fn forget_if_unstarted(&self, key: &Key<K>, cell: &Arc<OnceCell<Value<K>>>) {
        let mut map = self.lock();
        if map
            .get(key)
            .is_some_and(|entry| Arc::ptr_eq(&entry.cell, cell) && !entry.cell.initialized())
        {
            map.remove(key);
        }
    }

    /// Every started value.
    pub(super) fn values(&self) -> Vec<Value<K>> {
        self.lock()
            .values()
            .filter_map(|entry| entry.cell.get().cloned())
            .collect()
    }

    /// The keys of the started entries.
    pub(super) fn started_keys(&self) -> Vec<Key<K>> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.cell.initialized())
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Whether an entry (started or starting) reads `cluster` as `credential`.
    pub(super) fn reads(&self, cluster: &ClusterId, credential: &CredentialId) -> bool {
        self.lock()
            .keys()
            .any(|key| &key.cluster == cluster && &key.credential == credential)
    }

    /// Drops the started entries that nothing outside the registry has used for
    /// `grace` (their watches stop with the last clone of what they shared); returns
    /// how many. Entries still starting are left alone.
    pub(super) fn evict_idle(&self, now: Instant, grace: Duration) -> usize {
        let mut evicted = Vec::new();
        {
            let mut map = self.lock();
            let idle: Vec<Key<K>> = map
                .iter_mut()
                .filter_map(|(key, entry)| {
                    let value = entry.cell.get()?;
                    if value.in_use() {
                        entry.idle_since = None;
                        return None;
                    }
                    let since = *entry.idle_since.get_or_insert(now);
                    let expired = now.saturating_duration_since(since) >= grace;
                    (expired || !value.is_alive()).then(|| key.clone())
                })
                .collect();
            for key in idle {
                if let Some(entry) = map.remove(&key) {
                    evicted.push((key, entry));
                }
            }
        }
        // Dropped outside the lock: the last clone of a watch stops it.
        for (key, _) in &evicted {
            tracing::debug!(
                kind = K::KIND,
                cluster = %key.cluster,
                credential = %key.credential,
                object = %key.object,
                "shared watch unused for the eviction grace: stopped"
            );
        }
        evicted.len()
    }
}
