//! What a registry holds, seen from outside (counts, the watched Secrets), and how it
//! lets go of what nothing uses (eviction, and the reaper that runs it).

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use cluster_id::ClusterId;

use k8s_openapi::api::core::v1::Secret;

use super::{WatchedObjects, WeakWatchedObjects};
use crate::origin::SecretRef;

/// How many entries a registry holds now ([`WatchedObjects::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryCounts {
    /// Secrets watched (started), per cluster, credential and use.
    pub secrets: usize,
    /// ConfigMaps watched (started), per cluster and credential.
    pub configmaps: usize,
    /// Sets of ClusterTrustBundles watched (started), per cluster, credential, signer
    /// and label selector.
    pub cluster_trust_bundles: usize,
    /// API clients, one per cluster and credential with an entry.
    pub kube_clients: usize,
    /// Values shared among the registry's users (the peers' pooled HTTP clients).
    pub shared_values: usize,
}

impl WatchedObjects {
    /// Evicts what nothing has used for the grace: shared values first, then the
    /// entries (whose users they were), then the API clients no entry reads through.
    /// Returns how many entries were evicted.
    pub(crate) fn evict_idle(&self, now: Instant) -> usize {
        let grace = self.inner.grace;
        self.inner.shared_values.evict_idle(now, grace);
        let kinds = self.all_entries();
        let evicted = kinds
            .iter()
            .map(|entries| entries.evict_idle(now, grace))
            .sum();
        let mut clients = self
            .inner
            .kube_clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(cluster, credential), _| {
            kinds
                .iter()
                .any(|entries| entries.reads(cluster, credential))
        });
        evicted
    }

    /// How many entries, API clients and shared values the registry holds now.
    pub fn counts(&self) -> RegistryCounts {
        let started = |kind: &str| -> usize {
            self.all_entries()
                .iter()
                .filter(|entries| entries.kind() == kind)
                .map(|entries| entries.started())
                .sum()
        };
        RegistryCounts {
            secrets: started("Secret"),
            configmaps: started("ConfigMap"),
            cluster_trust_bundles: started("ClusterTrustBundle"),
            kube_clients: self
                .inner
                .kube_clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            shared_values: self.inner.shared_values.len(),
        }
    }

    /// The Secrets watched (started and synced) now, with the cluster each is read
    /// from (one row per cluster and Secret, whatever the credentials).
    pub fn watched(&self) -> Vec<(ClusterId, SecretRef)> {
        let mut watched: Vec<(ClusterId, SecretRef)> = self
            .entries::<Secret>()
            .started_keys()
            .into_iter()
            .map(|key| (key.cluster, key.object))
            .collect();
        watched.sort();
        watched.dedup();
        watched
    }
}

/// The reaper of one registry: every quarter of the grace (between 50 ms and a
/// minute), evicts what has been unused for the grace. Ends with the registry.
pub(super) async fn reap(registry: WeakWatchedObjects, grace: Duration) {
    let period = (grace / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(registry) = registry.upgrade() else {
            return;
        };
        registry.evict_idle(Instant::now());
    }
}
