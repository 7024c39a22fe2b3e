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
//! A watch lives as long as its registry. [`SecretWatches::process`] lives for the
//! process, as controller-runtime keeps its informers: ending a watch with its last
//! user would bring back the churn (a LIST and a WATCH per reconcile) that the
//! registry exists to remove. A registry made with [`SecretWatches::new`] (one per
//! test) ends its watches when it and every resolver and verifier built from it are
//! dropped.
//!
//! Each [`SharedSecret`] loads every new version of its Secret once, when the watch
//! delivers it, into the caches its users read on the handshake path (and warms the
//! key with one signature: AWS-LC builds an RSA key's Montgomery contexts at its first
//! signature), so the first handshake after a rotation costs what an unchanged one
//! does.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use cluster_id::{ClusterClient, ClusterId, CredentialId};
use rustls::crypto::CryptoProvider;
use tokio::sync::OnceCell;

use super::observer::RegistryObserver;
use super::runtime::{BackgroundRuntime, RuntimeLiveness};
use super::secret::{SecretSource, SourceError};
use super::shared::SharedSecret;
use crate::material::crypto_provider;
use crate::origin::SecretRef;

mod weak;

pub(crate) use weak::WeakSecretWatches;

/// The registry of watched Secrets; cheap to clone (clones share it).
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

/// What the registry tells its entries apart by: the cluster, the credentials the
/// watch runs under, the Secret, and whether the entry is for trust only (its cache
/// never holds the Secret's `tls.key`).
///
/// The credential is part of the key so that a caller is served only what its own
/// credentials were allowed to read: a cache hit needs the same cluster **and** the
/// same credentials, and a credential the API server refused is never the one
/// another caller's watch runs under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EntryKey {
    cluster: ClusterId,
    credential: CredentialId,
    secret: SecretRef,
    use_: Use,
}

impl EntryKey {
    fn new(client: &ClusterClient, secret: &SecretRef, use_: Use) -> Self {
        Self {
            cluster: client.cluster().clone(),
            credential: client.credential().clone(),
            secret: secret.clone(),
            use_,
        }
    }
}

/// What an entry's users read from its Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Use {
    /// Everything: an identity (certificate and key), and trust from the same Secret.
    Identity,
    /// Trust anchors only: `tls.key` is dropped before caching.
    TrustOnly,
}

struct Registry {
    provider: Arc<CryptoProvider>,
    entries: Mutex<HashMap<EntryKey, Arc<OnceCell<SharedSecret>>>>,
    /// Where the watches and loaders run; started with the first watch.
    runtime: std::sync::OnceLock<BackgroundRuntime>,
    /// What observes this registry from above (its metrics), installed once and kept
    /// for the registry's life.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    observer: std::sync::OnceLock<Arc<dyn RegistryObserver<WeakSecretWatches>>>,
    /// What the layers above share among the users of this registry (the peers'
    /// pooled HTTP clients), kept as long as the registry.
    shared_values: Mutex<Vec<Box<dyn Any + Send + Sync>>>,
    /// One API client per cluster and credential for every watch of that cluster
    /// under that credential, built from the first configuration given for them on
    /// the registry's runtime (one connection pool and one credential refresher per
    /// cluster and credential, not per Secret).
    kube_clients: Mutex<HashMap<(ClusterId, CredentialId), kube::Client>>,
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
            .finish()
    }
}

impl SecretWatches {
    /// An empty registry, loading keys with
    /// [`crypto_provider`](crate::material::crypto_provider).
    pub fn new() -> Self {
        Self::with_provider(Arc::new(crypto_provider()))
    }

