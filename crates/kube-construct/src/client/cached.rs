//! The cache-backed client and its builder (the module's guide is `overview.md`).

use super::undeclared::UndeclaredReads;
use super::{ClientError, ConstructError, UndeclaredRead};
use cluster_id::{ClusterClient, ClusterId, UnidentifiedCluster};
use std::{fmt, sync::Arc, time::Duration};

use crate::cache::reader::{Query, StoreReader};
use crate::cache::selection::resource_name;
use crate::cache::start::{Caches, dedupe};
use crate::{
    cache::{
        CacheDeclaration, CacheName, CacheObject, CachedType, DEFAULT_SYNC_TIMEOUT, HealthReport,
        Selection, WatchLimits,
    },
    config::{ConfigSource, Environment, InClusterSource, KubeOptions},
    registry::{Registry, RegistryError},
};
use kube::{
    api::{ApiResource, DynamicObject, GroupVersionKind, TypeMeta},
    core::Selector,
};

/// Declares the caches, then constructs a [`CachedClient`] from one of the sources.
#[derive(Debug)]
pub struct ClientBuilder {
    pub(super) declarations: Vec<CacheDeclaration>,
    pub(super) sync_timeout: Duration,
    pub(super) watch_limits: WatchLimits,
    #[cfg(feature = "metrics")]
    pub(super) metrics: Option<crate::metrics::CacheMetrics>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            declarations: Vec::new(),
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            watch_limits: WatchLimits::default(),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

impl ClientBuilder {
    /// No caches yet, the default sync timeout (2 minutes).
    pub fn new() -> Self {
        Self::default()
    }

    /// Declare a cache of a typed resource.
    #[must_use]
    pub fn cache<K: CachedType>(self, selection: Selection) -> Self {
        self.declare(CacheDeclaration::typed::<K>(selection))
    }

    /// Declare a cache of a resource known only at run time.
    #[must_use]
    pub fn dynamic_cache(self, resource: ApiResource, selection: Selection) -> Self {
        self.declare(CacheDeclaration::dynamic(resource, selection))
    }

    /// Declare a dynamic cache of a kind registered in `registry`, which supplies its
    /// [`ApiResource`] (plural and scope); see [`CacheDeclaration::registered`].
    pub fn registered_cache(
        self,
        registry: &Registry,
        gvk: &GroupVersionKind,
        selection: Selection,
    ) -> Result<Self, RegistryError> {
        Ok(self.declare(CacheDeclaration::registered(registry, gvk, selection)?))
    }

    /// Declare a prepared cache declaration.
    #[must_use]
    pub fn declare(mut self, declaration: CacheDeclaration) -> Self {
        self.declarations.push(declaration);
        self
    }

    /// How long construction waits for every cache's initial list.
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// The bounds on what the API server can make each cache hold (default
    /// [`WatchLimits::default`]: objects of at most 1 MiB as JSON, at most 10,000
    /// objects per cache, LIST bodies of at most 64 MiB, WATCH events of at most
    /// 4 MiB, no coalescing). What is over a limit is refused, the cache keeping its
    /// last good state, and counted in [`CacheHealth::over_limit`](crate::cache::CacheHealth::over_limit) with the
    /// typed [`CacheHealth::last_limit_error`](crate::cache::CacheHealth::last_limit_error). Raise
    /// [`WatchLimits::max_objects`] for a cache of more objects than that.
    ///
    /// ```
    /// use kube_construct::cache::WatchLimits;
    /// use kube_construct::client::CachedClient;
    ///
    /// let builder = CachedClient::builder().watch_limits(WatchLimits::default().max_objects(50_000));
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn watch_limits(mut self, limits: WatchLimits) -> Self {
        self.watch_limits = limits;
        self
    }

