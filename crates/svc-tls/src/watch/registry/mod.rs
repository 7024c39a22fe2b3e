//! The watched Secrets of a process: one watch, one cache and one load per Secret of
//! each cluster, however many resolvers, verifiers and signers name it and however
//! often a controller builds them (the platform's controllers build a client per
//! reconcile).
//!
//! [`SecretWatches`] is the registry, keyed by the cluster the Secret is read from
//! ([`ClusterId`]), the credentials of the caller ([`CredentialId`]) and the Secret's
//! namespace and name: a client of another cluster never receives this cluster's
//! material, and a caller never receives what only another caller's credentials
//! could read, whichever asked first. Each watch runs under the credentials of the
//! callers it serves, so a credential the API server refuses fails only its own
//! callers (and leaves nothing behind), never another's. The first user of a
//! Secret starts its watch and waits for it to sync, as an unshared build does (a
//! Secret the API server refuses, or a sync timeout, fails that call and leaves
//! nothing behind, so the next call tries again). Every later user gets the shared
//! [`SharedSecret`] at once: no API request, no wait, and no parse of unchanged
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
//! ConfigMaps (a trust-manager CA bundle) take the same path: the same keys, the same
//! runtime, the same API client per cluster and credential.
//!
//! An entry lives while anything outside the registry uses it (a resolver, verifier,
//! peer client or shared handle built over it is held) and for an **eviction grace**
//! after its last use ([`DEFAULT_EVICTION_GRACE`], 10 minutes; see
//! [`SecretWatches::with_eviction_grace`]); then its watch stops, and the API client
//! of its cluster and credential goes once no entry reads through it. The grace keeps
//! the churn (a LIST and a WATCH per reconcile) away from a controller that builds
//! its clients per reconcile and drops them in between, as controller-runtime keeps
//! its informers; without it a provisioner that touches a hundred clusters once would
//! keep a hundred sets of watches for the life of the process.
//!
//! Each [`SharedSecret`] loads every new version of its Secret once, when the watch
//! delivers it, into the caches its users read on the handshake path (and warms the
//! key with one signature: AWS-LC builds an RSA key's Montgomery contexts at its first
//! signature), so the first handshake after a rotation costs what an unchanged one
//! does.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use cluster_id::{ClusterClient, ClusterId, CredentialId};
use rustls::crypto::CryptoProvider;
use tokio::sync::OnceCell;

use super::configmap::{ConfigMapSource, ConfigMapSourceError};
use super::observer::RegistryObserver;
use super::runtime::{AbortOnDrop, BackgroundRuntime, RuntimeLiveness};
use super::secret::{SecretSource, SourceError};
use super::shareable::{EntryValue, SharedValue};
use super::shared::SharedSecret;
use super::shared_configmap::SharedConfigMap;
use crate::material::crypto_provider;
use crate::origin::{ConfigMapRef, SecretRef};

mod entries;
mod eviction;
mod shared_values;
mod weak;

use entries::{Entries, EntryKey, Use};
pub use eviction::RegistryCounts;
use eviction::reap;
use shared_values::SharedValues;
pub(crate) use weak::WeakSecretWatches;

/// How long an entry nobody uses is kept before its watch stops: 10 minutes, longer
/// than the requeue interval of a controller that rebuilds its clients per
/// reconcile (so its watches are never restarted), short enough that a provisioner
/// that reached a cluster once stops watching it soon after.
pub const DEFAULT_EVICTION_GRACE: Duration = Duration::from_secs(600);

/// The registry of watched Secrets and ConfigMaps; cheap to clone (clones share it).
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use svc_tls::SecretRef;
/// use svc_tls::watch::SecretWatches;
///
/// let secret = SecretRef::new("unikorn", "unikorn-region-client-certificate");
/// // Per reconcile: the first call watches and waits, every later one returns at once.
/// let shared = SecretWatches::process()
///     .watch(&client, &secret, Duration::from_secs(30))
///     .await?;
/// assert_eq!(shared.secret_ref(), &secret);
/// assert_eq!(shared.cluster(), client.cluster());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SecretWatches {
    inner: Arc<Registry>,
}

