//! The watched objects of a process (Secrets, ConfigMaps): one watch, one cache and
//! one load per object of each cluster, however many resolvers, verifiers and signers name it and however
//! often a controller builds them (the platform's controllers build a client per
//! reconcile).
//!
//! [`WatchedObjects`] is the registry, keyed by the cluster the Secret is read from
//! ([`ClusterId`]), the credentials of the caller ([`CredentialId`]) and the Secret's
//! namespace and name: a client of another cluster never receives this cluster's
//! material, and a caller never receives what only another caller's credentials
//! could read, whichever asked first. Each watch runs under the credentials of the
//! callers it serves, so a credential the API server refuses fails only its own
//! callers (and leaves nothing behind), never another's. The first user of a
//! Secret starts its watch and waits for it to sync, as an unshared build does (a
//! Secret the API server refuses, or a sync timeout, fails that call and leaves
//! nothing behind, so the next call tries again). Every later user gets the shared
//! [`SharedObject`] at once: no API request, no wait, and no parse of unchanged
//! material, so a construction during an API-server outage succeeds from what the
//! cache holds (the watch's health says it is stale).
//!
//! The watches and loaders run on the registry's own runtime (a thread of its own),
//! with a client the registry builds from the caller's `kube::Config`
//! ([`ClusterClient::config`], one per cluster and credential), so they do not end with the runtime of whichever
//! caller started them. A [`ClusterClient`] with no configuration is watched through
//! the caller's client; when that client's runtime ends, its entry is dropped and the
//! next call starts a new watch.
//!
//! Every kind takes the same path ([`WatchedObjects::watch`]): the same keys,
//! the same runtime, the same API client per cluster and credential; a ConfigMap (a
//! trust-manager CA bundle) is one such kind.
//!
//! An entry lives while anything outside the registry uses it (a resolver, verifier,
//! peer client or shared handle built over it is held) and for an **eviction grace**
//! after its last use ([`DEFAULT_EVICTION_GRACE`], 10 minutes; see
//! [`WatchedObjects::with_eviction_grace`]); then its watch stops, and the API client
//! of its cluster and credential goes once no entry reads through it. The grace keeps
//! the churn (a LIST and a WATCH per reconcile) away from a controller that builds
//! its clients per reconcile and drops them in between, as controller-runtime keeps
//! its informers; without it a provisioner that touches a hundred clusters once would
//! keep a hundred sets of watches for the life of the process.
//!
//! Each shared Secret loads every new version once, when the watch
//! delivers it, into the caches its users read on the handshake path (and warms the
//! key with one signature: AWS-LC builds an RSA key's Montgomery contexts at its first
//! signature), so the first handshake after a rotation costs what an unchanged one
//! does.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use cluster_id::{ClusterClient, ClusterId, CredentialId};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use rustls::crypto::CryptoProvider;
use tokio::sync::OnceCell;

use super::held::Held;
use super::kind::{WatchedKind, WatchedRef};
use super::object::{Start, WatchError, WatchedObject};
use super::observer::RegistryObserver;
use super::runtime::{AbortOnDrop, BackgroundRuntime, RuntimeLiveness};
use super::shareable::SharedValue;
use super::shared::SharedObject;
use crate::material::crypto_provider;
use crate::origin::ConfigMapRef;

mod entries;
mod eviction;
mod weak;

use entries::{Entries, EntryKey, KindEntries, Use};
pub use eviction::RegistryCounts;
use eviction::reap;
pub(crate) use weak::WeakWatchedObjects;

/// The registry of watched objects.
#[deprecated(since = "0.2.0", note = "renamed `watch::WatchedObjects`")]
pub type SecretWatches = WatchedObjects;

/// How long an entry nobody uses is kept before its watch stops: 10 minutes, longer
/// than the requeue interval of a controller that rebuilds its clients per
/// reconcile (so its watches are never restarted), short enough that a provisioner
/// that reached a cluster once stops watching it soon after.
pub const DEFAULT_EVICTION_GRACE: Duration = Duration::from_secs(600);

/// The registry of watched objects (Secrets, ConfigMaps), one shared watch per
/// cluster, credential and object; cheap to clone (clones share it).
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use svc_tls::SecretRef;
/// use svc_tls::watch::WatchedObjects;
///
/// let secret = SecretRef::new("unikorn", "unikorn-region-client-certificate");
/// // Per reconcile: the first call watches and waits, every later one returns at once.
/// let shared = WatchedObjects::process()
///     .watch(&client, &secret, Duration::from_secs(30))
///     .await?;
/// assert_eq!(shared.secret_ref(), &secret);
/// assert_eq!(shared.cluster(), client.cluster());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WatchedObjects {
    inner: Arc<Registry>,
}

