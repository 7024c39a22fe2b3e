//! Prometheus metrics (feature `metrics`): whether each declared cache is ready, how
//! long construction waited for it, and how constructions ended, on
//! [`prometheus_client`], registered into a [`Registry`] the service owns and serves
//! on its `/metrics` endpoint.
//!
//! Turn it on once, before the client is built:
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_construct::cache::Selection;
//! use kube_construct::client::CachedClient;
//! use prometheus_client::registry::Registry;
//!
//! let mut registry = Registry::default();
//! // Every client built from now on (unless given other metrics) records into it.
//! kube_construct::metrics::register(&mut registry)?;
//! let client = CachedClient::builder()
//!     .cache::<ConfigMap>(Selection::in_namespace("unikorn"))
//!     .in_cluster()
//!     .await?;
//! # let _ = client; Ok(()) }
//! ```
//!
//! | family | type | labels |
//! |---|---|---|
//! | `kube_construct_cache_ready` | gauge (1 ready, 0 syncing or degraded) | `cluster`, `resource`, `cache_namespace`, `label_selector`, `field_selector` |
//! | `kube_construct_cache_objects` | gauge | as above |
//! | `kube_construct_cache_watch_errors_total` | counter | as above |
//! | `kube_construct_cache_sync_duration_seconds` | histogram | as above |
//! | `kube_construct_client_constructions_total` | counter | `cluster`, `result` (`ok`, `unauthorized`, `forbidden`, `unknown_resource`, `timeout`, `namespace_on_cluster_scoped`, `stopped`) |
//!
//! `cluster` is the cluster the client reads, as in svc-tls's metrics
//! ([`ClusterId::metric_label`]: its [`ClusterId::label`], with its short fingerprint
//! appended when another cluster of the process has that label already; one value
//! per cluster, the same value in both crates' families). It is empty for a client
//! built [`from_client`](crate::client::ClientBuilder::from_client), whose cluster
//! cannot be told. The cache labels are the declaration (`resource` as kubectl names it,
//! `secrets.v1`; an empty `cache_namespace` for all namespaces (not `namespace`: Prometheus's
//! Kubernetes discovery gives every scraped series the pod's own `namespace`); the selectors as given,
//! empty when none): configuration, never data read from the API server. The
//! states are read at scrape time from the clients' [`health`](crate::client::CachedClient::health),
//! so a cache that degrades after construction shows it without any event. When
//! two live clients of one cluster declare the same cache, the first built is
//! exported.

mod collector;

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use cluster_id::ClusterId;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::cache::{CacheError, CacheName, Caches};

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
    inner: Arc<Shared>,
}

pub(crate) struct Shared {
    sync: Family<CacheLabels, Histogram>,
    constructions: Family<Vec<(&'static str, String)>, Counter>,
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
        registry.register_collector(Box::new(collector::CacheCollector::new(&inner)));
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
