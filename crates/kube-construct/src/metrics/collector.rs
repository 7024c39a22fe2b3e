//! The caches' states, read at scrape time from the health of the clients built
//! with the metrics. Nothing here runs when a client reads its caches.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, PoisonError, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::cache_metrics::{CacheLabels, Shared, cache_labels};
use crate::cache::CacheState;

/// Reads the caches' states at scrape time.
pub(crate) struct CacheCollector {
    shared: Weak<Shared>,
}

impl fmt::Debug for CacheCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheCollector").finish_non_exhaustive()
    }
}

impl CacheCollector {
    pub(super) fn new(shared: &Arc<Shared>) -> Self {
        Self {
            shared: Arc::downgrade(shared),
        }
    }
}

/// One cache's state at a scrape.
struct Sample {
    ready: bool,
    objects: usize,
    errors: u64,
}

fn emit<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    family: &Family<CacheLabels, M>,
) -> Result<(), fmt::Error> {
    family.encode(encoder.encode_descriptor(name, help, None, M::TYPE)?)
}

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let clients = {
            let mut clients = shared
                .clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            clients.retain(|(caches, _)| caches.strong_count() > 0);
            clients.clone()
        };
        // The first live client of a cluster declaring a cache is the one exported.
        let mut samples = BTreeMap::new();
        for (report, cluster) in clients.iter().filter_map(|(caches, cluster)| {
            caches.upgrade().map(|caches| (caches.health(), cluster))
        }) {
            for cache in report.caches {
                samples
                    .entry(cache_labels(cluster, &cache.cache))
                    .or_insert(Sample {
                        ready: cache.state == CacheState::Ready,
                        objects: cache.objects,
                        errors: cache.errors,
                    });
            }
        }
        let ready = Family::<CacheLabels, Gauge>::default();
        let objects = Family::<CacheLabels, Gauge>::default();
        let errors = Family::<CacheLabels, Counter>::default();
        for (labels, sample) in &samples {
            ready.get_or_create(labels).set(i64::from(sample.ready));
            objects
                .get_or_create(labels)
                .set(i64::try_from(sample.objects).unwrap_or(i64::MAX));
            errors.get_or_create(labels).inc_by(sample.errors);
        }
        emit(
            &mut encoder,
            "kube_construct_cache_ready",
            "Whether the cache is ready (1: synced and its watch accepted) or not (0: syncing, or degraded and serving the last known state)",
            &ready,
        )?;
        emit(
            &mut encoder,
            "kube_construct_cache_objects",
            "Objects the cache holds",
            &objects,
        )?;
        emit(
            &mut encoder,
            "kube_construct_cache_watch_errors",
            "Watch errors the cache has seen since construction started",
            &errors,
        )
    }
}