struct Registry {
    provider: Arc<CryptoProvider>,
    /// How long an unused entry is kept.
    grace: Duration,
    /// The limits of every watch started here.
    limits: watch_ready::WatchLimits,
    /// The entries of each kind watched so far, by the kind's type: an
    /// `Arc<Entries<K>>`, and the same as the kind-blind view eviction and counts
    /// walk.
    kinds: Mutex<Vec<Kind>>,
    /// Where the watches and loaders run; started with the first watch.
    runtime: OnceLock<BackgroundRuntime>,
    /// The task that evicts unused entries, started with the runtime.
    reaper: OnceLock<AbortOnDrop<()>>,
    /// What observes this registry from above (its metrics), installed once and kept
    /// for the registry's life.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    observer: OnceLock<Arc<dyn RegistryObserver<WeakWatchedObjects>>>,
    /// What the layers above share among the users of this registry (the peers'
    /// pooled HTTP clients).
    shared_values: Held,
    /// One API client per cluster and credential for every watch of that cluster
    /// under that credential, built from the first configuration given for them on
    /// the registry's runtime (one connection pool and one credential refresher per
    /// cluster and credential, not per object).
    kube_clients: Mutex<std::collections::HashMap<(ClusterId, CredentialId), kube::Client>>,
}

/// One kind's entries: its type, the `Arc<Entries<K>>`, and the same kind-blind.
type Kind = (TypeId, Arc<dyn Any + Send + Sync>, Arc<dyn KindEntries>);

static PROCESS: LazyLock<WatchedObjects> = LazyLock::new(WatchedObjects::new);

impl Default for WatchedObjects {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for WatchedObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedObjects")
            .field("secrets", &self.watched())
            .field("counts", &self.counts())
            .finish()
    }
}

impl WatchedObjects {
    /// An empty registry, loading keys with
    /// [`crypto_provider`](crate::material::crypto_provider), evicting unused entries
    /// after [`DEFAULT_EVICTION_GRACE`].
    pub fn new() -> Self {
        Self::with_provider(Arc::new(crypto_provider()))
    }

    /// An empty registry loading keys with `provider`.
    pub fn with_provider(provider: Arc<CryptoProvider>) -> Self {
        Self::with_settings(provider, DEFAULT_EVICTION_GRACE)
    }

    /// An empty registry that stops an entry's watch once nothing has used it for
    /// `grace` (instead of [`DEFAULT_EVICTION_GRACE`]). A short grace costs a LIST
    /// and a WATCH (and a parse) each time a dropped entry is needed again.
    ///
    /// ```
    /// use std::time::Duration;
    /// let watches = svc_tls::watch::WatchedObjects::with_eviction_grace(Duration::from_secs(60));
    /// assert_eq!(watches.eviction_grace(), Duration::from_secs(60));
    /// ```
    pub fn with_eviction_grace(grace: Duration) -> Self {
        Self::with_settings(Arc::new(crypto_provider()), grace)
    }

    fn with_settings(provider: Arc<CryptoProvider>, grace: Duration) -> Self {
        Self {
            inner: Arc::new(Registry {
                provider,
                grace,
                limits: super::default_limits(),
                kinds: Mutex::new(Vec::new()),
                runtime: OnceLock::new(),
                reaper: OnceLock::new(),
                observer: OnceLock::new(),
                shared_values: Held::default(),
                kube_clients: Mutex::new(std::collections::HashMap::new()),
            }),
        }
    }

    /// An empty registry whose watches run within `limits` instead of
    /// [`default_limits`](super::default_limits) (the size of a Secret or ConfigMap,
    /// the LIST and WATCH bodies, the coalescing interval; see
    /// [`WatchLimits`](watch_ready::WatchLimits)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use svc_tls::watch::{WatchedObjects, default_limits};
    ///
    /// let limits = default_limits().coalesce(Some(Duration::from_millis(200)));
    /// let watches = WatchedObjects::with_watch_limits(limits.clone());
    /// assert_eq!(watches.watch_limits(), &limits);
    /// ```
    pub fn with_watch_limits(limits: watch_ready::WatchLimits) -> Self {
        let mut watches = Self::new();
        if let Some(registry) = Arc::get_mut(&mut watches.inner) {
            registry.limits = limits;
        }
        watches
    }

    /// The limits of the watches started here.
    pub fn watch_limits(&self) -> &watch_ready::WatchLimits {
        &self.inner.limits
    }

    /// How long an unused entry is kept before its watch stops.
    pub fn eviction_grace(&self) -> Duration {
        self.inner.grace
    }