    /// Record into `metrics` (feature `metrics`) instead of the process's
    /// ([`crate::metrics::register`]), which a builder records into by default.
    #[cfg(feature = "metrics")]
    #[must_use]
    pub fn metrics(mut self, metrics: &crate::metrics::CacheMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// In-cluster: service-account files and `KUBERNETES_SERVICE_HOST`/`_PORT`, nothing else.
    pub async fn in_cluster(self) -> Result<CachedClient, ConstructError> {
        self.in_cluster_from(&InClusterSource::from_env()).await
    }

    /// In-cluster from an explicit source (tests, unusual mounts).
    pub async fn in_cluster_from(
        self,
        source: &InClusterSource,
    ) -> Result<CachedClient, ConstructError> {
        let config = source.load()?;
        tracing::info!(dir = %source.dir.display(), "using in-cluster Kubernetes configuration");
        self.from_config(config).await
    }

    /// From the command-line options, with the documented precedence
    /// ([`crate::config`]).
    pub async fn from_options(self, options: &KubeOptions) -> Result<CachedClient, ConstructError> {
        self.from_options_in(options, &Environment::from_process())
            .await
    }

    /// From the command-line options, against an explicit environment.
    pub async fn from_options_in(
        self,
        options: &KubeOptions,
        env: &Environment,
    ) -> Result<CachedClient, ConstructError> {
        let resolved = options.resolve_in(env).await?;
        tracing::info!(source = %resolved.source, "using Kubernetes configuration");
        let client = ClusterClient::try_from_config(resolved.config)
            .map_err(|e| ConstructError::Client(watch_ready::KubeError::of(&e)))?;
        self.build(client.kube().clone(), Some(client), Some(resolved.source))
            .await
    }

    /// From any `kube::Config`.
    pub async fn from_config(self, config: kube::Config) -> Result<CachedClient, ConstructError> {
        let client = ClusterClient::try_from_config(config)
            .map_err(|e| ConstructError::Client(watch_ready::KubeError::of(&e)))?;
        self.from_cluster_client(client).await
    }

    /// From an existing client whose cluster is known ([`ClusterClient`]): what
    /// [`CachedClient::cluster_client`] then hands to the crates that keep state per
    /// cluster (svc-tls's shared Secret watches).
    pub async fn from_cluster_client(
        self,
        client: ClusterClient,
    ) -> Result<CachedClient, ConstructError> {
        self.build(client.kube().clone(), Some(client), None).await
    }

    /// From an existing client (a process never needs a second one). Its cluster
    /// cannot be told from a bare `kube::Client`, so [`CachedClient::cluster_client`]
    /// refuses (and with it svc-tls's constructors); adopt it with
    /// [`ClientBuilder::from_client_identified`] instead when it is handed on.
    pub async fn from_client(self, client: kube::Client) -> Result<CachedClient, ConstructError> {
        self.build(client, None, None).await
    }

    /// From an existing client (a controller's, a test's) and the cluster the caller
    /// vouches it reads, in one step: [`CachedClient::cluster_client`] then hands it to
    /// the crates that keep state per cluster. Name the local cluster
    /// `ClusterId::named("local")` (unique in the process); its credentials are
    /// [`CredentialId::unique`](cluster_id::CredentialId::unique), so its Secret
    /// watches are shared with no other client.
    ///
    /// ```no_run
    /// # async fn f(adopted: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use kube_construct::{ClusterId, client::CachedClient};
    /// let client = CachedClient::builder()
    ///     .from_client_identified(adopted, ClusterId::named("local"))
    ///     .await?;
    /// assert_eq!(client.cluster_client()?.cluster(), &ClusterId::named("local"));
    /// # Ok(()) }
    /// ```
    pub async fn from_client_identified(
        self,
        client: kube::Client,
        cluster: ClusterId,
    ) -> Result<CachedClient, ConstructError> {
        self.from_cluster_client(ClusterClient::new(client, cluster))
            .await
    }

    async fn build(
        self,
        client: kube::Client,
        cluster: Option<ClusterClient>,
        source: Option<ConfigSource>,
    ) -> Result<CachedClient, ConstructError> {
        #[cfg(feature = "metrics")]
        let metrics = self
            .metrics
            .clone()
            .or_else(|| crate::metrics::CacheMetrics::process().cloned());
        let started = Caches::start(
            &client,
            self.declarations,
            self.sync_timeout,
            &self.watch_limits,
        )
        .await
        .map(Arc::new);
        #[cfg(feature = "metrics")]
        if let Some(metrics) = metrics {
            metrics.constructed(
                cluster.as_ref().map(ClusterClient::cluster),
                started.as_ref(),
            );
        }
        Ok(CachedClient {
            inner: Arc::new(Inner {
                client,
                cluster,
                caches: started?,
                source,
                undeclared: UndeclaredReads::default(),
            }),
        })
    }
}

pub(super) struct Inner {
    pub(super) client: kube::Client,
    /// The client with its cluster's identity, when it is known.
    pub(super) cluster: Option<ClusterClient>,
    /// Shared with the metrics collector (weakly), when metrics are on.
    pub(super) caches: Arc<Caches>,
    pub(super) source: Option<ConfigSource>,
    pub(super) undeclared: UndeclaredReads,
}

/// A Kubernetes client whose reads come from caches proven synced at construction.
///
/// Cheap to clone; the caches stop when the last clone is dropped.
#[derive(Clone)]
pub struct CachedClient {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for CachedClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedClient")
            .field("source", &self.inner.source)
            .field(
                "cluster",
                &self.inner.cluster.as_ref().map(ClusterClient::cluster),
            )
            .field(
                "caches",
                &self
                    .inner
                    .caches
                    .entries
                    .iter()
                    .map(|e| e.name.to_string())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl CachedClient {
    /// Start declaring caches.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// The underlying client, for anything this type does not wrap.
    pub fn kube_client(&self) -> &kube::Client {
        &self.inner.client
    }

    /// The client with the identity of its cluster, for what keeps state per cluster
    /// (`svc_tls::PeerTls::from_options`, `svc_tls::receiving::IngressBuilder`).
    ///
    /// # Errors
    /// [`UnidentifiedCluster`] when this client was adopted from a bare
    /// `kube::Client` ([`ClientBuilder::from_client`]): its cluster cannot be told,
    /// and a guess could hand one cluster's Secrets to another's users (adopt it with
    /// [`ClientBuilder::from_client_identified`]).
    pub fn cluster_client(&self) -> Result<ClusterClient, UnidentifiedCluster> {
        self.inner.cluster.clone().ok_or(UnidentifiedCluster {
            what: "kube-construct client adopted with from_client (use from_client_identified)",
        })
    }

    /// Where the configuration came from, when built from options.
    pub fn source(&self) -> Option<&ConfigSource> {
        self.inner.source.as_ref()
    }

    /// Every distinct read this client refused as [`ClientError::NotCached`], with how
    /// often (at most [`MAX_UNDECLARED_READS`](super::MAX_UNDECLARED_READS) distinct ones kept), in order. A
    /// service's test runs its code paths against the API emulator and asserts this
    /// is empty: the list of reads its declarations miss, before it is deployed.
    pub fn undeclared_reads(&self) -> Vec<(UndeclaredRead, u64)> {
        self.inner.undeclared.snapshot()
    }

    /// The health of every declared cache.
    pub fn health(&self) -> HealthReport {
        self.inner.caches.health()
    }

    /// How long after construction started each cache's initial list completed.
    pub fn sync_times(&self) -> impl Iterator<Item = (&CacheName, Duration)> {
        self.inner.caches.sync_times()
    }

    /// Get one object by name from the caches. `Ok(None)` when a cache covering it
    /// does not hold it; [`ClientError::NotCached`] when no declared cache covers it.
    pub fn get<K: CachedType>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, ClientError> {
        Ok(self.read::<K>(&(), namespace, Query::Get(name))?.pop())
    }

    /// List objects from the caches, in `namespace` (None: all namespaces, or a
    /// cluster-scoped kind) matching a label selector (`&Selector::default()` for
    /// all). A cache declared with selectors holds only what they select.
    pub fn list<K: CachedType>(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Vec<Arc<K>>, ClientError> {
        self.read::<K>(&(), namespace, Query::List(selector))
    }

    /// [`CachedClient::get`] for a resource known only at run time.
    pub fn get_dynamic(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, ClientError> {
        Ok(self
            .read::<DynamicObject>(resource, namespace, Query::Get(name))?
            .pop()
            .map(|obj| with_types(obj, resource)))
    }

    /// [`CachedClient::list`] for a resource known only at run time.
    pub fn list_dynamic(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<Vec<Arc<DynamicObject>>, ClientError> {
        Ok(self
            .read::<DynamicObject>(resource, namespace, Query::List(selector))?
            .into_iter()
            .map(|obj| with_types(obj, resource))
            .collect())
    }

    /// The one read path, typed or dynamic (`dynamic_type` is `()` or the
    /// `ApiResource`): every cache of the kind that covers the query answers, from
    /// its store when it holds `K`, through JSON otherwise. A get stops at the first
    /// cache holding the object; a list merges and deduplicates.
    fn read<K: CacheObject>(
        &self,
        dynamic_type: &K::DynamicType,
        namespace: Option<&str>,
        query: Query<'_>,
    ) -> Result<Vec<Arc<K>>, ClientError> {
        let (group, version) = (K::group(dynamic_type), K::version(dynamic_type));
        let resource = || resource_name(&group, &version, &K::plural(dynamic_type));
        let mut covered = false;
        let mut items = Vec::new();
        for entry in self
            .inner
            .caches
            .of_kind(&group, &version, &K::kind(dynamic_type))
        {
            let selection = &entry.name.selection;
            let covers = match query {
                Query::Get(name) => selection.covers_object(namespace, name),
                Query::List(_) => selection.covers_namespace(namespace),
            };
            if !covers {
                continue;
            }
            covered = true;
            if let Some(store) = entry.reader.as_any().downcast_ref::<StoreReader<K>>() {
                items.extend(store.read(namespace, query));
            } else {
                for value in entry.reader.read_json(namespace, query) {
                    let decoded =
                        value
                            .and_then(serde_json::from_value::<K>)
                            .map_err(|source| ClientError::Decode {
                                resource: resource(),
                                source,
                            })?;
                    items.push(Arc::new(decoded));
                }
            }
            if matches!(query, Query::Get(_)) && !items.is_empty() {
                return Ok(items);
            }
        }
        if !covered {
            let read = UndeclaredRead {
                resource: resource(),
                namespace: namespace.map(str::to_owned),
                name: query.name().map(str::to_owned),
            };
            self.inner.undeclared.record(read.clone());
            return Err(ClientError::NotCached {
                resource: read.resource,
                namespace: read.namespace,
                name: read.name,
            });
        }
        Ok(dedupe(items))
    }
}

/// The stored object with its apiVersion/kind filled in (LIST items may lack them).
fn with_types(obj: Arc<DynamicObject>, resource: &ApiResource) -> Arc<DynamicObject> {
    if obj.types.is_some() {
        return obj;
    }
    let mut obj = DynamicObject::clone(&obj);
    obj.types = Some(TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    Arc::new(obj)
}