struct Registry {
    provider: Arc<CryptoProvider>,
    /// How long an unused entry is kept.
    grace: Duration,
    /// The limits of every watch started here.
    limits: watch_ready::WatchLimits,
    secrets: Entries<SecretRef, SharedSecret>,
    configmaps: Entries<ConfigMapRef, SharedConfigMap>,
    /// Where the watches and loaders run; started with the first watch.
    runtime: OnceLock<BackgroundRuntime>,
    /// The task that evicts unused entries, started with the runtime.
    reaper: OnceLock<AbortOnDrop<()>>,
    /// What observes this registry from above (its metrics), installed once and kept
    /// for the registry's life.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    observer: OnceLock<Arc<dyn RegistryObserver<WeakSecretWatches>>>,
    /// What the layers above share among the users of this registry (the peers'
    /// pooled HTTP clients).
    shared_values: SharedValues,
    /// One API client per cluster and credential for every watch of that cluster
    /// under that credential, built from the first configuration given for them on
    /// the registry's runtime (one connection pool and one credential refresher per
    /// cluster and credential, not per object).
    kube_clients: Mutex<std::collections::HashMap<(ClusterId, CredentialId), kube::Client>>,
}

static PROCESS: LazyLock<SecretWatches> = LazyLock::new(SecretWatches::new);

impl Default for SecretWatches {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SecretWatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretWatches")
            .field("secrets", &self.watched())
            .field("counts", &self.counts())
            .finish()
    }
}