    /// Installs `observer` (the registry's metrics, see `crate::metrics`) and tells it
    /// which registry it observes ([`RegistryObserver::installed`]); false, and nothing
    /// called, when one is installed already.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn install_observer(
        &self,
        observer: Arc<dyn RegistryObserver<WeakWatchedObjects>>,
    ) -> bool {
        if self.inner.observer.set(observer.clone()).is_err() {
            return false;
        }
        observer.installed(self.downgrade());
        true
    }

    /// A handle that does not keep this registry alive.
    pub(crate) fn downgrade(&self) -> WeakWatchedObjects {
        WeakWatchedObjects(Arc::downgrade(&self.inner))
    }

    /// The first `T` stored here that `matches`, or the one `build` makes (a failed
    /// build stores nothing). For what the layers above share among this registry's
    /// users, without this layer knowing it; kept while a clone is held outside the
    /// registry and for the eviction grace after.
    pub(crate) fn shared_value<T: SharedValue, E>(
        &self,
        matches: impl Fn(&T) -> bool,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.inner
            .shared_values
            .get_or_build_matching(matches, build)
    }

    /// The Secrets watched (started and synced) now, shared.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn shared_secrets(&self) -> Vec<SharedObject<Secret>> {
        self.entries::<Secret>().values()
    }

    /// The entries of kind `K` (made with the first use of the kind).
    fn entries<K: WatchedKind>(&self) -> Arc<Entries<K>> {
        let ty = TypeId::of::<K>();
        let mut kinds = self
            .inner
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = kinds
            .iter()
            .find(|(kind, _, _)| *kind == ty)
            .and_then(|(_, entries, _)| entries.clone().downcast::<Entries<K>>().ok())
        {
            return found;
        }
        let entries = Arc::new(Entries::<K>::new());
        kinds.push((ty, entries.clone(), entries.clone()));
        entries
    }

    /// The kind-blind view of every kind's entries.
    fn all_entries(&self) -> Vec<Arc<dyn KindEntries>> {
        self.inner
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, _, entries)| entries.clone())
            .collect()
    }

    /// The process's registry, used by
    /// [`PeerTls::from_options`](crate::client::PeerTls::from_options). It lives for the
    /// process; its entries are evicted once unused for [`DEFAULT_EVICTION_GRACE`].
    ///
    /// Entries are keyed by cluster and credential, so one process may read
    /// same-named Secrets from several clusters, and as several service accounts,
    /// through it (a provisioner inside a remote cluster's scope).
    pub fn process() -> &'static WatchedObjects {
        &PROCESS
    }

    /// The crypto provider the shared caches load keys with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.inner.provider
    }

    /// `object` of `client`'s cluster, read with `client`'s credentials, shared:
    /// started and synced (waiting at most `timeout`) by the first call for that
    /// cluster, credential and object, returned at once by every later one.
    /// Concurrent first calls wait for one start. A failed or cancelled start leaves
    /// nothing behind. Cancel-safe. The kind is the reference's (a
    /// [`SecretRef`](crate::SecretRef), a [`ConfigMapRef`]); the whole object is
    /// cached (a Secret's key too: see [`WatchedObjects::watch_trust`] for a CA).
    ///
    /// ```no_run
    /// # async fn f(client: cluster_id::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use svc_tls::origin::ConfigMapRef;
    /// use svc_tls::watch::WatchedObjects;
    ///
    /// let bundle = ConfigMapRef::new("unikorn", "platform-ca-bundle");
    /// let shared = WatchedObjects::process()
    ///     .watch(&client, &bundle, Duration::from_secs(30))
    ///     .await?;
    /// assert_eq!(shared.object_ref(), &bundle);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`WatchError`] naming the object (and its cluster) when the watch cannot start:
    /// refused, not synced in time, or its client cannot be built from the
    /// configuration.
    pub async fn watch<R: WatchedRef>(
        &self,
        client: &ClusterClient,
        object: &R,
        timeout: Duration,
    ) -> Result<SharedObject<R::Kind>, WatchError<R::Kind>> {
        self.shared_entry(client, object, timeout, Use::Identity)
            .await
    }

    /// `object` of `client`'s cluster as a CA only: as [`WatchedObjects::watch`],
    /// but the cache keeps only what trust is read from (a Secret's `ca.crt`, or
    /// `tls.crt` of a TLS Secret): key material is dropped before caching, with one
    /// WARN and [`WatchedObject::dropped_private_key`] set. When the object is
    /// already watched in full with the same credentials (a Secret that is also this
    /// process's identity), that watch is shared.
    ///
    /// # Errors
    /// As [`WatchedObjects::watch`].
    pub async fn watch_trust<R: WatchedRef>(
        &self,
        client: &ClusterClient,
        object: &R,
        timeout: Duration,
    ) -> Result<SharedObject<R::Kind>, WatchError<R::Kind>> {
        let full = EntryKey::new(client, object.clone(), Use::Identity);
        if let Some(shared) = self.entries::<R::Kind>().started(&full) {
            return Ok(shared);
        }
        self.shared_entry(client, object, timeout, Use::TrustOnly)
            .await
    }

    /// `configmap` of `client`'s cluster, shared.
    ///
    /// # Errors
    /// As [`WatchedObjects::watch`].
    #[deprecated(
        since = "0.2.0",
        note = "use `WatchedObjects::watch_trust`, for any kind"
    )]
    pub async fn watch_configmap(
        &self,
        client: &ClusterClient,
        configmap: &ConfigMapRef,
        timeout: Duration,
    ) -> Result<SharedObject<ConfigMap>, WatchError<ConfigMap>> {
        self.watch_trust(client, configmap, timeout).await
    }

    /// The entry of `object` for `use_`: started on the first call, shared by every
    /// later one; a failed or cancelled start leaves nothing behind.
    async fn shared_entry<K: WatchedKind>(
        &self,
        client: &ClusterClient,
        object: &K::Ref,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedObject<K>, WatchError<K>> {
        let entries = self.entries::<K>();
        let key = EntryKey::new(client, object.clone(), use_);
        let cell: Arc<OnceCell<SharedObject<K>>> = entries.cell(&key);
        let started = cell
            .get_or_try_init(|| self.start(client, object, timeout, use_))
            .await
            .cloned();
        if started.is_err() {
            entries.forget_if_unstarted(&key, &cell);
        }
        started
    }

    /// The registry's runtime, started (with the reaper) by the first watch.
    fn runtime(&self) -> Result<BackgroundRuntime, String> {
        if let Some(runtime) = self.inner.runtime.get() {
            return Ok(runtime.clone());
        }
        let started = BackgroundRuntime::start().map_err(|e| watch_ready::excerpt::chain(&e))?;
        let runtime = self.inner.runtime.get_or_init(|| started).clone();
        self.inner
            .reaper
            .get_or_init(|| runtime.spawn(reap(self.downgrade(), self.inner.grace)));
        Ok(runtime)
    }

    /// Starts `object`'s watch and loader on the registry's runtime, with a client of
    /// the registry's own when `client` carries its configuration.
    async fn start<K: WatchedKind>(
        &self,
        client: &ClusterClient,
        object: &K::Ref,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedObject<K>, WatchError<K>> {
        let failed = |reason: String| WatchError::Client {
            object: object.clone(),
            cluster: client.cluster().clone(),
            reason,
        };
        let runtime = self.runtime().map_err(failed)?;
        let caller_runtime = caller_runtime(client);
        let (client, target, provider) =
            (client.clone(), object.clone(), self.inner.provider.clone());
        let task_runtime = runtime.clone();
        let registry = self.clone();
        runtime
            .spawn(async move {
                let kube_client =
                    registry
                        .kube_client(&client)
                        .map_err(|reason| WatchError::Client {
                            object: target.clone(),
                            cluster: client.cluster().clone(),
                            reason,
                        })?;
                let start = Start {
                    cluster: Some(client.cluster().clone()),
                    trust_only: use_ == Use::TrustOnly,
                    runtime: Some(task_runtime),
                    limits: &registry.inner.limits,
                };
                let source = WatchedObject::start(kube_client, target, timeout, start).await?;
                Ok(SharedObject::start(
                    source,
                    client.cluster().clone(),
                    provider,
                    caller_runtime,
                ))
            })
            .await
            .map_err(|_| WatchError::Stopped {
                object: object.clone(),
            })?
    }

    /// The API client a watch for `client` runs through: the registry's own for its
    /// cluster and credential (built from `client`'s configuration on the registry's
    /// runtime, where this runs), or `client`'s own when it carries no configuration.
    fn kube_client(&self, client: &ClusterClient) -> Result<kube::Client, String> {
        let Some(config) = client.config() else {
            return Ok(client.kube().clone());
        };
        let key = (client.cluster().clone(), client.credential().clone());
        let mut clients = self
            .inner
            .kube_clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = clients.get(&key) {
            return Ok(found.clone());
        }
        let built =
            kube::Client::try_from(config.clone()).map_err(|e| watch_ready::excerpt::chain(&e))?;
        clients.insert(key, built.clone());
        Ok(built)
    }
}

/// A client without configuration keeps working only while the runtime it was built
/// on runs: its entry watches that runtime.
fn caller_runtime(client: &ClusterClient) -> Option<RuntimeLiveness> {
    match client.config() {
        Some(_) => None,
        None => Some(RuntimeLiveness::of_current()),
    }
}

#[cfg(test)]
mod tests;
