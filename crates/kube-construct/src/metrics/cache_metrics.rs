//! The metrics' families and their registration (the module's guide is
//! `overview.md`).

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use cluster_id::ClusterId;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::cache::start::Caches;
use crate::cache::{CacheError, CacheName};

/// The `result` values of `kube_construct_client_constructions_total`.
pub const CONSTRUCTION_RESULTS: [&str; 7] = [
    "ok",
    "unauthorized",
    "forbidden",
    "unknown_resource",
    "timeout",
    "namespace_on_cluster_scoped",
    "stopped",
];

/// Why metrics could not be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The process already records into metrics ([`register`] was called before).
    #[error("kube-construct metrics are already registered for this process")]
    AlreadyRegistered,
}

/// The labels of one declared cache.
pub(crate) type CacheLabels = Vec<(&'static str, String)>;

/// The `cluster` label of `cluster`, empty when it is not known.
fn cluster_label(cluster: Option<&ClusterId>) -> String {
    cluster.map(ClusterId::metric_label).unwrap_or_default()
}

/// The label set of `cache` of a client of the cluster labelled `cluster`
/// (configuration only).
pub(crate) fn cache_labels(cluster: &str, cache: &CacheName) -> CacheLabels {
    let selection = &cache.selection;
    vec![
        ("cluster", cluster.to_owned()),
        ("resource", cache.resource()),
        (
            "cache_namespace",
            selection.namespace().unwrap_or("").to_owned(),
        ),
        (
            "label_selector",
            selection.label_selector().unwrap_or("").to_owned(),
        ),
        (
            "field_selector",
            selection.field_selector().unwrap_or("").to_owned(),
        ),
    ]
}

/// kube-construct's metric families registered into one Prometheus [`Registry`], and
/// the clients whose caches are read at scrape time. Cheap to clone.
#[derive(Clone)]
pub struct CacheMetrics {
    pub(super) inner: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(super) sync: Family<CacheLabels, Histogram>,
    pub(super) constructions: Family<Vec<(&'static str, String)>, Counter>,
    /// The caches of the clients built with these metrics, with their `cluster`
    /// label, oldest first (those of dropped clients are pruned at scrape time).
    pub(crate) clients: Mutex<Vec<(Weak<Caches>, String)>>,
}

impl std::fmt::Debug for CacheMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheMetrics").finish_non_exhaustive()
    }
}

/// The process's metrics, once [`register`]ed.
static PROCESS: OnceLock<CacheMetrics> = OnceLock::new();

/// Registers kube-construct's metrics into `registry` and makes them the process's:
/// every [`ClientBuilder`](crate::client::ClientBuilder) that is not given other
/// metrics ([`ClientBuilder::metrics`](crate::client::ClientBuilder::metrics)) records
/// into them. Call it once at start-up, before the client is built; a second call
/// fails with [`RegisterError::AlreadyRegistered`] and registers nothing.
pub fn register(registry: &mut Registry) -> Result<CacheMetrics, RegisterError> {
    if PROCESS.get().is_some() {
        return Err(RegisterError::AlreadyRegistered);
    }
    let metrics = CacheMetrics::new(registry);
    PROCESS
        .set(metrics.clone())
        .map_err(|_| RegisterError::AlreadyRegistered)?;
    Ok(metrics)
}

impl CacheMetrics {
    /// Registers the families (and the collector of the caches' states) into
    /// `registry`: metrics of the caller's, for [`ClientBuilder::metrics`](crate::client::ClientBuilder::metrics)
    /// (one per test, say). Call once per Prometheus registry.
    pub fn new(registry: &mut Registry) -> Self {
        let sync = Family::new_with_constructor(sync_histogram as fn() -> Histogram);
        let constructions = Family::default();
        registry.register_with_unit(
            "kube_construct_cache_sync_duration",
            "How long construction waited for each cache's initial list",
            Unit::Seconds,
            sync.clone(),
        );
        registry.register(
            "kube_construct_client_constructions",
            "Cache-backed client constructions, by result (ok, or why the caches could not be proven synced)",
            constructions.clone(),
        );
        let inner = Arc::new(Shared {
            sync,
            constructions,
            clients: Mutex::new(Vec::new()),
        });
        registry.register_collector(Box::new(super::collector::CacheCollector::new(&inner)));
        Self { inner }
    }

    /// The process's metrics, when [`register`] was called.
    pub fn process() -> Option<&'static CacheMetrics> {
        PROCESS.get()
    }

    /// Records a construction of a client of `cluster` (when it is known) that ended
    /// with `result`, and the sync time of each cache that synced. Construction path.
    pub(crate) fn constructed(
        &self,
        cluster: Option<&ClusterId>,
        result: Result<&Arc<Caches>, &CacheError>,
    ) {
        let cluster = cluster_label(cluster);
        let label = match result {
            Ok(caches) => {
                for (name, after) in caches.sync_times() {
                    self.inner
                        .sync
                        .get_or_create(&cache_labels(&cluster, name))
                        .observe(after.as_secs_f64());
                }
                self.clients()
                    .push((Arc::downgrade(caches), cluster.clone()));
                "ok"
            }
            Err(error) => error.reason(),
        };
        self.inner
            .constructions
            .get_or_create(&vec![("cluster", cluster), ("result", label.to_owned())])
            .inc();
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, Vec<(Weak<Caches>, String)>> {
        self.inner
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// 5 ms to about 41 s, doubling.
fn sync_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}