    /// An empty registry loading keys with `provider`.
    pub fn with_provider(provider: Arc<CryptoProvider>) -> Self {
        Self {
            inner: Arc::new(Registry {
                provider,
                entries: Mutex::new(HashMap::new()),
                runtime: std::sync::OnceLock::new(),
                observer: std::sync::OnceLock::new(),
                shared_values: Mutex::new(Vec::new()),
                kube_clients: Mutex::new(HashMap::new()),
            }),
        }
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

    /// The first `T` stored here that `matches`, or the one `build` makes (stored for
    /// the life of the registry; a failed build stores nothing). For what the layers
    /// above share among this registry's users, without this layer knowing it.
    /// Construction path only (a mutex, a linear scan: a handful of values).
    pub(crate) fn shared_value<T, E>(
        &self,
        matches: impl Fn(&T) -> bool,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
    {
        let mut values = self
            .inner
            .shared_values
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = values
            .iter()
            .filter_map(|value| value.downcast_ref::<T>())
            .find(|value| matches(value))
        {
            return Ok(found.clone());
        }
        let value = build()?;
        values.push(Box::new(value.clone()));
        Ok(value)
    }

    /// The Secrets watched (started and synced) now, shared.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn shared_secrets(&self) -> Vec<SharedSecret> {
        let entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        entries
            .values()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// The process's registry, used by
    /// [`PeerTls::from_options`](crate::client::PeerTls::from_options). It lives for the
    /// process and keeps every watch it started.
    ///
    /// Entries are keyed by cluster, so one process may read same-named Secrets from
    /// several clusters through it (a provisioner inside a remote cluster's scope).
    pub fn process() -> &'static SecretWatches {
        &PROCESS
    }

    /// The crypto provider the shared caches load keys with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.inner.provider
    }