impl SecretWatches {
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
    /// let watches = svc_tls::watch::SecretWatches::with_eviction_grace(Duration::from_secs(60));
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
                secrets: Entries::new("Secret"),
                configmaps: Entries::new("ConfigMap"),
                runtime: OnceLock::new(),
                reaper: OnceLock::new(),
                observer: OnceLock::new(),
                shared_values: SharedValues::default(),
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
    /// use svc_tls::watch::{SecretWatches, default_limits};
    ///
    /// let limits = default_limits().coalesce(Some(Duration::from_millis(200)));
    /// let watches = SecretWatches::with_watch_limits(limits.clone());
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
        observer: Arc<dyn RegistryObserver<WeakSecretWatches>>,
    ) -> bool {
        if self.inner.observer.set(observer.clone()).is_err() {
            return false;
        }
        observer.installed(self.downgrade());
        true
    }

    /// A handle that does not keep this registry alive.
    pub(crate) fn downgrade(&self) -> WeakSecretWatches {
        WeakSecretWatches(Arc::downgrade(&self.inner))
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
        self.inner.shared_values.get_or_build(matches, build)
    }

    /// The Secrets watched (started and synced) now, shared.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn shared_secrets(&self) -> Vec<SharedSecret> {
        self.inner.secrets.values()
    }

    /// The process's registry, used by
    /// [`PeerTls::from_options`](crate::client::PeerTls::from_options). It lives for the
    /// process; its entries are evicted once unused for [`DEFAULT_EVICTION_GRACE`].
    ///
    /// Entries are keyed by cluster and credential, so one process may read
    /// same-named Secrets from several clusters, and as several service accounts,
    /// through it (a provisioner inside a remote cluster's scope).
    pub fn process() -> &'static SecretWatches {
        &PROCESS
    }

    /// The crypto provider the shared caches load keys with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.inner.provider
    }

    /// `secret` of `client`'s cluster, read with `client`'s credentials, shared:
    /// started and synced (waiting at most `timeout`) by the first call for that
    /// cluster, credential and Secret, returned at once by every later one. Concurrent
    /// first calls wait for one start. A failed or cancelled start leaves nothing
    /// behind. Cancel-safe.
    ///
    /// # Errors
    /// [`SourceError`] naming the Secret (and its cluster) when the watch cannot start:
    /// refused, not synced in time, or its client cannot be built from the
    /// configuration.
    pub async fn watch(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
    ) -> Result<SharedSecret, SourceError> {
        self.watch_secret(client, secret, timeout, Use::Identity)
            .await
    }

    /// `secret` of `client`'s cluster as a CA only: as [`SecretWatches::watch`], but
    /// the cache keeps only `ca.crt` (and `tls.crt` of a TLS Secret): key material is
    /// dropped before caching, with one WARN and [`SecretSource::dropped_private_key`]
    /// set. When the Secret is already watched in full with the same credentials (it
    /// is also this process's identity), that watch is shared.
    ///
    /// # Errors
    /// As [`SecretWatches::watch`].
    pub async fn watch_trust(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
    ) -> Result<SharedSecret, SourceError> {
        let full = EntryKey::new(client, secret.clone(), Use::Identity);
        if let Some(shared) = self.inner.secrets.started(&full) {
            return Ok(shared);
        }
        self.watch_secret(client, secret, timeout, Use::TrustOnly)
            .await
    }

    /// `configmap` of `client`'s cluster, read with `client`'s credentials, shared as
    /// Secrets are ([`SecretWatches::watch`]).
    ///
    /// # Errors
    /// [`ConfigMapSourceError`] naming the ConfigMap (and its cluster) when the watch
    /// cannot start.
    pub async fn watch_configmap(
        &self,
        client: &ClusterClient,
        configmap: &ConfigMapRef,
        timeout: Duration,
    ) -> Result<SharedConfigMap, ConfigMapSourceError> {
        let key = EntryKey::new(client, configmap.clone(), Use::TrustOnly);
        let start = self.start_configmap(client, configmap, timeout);
        shared_entry(&self.inner.configmaps, key, start).await
    }

    async fn watch_secret(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedSecret, SourceError> {
        let key = EntryKey::new(client, secret.clone(), use_);
        let start = self.start_secret(client, secret, timeout, use_);
        shared_entry(&self.inner.secrets, key, start).await
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

    /// Starts `secret`'s watch and loader on the registry's runtime, with a client of
    /// the registry's own when `client` carries its configuration.
    async fn start_secret(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedSecret, SourceError> {
        let failed = |reason: String| SourceError::Client {
            secret: secret.clone(),
            cluster: client.cluster().clone(),
            reason,
        };
        let runtime = self.runtime().map_err(failed)?;
        let caller_runtime = caller_runtime(client);
        let (client, secret_ref, provider) =
            (client.clone(), secret.clone(), self.inner.provider.clone());
        let task_runtime = runtime.clone();
        let registry = self.clone();
        runtime
            .spawn(async move {
                let kube_client =
                    registry
                        .kube_client(&client)
                        .map_err(|reason| SourceError::Client {
                            secret: secret_ref.clone(),
                            cluster: client.cluster().clone(),
                            reason,
                        })?;
                let source = SecretSource::watch_in(
                    kube_client,
                    client.cluster().clone(),
                    secret_ref,
                    timeout,
                    use_ == Use::TrustOnly,
                    task_runtime,
                    &registry.inner.limits,
                )
                .await?;
                Ok(SharedSecret::start(
                    source,
                    client.cluster().clone(),
                    provider,
                    caller_runtime,
                ))
            })
            .await
            .map_err(|_| SourceError::Stopped {
                secret: secret.clone(),
            })?
    }

    /// Starts `configmap`'s watch on the registry's runtime, as [`Self::start_secret`].
    async fn start_configmap(
        &self,
        client: &ClusterClient,
        configmap: &ConfigMapRef,
        timeout: Duration,
    ) -> Result<SharedConfigMap, ConfigMapSourceError> {
        let failed = |reason: String| ConfigMapSourceError::Client {
            configmap: configmap.clone(),
            cluster: client.cluster().clone(),
            reason,
        };
        let runtime = self.runtime().map_err(failed)?;
        let caller_runtime = caller_runtime(client);
        let (client, target) = (client.clone(), configmap.clone());
        let task_runtime = runtime.clone();
        let registry = self.clone();
        runtime
            .spawn(async move {
                let kube_client = registry.kube_client(&client).map_err(|reason| {
                    ConfigMapSourceError::Client {
                        configmap: target.clone(),
                        cluster: client.cluster().clone(),
                        reason,
                    }
                })?;
                let source = ConfigMapSource::watch_shared(
                    kube_client,
                    client.cluster().clone(),
                    target,
                    timeout,
                    task_runtime,
                    &registry.inner.limits,
                )
                .await?;
                Ok(SharedConfigMap::new(
                    source,
                    client.cluster().clone(),
                    caller_runtime,
                ))
            })
            .await
            .map_err(|_| ConfigMapSourceError::Stopped {
                configmap: configmap.clone(),
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

/// The entry of `key` in `entries`: started by `start` on the first call, shared by
/// every later one; a failed or cancelled start leaves nothing behind.
async fn shared_entry<O, V, E>(
    entries: &Entries<O, V>,
    key: EntryKey<O>,
    start: impl Future<Output = Result<V, E>>,
) -> Result<V, E>
where
    O: Clone + Eq + std::hash::Hash + fmt::Display,
    V: EntryValue,
{
    let cell: Arc<OnceCell<V>> = entries.cell(&key);
    let started = cell.get_or_try_init(|| start).await.cloned();
    if started.is_err() {
        entries.forget_if_unstarted(&key, &cell);
    }
    started
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
