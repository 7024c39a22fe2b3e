//! [`ClusterId::metric_label`]: one label value per cluster, distinct among the
//! clusters of the process, for every crate's metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::ClusterId;

/// The values handed out to the clusters a live [`ClusterId`] names: by
/// fingerprint, the set of values taken, and how many `ClusterId` values (distinct
/// allocations; clones share one) name each cluster.
struct Table {
    by_cluster: BTreeMap<[u8; 32], Arc<str>>,
    taken: BTreeSet<Arc<str>>,
    live: BTreeMap<[u8; 32], usize>,
}

/// One table per process, so that a cluster has the same value in every family of
/// every crate (svc-tls's Secrets and kube-construct's caches join on it).
static TABLE: Mutex<Table> = Mutex::new(Table {
    by_cluster: BTreeMap::new(),
    taken: BTreeSet::new(),
    live: BTreeMap::new(),
});

fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `ClusterId` value of the cluster `fingerprint` was made.
pub(crate) fn acquired(fingerprint: [u8; 32]) {
    *table().live.entry(fingerprint).or_insert(0) += 1;
}

/// A `ClusterId` value of the cluster `fingerprint` was dropped: the last one takes
/// the cluster's value out of the table.
pub(crate) fn released(fingerprint: [u8; 32]) {
    let mut table = table();
    let left = match table.live.get_mut(&fingerprint) {
        Some(count) => {
            *count = count.saturating_sub(1);
            *count
        }
        None => 0,
    };
    if left == 0 {
        table.live.remove(&fingerprint);
        if let Some(value) = table.by_cluster.remove(&fingerprint) {
            table.taken.remove(&value);
        }
    }
}

/// How many clusters hold a value now.
pub(crate) fn labelled() -> usize {
    table().by_cluster.len()
}

/// See [`ClusterId::metric_label`].
pub(crate) fn metric_label(cluster: &ClusterId) -> String {
    let mut table = table();
    if let Some(value) = table.by_cluster.get(&cluster.fingerprint()) {
        return value.to_string();
    }
    let plain: Arc<str> = Arc::from(cluster.label());
    let value = if table.taken.contains(&plain) {
        let suffixed = format!("{}@{}", cluster.label(), cluster.short_fingerprint());
        // Two clusters with one label and the same 64-bit prefix: counted apart.
        let mut value: Arc<str> = Arc::from(suffixed.as_str());
        let mut n = 2u64;
        while table.taken.contains(&value) {
            value = Arc::from(format!("{suffixed}-{n}"));
            n += 1;
        }
        value
    } else {
        plain
    };
    table.taken.insert(value.clone());
    table
        .by_cluster
        .insert(cluster.fingerprint(), value.clone());
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_sharing_a_label_get_distinct_values() {
        // Forty clusters, every two sharing a label: forty values.
        let ids: Vec<ClusterId> = (0..40)
            .map(|i| ClusterId::named(&format!("unit-{i}")).with_label(&format!("unit-{}", i / 2)))
            .collect();
        let values: BTreeSet<String> = ids.iter().map(ClusterId::metric_label).collect();
        assert_eq!(values.len(), 40);
        for id in &ids {
            assert_eq!(id.metric_label(), id.metric_label(), "stable");
            assert!(id.metric_label().starts_with(id.label()));
        }
        // The same cluster under another display label keeps its value.
        assert_eq!(
            ids[1].with_label("renamed").metric_label(),
            ids[1].metric_label()
        );
    }

    /// The table holds the clusters live ids name, not every cluster ever labelled:
    /// once the last id of a cluster is dropped, its value is free again.
    #[test]
    fn a_cluster_no_live_id_names_leaves_the_table() {
        let first = ClusterId::named("unit-leaving-a").with_label("unit-leaving");
        let clone = first.clone();
        let relabelled = first.with_label("unit-leaving-shown");
        assert_eq!(first.metric_label(), "unit-leaving");
        drop(first);
        // A clone and another id of the cluster keep its value.
        let second = ClusterId::named("unit-leaving-b").with_label("unit-leaving");
        assert!(second.metric_label().starts_with("unit-leaving@"));
        assert_eq!(clone.metric_label(), "unit-leaving");
        drop((clone, second));
        assert_eq!(relabelled.metric_label(), "unit-leaving");
        drop(relabelled);
        // Nothing names either cluster now: both left the table, and the plain
        // value goes to the next cluster that asks.
        let third = ClusterId::named("unit-leaving-c").with_label("unit-leaving");
        assert_eq!(third.metric_label(), "unit-leaving");
        let (a, b) = (
            ClusterId::named("unit-leaving-a").fingerprint(),
            ClusterId::named("unit-leaving-b").fingerprint(),
        );
        let table = table();
        assert!(!table.by_cluster.contains_key(&a) && !table.by_cluster.contains_key(&b));
    }

    #[test]
    fn a_plain_label_cannot_collide_with_a_suffixed_one() {
        let first = ClusterId::named("unit-collide");
        let second = ClusterId::named("unit-collide-2").with_label("unit-collide");
        assert_eq!(first.metric_label(), "unit-collide");
        let suffixed = second.metric_label();
        assert!(suffixed.contains('@'));
        // A cluster whose display label is the suffixed value has `@` replaced.
        let mimic = ClusterId::named("unit-mimic").with_label(&suffixed);
        assert_ne!(mimic.metric_label(), suffixed);
    }
}