    /// `secret` of `client`'s cluster, shared: started and synced (waiting at most
    /// `timeout`) by the first call for that cluster and Secret, returned at once by
    /// every later one. Concurrent first calls wait for one start. A failed or
    /// cancelled start leaves nothing behind. Cancel-safe.
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
        self.watch_for(client, secret, timeout, Use::Identity).await
    }

    /// `secret` of `client`'s cluster as a CA only: as [`SecretWatches::watch`], but
    /// the cache never holds the Secret's `tls.key` (dropped before caching, with one
    /// WARN and [`SecretSource::dropped_private_key`] set). When the Secret is already
    /// watched in full (it is also this process's identity), that watch is shared.
    ///
    /// # Errors
    /// As [`SecretWatches::watch`].
    pub async fn watch_trust(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
    ) -> Result<SharedSecret, SourceError> {
        let full = EntryKey::new(client, secret, Use::Identity);
        if let Some(shared) = self.started(&full) {
            return Ok(shared);
        }
        self.watch_for(client, secret, timeout, Use::TrustOnly)
            .await
    }

    /// The started, living entry of `key`, if any.
    fn started(&self, key: &EntryKey) -> Option<SharedSecret> {
        let entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .and_then(|cell| cell.get().cloned())
            .filter(SharedSecret::is_alive)
    }

    async fn watch_for(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedSecret, SourceError> {
        let key = EntryKey::new(client, secret, use_);
        let cell = self.entry(&key);
        let started = cell
            .get_or_try_init(|| self.start(client, secret, timeout, use_))
            .await
            .cloned();
        if started.is_err() {
            self.forget_if_unstarted(&key, &cell);
        }
        started
    }

    /// The entry of `key`, a fresh one when it has none or its watch died with the
    /// runtime of the client it was started with.
    fn entry(&self, key: &EntryKey) -> Arc<OnceCell<SharedSecret>> {
        let mut entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let cell = entries.entry(key.clone()).or_default();
        if cell.get().is_some_and(|shared| !shared.is_alive()) {
            tracing::info!(
                cluster = %key.cluster,
                credential = %key.credential,
                secret = %key.secret,
                trust_only = key.use_ == Use::TrustOnly,
                "the watch of a shared Secret ended with its client's runtime; starting a new one"
            );
            *cell = Arc::default();
        }
        cell.clone()
    }

    /// Removes `key`'s entry if it is still `cell` and never started.
    fn forget_if_unstarted(&self, key: &EntryKey, cell: &Arc<OnceCell<SharedSecret>>) {
        let mut entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if entries
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, cell) && !current.initialized())
        {
            entries.remove(key);
        }
    }

    /// Starts `secret`'s watch and loader on the registry's runtime, with a client of
    /// the registry's own when `client` carries its configuration.
    async fn start(
        &self,
        client: &ClusterClient,
        secret: &SecretRef,
        timeout: Duration,
        use_: Use,
    ) -> Result<SharedSecret, SourceError> {
        let runtime = match self.inner.runtime.get() {
            Some(runtime) => runtime.clone(),
            None => {
                let started = BackgroundRuntime::start().map_err(|e| SourceError::Client {
                    secret: secret.clone(),
                    cluster: client.cluster().clone(),
                    reason: e.to_string(),
                })?;
                self.inner.runtime.get_or_init(|| started).clone()
            }
        };
        // A client without configuration keeps working only while the runtime it was
        // built on runs: watch that runtime.
        let caller_runtime = match client.config() {
            Some(_) => None,
            None => Some(RuntimeLiveness::of_current()),
        };
        let (client, secret_ref, provider) =
            (client.clone(), secret.clone(), self.inner.provider.clone());
        let task_runtime = runtime.clone();
        let registry = self.clone();
        runtime
            .spawn(async move {
                let kube_client = match client.config() {
                    Some(config) => registry.kube_client_for(&client, config).map_err(|e| {
                        SourceError::Client {
                            secret: secret_ref.clone(),
                            cluster: client.cluster().clone(),
                            reason: e.to_string(),
                        }
                    })?,
                    None => client.kube().clone(),
                };
                let source = SecretSource::watch_in(
                    kube_client,
                    client.cluster().clone(),
                    secret_ref,
                    timeout,
                    use_ == Use::TrustOnly,
                    task_runtime,
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

    /// The registry's API client for `client`'s cluster and credentials: the one
    /// built before, or a new one from `config` (`client`'s own), built on the
    /// registry's runtime (where this runs).
    fn kube_client_for(
        &self,
        client: &ClusterClient,
        config: &kube::Config,
    ) -> Result<kube::Client, kube::Error> {
        let key = (client.cluster().clone(), client.credential().clone());
        let mut clients = self
            .inner
            .kube_clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let built = kube::Client::try_from(config.clone())?;
        clients.insert(key, built.clone());
        Ok(built)
    }

    /// How many API clients the registry built (one per cluster and credential).
    #[cfg(test)]
    fn kube_clients(&self) -> usize {
        self.inner
            .kube_clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The Secrets watched (started and synced) now, with the cluster each is read
    /// from.
    pub fn watched(&self) -> Vec<(ClusterId, SecretRef)> {
        let entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut watched: Vec<(ClusterId, SecretRef)> = entries
            .iter()
            .filter(|(_, cell)| cell.initialized())
            .map(|(key, _)| (key.cluster.clone(), key.secret.clone()))
            .collect();
        watched.sort();
        watched.dedup();
        watched
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use test_support::pki::TestCa;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watches_of_one_cluster_share_one_api_client() {
        let (one, two) = (
            kube_testbed::Testbed::start().await,
            kube_testbed::Testbed::start().await,
        );
        let ca = TestCa::new("ca");
        for tb in [&one, &two] {
            for name in ["a", "b", "c"] {
                tb.upsert(test_support::secret::secret_with(
                    "ns",
                    name,
                    "kubernetes.io/tls",
                    &[("tls.crt", &ca.pem())],
                ));
            }
        }
        let watches = SecretWatches::new();
        let timeout = Duration::from_secs(10);
        for tb in [&one, &two] {
            // A new ClusterClient (and config) for every Secret, as per-reconcile code
            // hands over.
            for name in ["a", "b", "c"] {
                let secret = SecretRef::new("ns", name);
                watches
                    .watch_trust(&tb.cluster_client(), &secret, timeout)
                    .await
                    .unwrap();
            }
        }
        assert_eq!(watches.watched().len(), 6);
        assert_eq!(
            watches.kube_clients(),
            2,
            "one API client per cluster and credential"
        );
    }
}
