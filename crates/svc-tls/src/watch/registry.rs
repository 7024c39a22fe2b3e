//! The watched Secrets of a process: one watch, one cache and one load per Secret,
//! however many resolvers, verifiers and signers name it and however often a
//! controller builds them (the platform's controllers build a client per reconcile).
//!
//! [`SecretWatches`] is the registry, keyed by namespace and name. The first user of a
//! Secret starts its watch and waits for it to sync, as an unshared build does (a
//! Secret the API server refuses, or a sync timeout, fails that call and leaves
//! nothing behind, so the next call tries again). Every later user gets the shared
//! [`SharedSecret`] at once: no API request, no wait, and no parse of unchanged
//! material, so a construction during an API-server outage succeeds from what the
//! cache holds (the watch's health says it is stale).
//!
//! A watch lives as long as its registry. [`SecretWatches::process`] lives for the
//! process, as controller-runtime keeps its informers: ending a watch with its last
//! user would bring back the churn (a LIST and a WATCH per reconcile) that the
//! registry exists to remove. A registry made with [`SecretWatches::new`] (one per
//! test, or per cluster a process talks to) ends its watches when it and every
//! resolver and verifier built from it are dropped.
//!
//! Each [`SharedSecret`] loads every new version of its Secret once, when the watch
//! delivers it, into the caches its users read on the handshake path (and warms the
//! key with one signature: AWS-LC builds an RSA key's Montgomery contexts at its first
//! signature), so the first handshake after a rotation costs what an unchanged one
//! does.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use std::time::Duration;

use rustls::SignatureScheme;
use rustls::crypto::CryptoProvider;
use tokio::sync::OnceCell;

use super::secret::{SecretSource, SourceError};
use crate::material::{IdentityCache, TrustCache, crypto_provider};
use crate::origin::SecretRef;

/// The registry of watched Secrets; cheap to clone (clones share it).
///
/// ```no_run
/// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
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
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SecretWatches {
    inner: Arc<Registry>,
}

struct Registry {
    provider: Arc<CryptoProvider>,
    entries: Mutex<HashMap<SecretRef, Arc<OnceCell<SharedSecret>>>>,
    /// What the resolvers and verifiers built over this registry also report to
    /// (the metrics of `crate::metrics`), installed once.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    extension: std::sync::OnceLock<Arc<dyn Any + Send + Sync>>,
}

/// A registry of watched Secrets that does not keep it alive (what a metrics
/// collector holds).
#[derive(Clone)]
pub(crate) struct WeakSecretWatches(Weak<Registry>);

impl WeakSecretWatches {
    /// The registry, while it lives.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn upgrade(&self) -> Option<SecretWatches> {
        self.0.upgrade().map(|inner| SecretWatches { inner })
    }
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
                extension: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Installs `extension` once (the registry's metrics, see `crate::metrics`); false
    /// when one is installed already. The watch layer stores it and knows nothing of it.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn install_extension(&self, extension: Arc<dyn Any + Send + Sync>) -> bool {
        self.inner.extension.set(extension).is_ok()
    }

    /// The extension installed, if any.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn extension(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.inner.extension.get()
    }

    /// A handle that does not keep this registry alive.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn downgrade(&self) -> WeakSecretWatches {
        WeakSecretWatches(Arc::downgrade(&self.inner))
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
    /// A process reads its Secrets from one cluster (its own); one that reads Secrets
    /// of several clusters, and tests that run several API servers in one process,
    /// use one registry of their own per client ([`SecretWatches::new`]).
    pub fn process() -> &'static SecretWatches {
        &PROCESS
    }

    /// The crypto provider the shared caches load keys with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.inner.provider
    }

    /// `secret`, shared: started and synced (waiting at most `timeout`) by the first
    /// call, returned at once by every later one. Concurrent first calls wait for one
    /// start. A failed start is not remembered. Cancel-safe.
    pub async fn watch(
        &self,
        client: &kube::Client,
        secret: &SecretRef,
        timeout: Duration,
    ) -> Result<SharedSecret, SourceError> {
        let cell = {
            let mut entries = self
                .inner
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            entries.entry(secret.clone()).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            let source = SecretSource::watch(client.clone(), secret.clone(), timeout).await?;
            Ok(SharedSecret::start(source, self.inner.provider.clone()))
        })
        .await
        .cloned()
    }

    /// The Secrets watched (started and synced) now.
    pub fn watched(&self) -> Vec<SecretRef> {
        let entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut watched: Vec<SecretRef> = entries
            .iter()
            .filter(|(_, cell)| cell.initialized())
            .map(|(secret, _)| secret.clone())
            .collect();
        watched.sort();
        watched
    }
}

/// One watched Secret as the registry shares it: its cache, and the identity and trust
/// loads of its current version, made when the watch delivers it. Cheap to clone.
#[derive(Clone)]
pub struct SharedSecret {
    inner: Arc<Shared>,
}

struct Shared {
    /// What the options-based constructors build over this Secret (its resolver, its
    /// verifier), one of each type, so that every construction shares one.
    built: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    source: SecretSource,
    identity: Arc<IdentityCache>,
    trust: Arc<TrustCache>,
    wants_identity: AtomicBool,
    wants_trust: AtomicBool,
    /// Changes of the cache the loader has processed.
    loaded: AtomicU64,
}

impl fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSecret")
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl SharedSecret {
    fn start(source: SecretSource, provider: Arc<CryptoProvider>) -> Self {
        let shared = Self {
            inner: Arc::new(Shared {
                built: Mutex::new(HashMap::new()),
                source,
                identity: Arc::new(IdentityCache::new(provider)),
                trust: Arc::new(TrustCache::new()),
                wants_identity: AtomicBool::new(false),
                wants_trust: AtomicBool::new(false),
                loaded: AtomicU64::new(0),
            }),
        };
        let changes = shared.inner.source.changes();
        tokio::spawn(load_each_version(Arc::downgrade(&shared.inner), changes));
        shared
    }

    /// The Secret.
    pub fn secret_ref(&self) -> &SecretRef {
        self.inner.source.secret_ref()
    }

    /// The watched Secret's cache.
    pub fn source(&self) -> &SecretSource {
        &self.inner.source
    }

    /// How many changes of the Secret's cache have been loaded so far (the first list
    /// counts as one): a caller that wrote a new version waits for this to move to
    /// know the version's load is done.
    pub fn loaded_changes(&self) -> u64 {
        self.inner.loaded.load(Ordering::Acquire)
    }

    /// The identity cache every user of this Secret reads; from now on each new
    /// version is loaded into it (and its key warmed) when the watch delivers it.
    pub fn identity_cache(&self) -> Arc<IdentityCache> {
        if !self.inner.wants_identity.swap(true, Ordering::AcqRel) {
            self.inner.load_identity();
        }
        self.inner.identity.clone()
    }

    /// The root-set cache every user of this Secret as a CA reads; from now on each
    /// new version is loaded into it when the watch delivers it.
    pub fn trust_cache(&self) -> Arc<TrustCache> {
        if !self.inner.wants_trust.swap(true, Ordering::AcqRel) {
            self.inner.load_trust();
        }
        self.inner.trust.clone()
    }
}

impl SharedSecret {
    /// The `T` built over this Secret by the first successful `build`, shared by every
    /// later caller (a failed build is not remembered). Construction path only.
    pub(crate) fn built<T, E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
    {
        let key = TypeId::of::<T>();
        let mut built = self
            .inner
            .built
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = built.get(&key).and_then(|b| b.downcast_ref::<T>()) {
            return Ok(value.clone());
        }
        let value = build()?;
        built.insert(key, Box::new(value.clone()));
        Ok(value)
    }
}

impl Shared {
    /// Loads the current version as an identity (a failure is remembered by the cache
    /// and reported by the resolver) and warms a new key with one signature.
    fn load_identity(&self) {
        let Some(object) = self.source.get() else {
            return;
        };
        if let Ok(identity) = self.identity.load(&object) {
            warm(identity.certified_key());
        }
    }

    /// Loads the current version as a root set (the cache keeps the last good one).
    fn load_trust(&self) {
        if let Some(object) = self.source.get() {
            let _ = self.trust.load(&object);
        }
    }
}

/// One signature with the key, so the first handshake does not pay for the key's
/// lazily built state. Idempotent; cheap when already warm.
fn warm(key: &rustls::sign::CertifiedKey) {
    const SCHEMES: &[SignatureScheme] = &[
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP521_SHA512,
        SignatureScheme::ED25519,
    ];
    if let Some(signer) = key.key.choose_scheme(SCHEMES) {
        let _ = signer.sign(b"svc-tls key warm-up");
    }
}

/// The loader task of one shared Secret: each time the watch changes the cache, load
/// what its users read. Ends when the watch stops or the Secret is no longer shared.
async fn load_each_version(shared: Weak<Shared>, mut changes: tokio::sync::watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // Loading an RSA key takes up to a few milliseconds: off the async workers.
        let loaded = tokio::task::spawn_blocking(move || {
            if shared.wants_identity.load(Ordering::Acquire) {
                shared.load_identity();
            }
            if shared.wants_trust.load(Ordering::Acquire) {
                shared.load_trust();
            }
            shared.loaded.fetch_add(1, Ordering::AcqRel);
        })
        .await;
        if loaded.is_err() {
            return;
        }
    }
}
