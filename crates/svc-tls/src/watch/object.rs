//! The watch-driven, in-memory cache of exactly one object of a kind
//! ([`WatchedObject<K>`]), and why one could not be started ([`WatchError<K>`]).
//!
//! [`WatchedObject`] runs a `kube-runtime` reflector over a namespaced watch with the
//! field selector `metadata.name=<name>`, so the API server sends this one object and
//! nothing else, and RBAC can be limited to `get`, `list` and `watch` on it:
//!
//! ```yaml
//! rules:
//! - apiGroups: [""]
//!   resources: ["secrets"]        # or configmaps
//!   resourceNames: ["my-release-client-certificate"]
//!   verbs: ["get", "list", "watch"]
//! ```
//!
//! Reading it ([`WatchedObject::get`]) is a synchronous map look-up and an `Arc`
//! clone: no I/O, nothing that can block a TLS handshake. This is the only kind of
//! cache the resolver and the verifier accept, so an API round trip per handshake
//! cannot be configured.
//!
//! Construction ([`WatchedObject::watch`]) returns once the first list has been
//! applied (the store is *synced*), or fails: after a timeout (naming the last watch
//! error), at once when the API server refuses the watch (401, 403 or 404), or when
//! the caller drops the future (the watch task is stopped with it). After that the
//! watch task lives as long as some clone of the cache does; it retries with backoff
//! on errors and the store keeps the last state it saw meanwhile. Whatever the server
//! sends beyond the one object, and whatever exceeds the limits
//! ([`default_limits`]), is dropped and counted.
//!
//! The watch, the readiness wait, the error classification and the timeout default are
//! the workspace's one watch layer, the internal `watch-ready` crate, shared with
//! `kube-construct`'s caches.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cluster_id::ClusterId;
use kube::Api;
use kube_runtime::reflector::ObjectRef;
use watch_ready::{Health, WaitError, WatchLimits, WatchState, Watched};

use super::kind::{ApiScope, Selection, WatchedKind, sealed};
use super::runtime::BackgroundRuntime;
use crate::material::CA_CRT;
use crate::origin::SourceHealth;

/// Default bound on waiting for the first sync of an object's cache: the workspace's
/// one sync-timeout default (see `docs/decisions/one-watch-layer-and-sync-timeout.md`).
pub use watch_ready::DEFAULT_SYNC_TIMEOUT;

/// How long the watch of one object waits after applying a version before it applies
/// the next one (the versions between are coalesced into the newest): an object
/// rewritten in a loop costs at most one parse and one pool retirement per interval,
/// and its last version is applied within it.
pub const DEFAULT_COALESCE_INTERVAL: Duration = Duration::from_secs(1);

/// The largest LIST response body a watch of one object reads: 8 MiB (the one object
/// is at most [`watch_ready::DEFAULT_MAX_OBJECT_BYTES`], 1 MiB).
pub const DEFAULT_SINGLE_LIST_BYTES: usize = 8 * 1024 * 1024;

/// The limits of the watch of one object unless configured otherwise: objects up to
/// [`watch_ready::DEFAULT_MAX_OBJECT_BYTES`] (1 MiB, Kubernetes' own limit), at most
/// 16 objects kept (one is: the others are not the one watched), LIST bodies up to
/// [`DEFAULT_SINGLE_LIST_BYTES`], WATCH events up to
/// [`watch_ready::DEFAULT_MAX_EVENT_BYTES`], versions coalesced per
/// [`DEFAULT_COALESCE_INTERVAL`].
pub fn default_limits() -> WatchLimits {
    WatchLimits::default()
        .max_objects(16)
        .max_list_bytes(DEFAULT_SINGLE_LIST_BYTES)
        .coalesce(Some(DEFAULT_COALESCE_INTERVAL))
}

/// Why the cache of one object of kind `K` could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError<K: WatchedKind> {
    /// The first list did not complete in time.
    #[error(
        "timed out after {timeout:?} waiting for the watch of {} {object}{} to sync{}",
        K::KIND,
        in_cluster(cluster.as_ref()),
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    SyncTimeout {
        /// The object.
        object: K::Ref,
        /// The cluster it is read from, when the watch is shared per cluster.
        cluster: Option<ClusterId>,
        /// The bound that passed.
        timeout: Duration,
        /// The last watch error seen, if any.
        last_error: Option<String>,
    },
    /// The API server refused to list or watch the object.
    #[error(
        "the API server{} refused to watch {} {object} (HTTP {code}: {message}); {}",
        in_cluster(cluster.as_ref()),
        K::KIND,
        K::grant(object)
    )]
    Refused {
        /// The object.
        object: K::Ref,
        /// The cluster it is read from, when the watch is shared per cluster.
        cluster: Option<ClusterId>,
        /// HTTP status code (401, 403 or 404).
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The watch task ended before the cache synced (the runtime is shutting down).
    #[error("the watch of {} {object} stopped before it synced", K::KIND)]
    Stopped {
        /// The object.
        object: K::Ref,
    },
    /// The shared watch's client or runtime could not be started from the cluster's
    /// configuration.
    #[error("cannot watch {} {object} in cluster {cluster}: {reason}", K::KIND)]
    Client {
        /// The object.
        object: K::Ref,
        /// The cluster whose configuration failed.
        cluster: ClusterId,
        /// Why (kube's error, or the runtime's).
        reason: String,
    },
}

fn in_cluster(cluster: Option<&ClusterId>) -> String {
    cluster
        .map(|c| format!(" of cluster {c}"))
        .unwrap_or_default()
}

struct Inner<K: WatchedKind> {
    object: K::Ref,
    /// The store's key of the one object, or `None` for a kind watched as a set.
    key: Option<ObjectRef<K>>,
    /// A set's members read as one, with the change of the cache it was made at.
    combined: arc_swap::ArcSwapOption<(u64, Option<Arc<K>>)>,
    /// The cache's changes, read to know when `combined` is out of date.
    change_count: tokio::sync::watch::Receiver<u64>,
    watched: Watched<K>,
    /// Set when a version held key material that was dropped before caching (a
    /// Secret watched for trust only).
    dropped_private_key: Arc<AtomicBool>,
    /// How many versions had a private key inside `ca.crt`, dropped before caching
    /// (a Secret watched for trust only).
    ca_crt_private_keys: Arc<AtomicU64>,
    /// The runtime the watch runs on, when it is a registry's: kept while any user
    /// of the cache (a resolver, a verifier) lives.
    _runtime: Option<BackgroundRuntime>,
}

/// A synced, watch-driven cache of one object of kind `K` (a Secret, a ConfigMap).
/// Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct WatchedObject<K: WatchedKind> {
    inner: Arc<Inner<K>>,
}

impl<K: WatchedKind> fmt::Debug for WatchedObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the object's data.
        f.debug_struct("WatchedObject")
            .field("kind", &K::KIND)
            .field("namespace", &K::namespace(&self.inner.object))
            .field("name", &K::name(&self.inner.object))
            .field("present", &self.get().is_some())
            .finish()
    }
}

/// How a cache is started: the cluster it names, whether it keeps trust only, the
/// runtime it keeps alive.
pub(crate) struct Start<'a> {
    pub(crate) cluster: Option<ClusterId>,
    pub(crate) trust_only: bool,
    pub(crate) runtime: Option<BackgroundRuntime>,
    pub(crate) limits: &'a WatchLimits,
}

impl<K: WatchedKind> WatchedObject<K> {
    /// Starts watching `object` and waits, at most `timeout`, for the cache to sync
    /// (the object may not exist: the cache then holds nothing).
    ///
    /// Cancel-safe: dropping the returned future stops the watch. Must be called
    /// within a Tokio runtime (the watch runs as a task on it, for as long as a clone
    /// of the cache lives).
    pub async fn watch(
        client: kube::Client,
        object: K::Ref,
        timeout: Duration,
    ) -> Result<Self, WatchError<K>> {
        Self::watch_within(client, object, timeout, &default_limits()).await
    }

    /// [`WatchedObject::watch`] within `limits` (default [`default_limits`]): the
    /// object's size, the LIST and WATCH bodies, and how often a new version is
    /// applied (see [`WatchLimits`]).
    pub async fn watch_within(
        client: kube::Client,
        object: K::Ref,
        timeout: Duration,
        limits: &WatchLimits,
    ) -> Result<Self, WatchError<K>> {
        let start = Start {
            cluster: None,
            trust_only: false,
            runtime: None,
            limits,
        };
        Self::start(client, object, timeout, start).await
    }

    /// [`WatchedObject::watch`] of an object read as a CA only: what the kind holds of
    /// key material (a Secret's `tls.key`) is dropped before the cache keeps a
    /// version (see [`WatchedObject::dropped_private_key`]).
    pub async fn watch_ca(
        client: kube::Client,
        object: K::Ref,
        timeout: Duration,
    ) -> Result<Self, WatchError<K>> {
        let start = Start {
            cluster: None,
            trust_only: true,
            runtime: None,
            limits: &default_limits(),
        };
        Self::start(client, object, timeout, start).await
    }

    /// Starts the watch as `start` says. With `trust_only`, key material is dropped
    /// before the cache keeps a version (a CA's private key is never held by a
    /// service that only trusts it), and the first version that held one is logged
    /// at WARN.
    pub(crate) async fn start(
        client: kube::Client,
        object: K::Ref,
        timeout: Duration,
        start: Start<'_>,
    ) -> Result<Self, WatchError<K>> {
        let Start {
            cluster,
            trust_only,
            runtime,
            limits,
        } = start;
        let named = match &cluster {
            Some(cluster) => format!("{object} of cluster {cluster}"),
            None => object.to_string(),
        };
        let health = Health::new(format!("{} {named}", K::KIND));
        let client = watch_ready::observe_bounded(&client, &health, limits);
        let (namespace, name) = (K::namespace(&object), K::name(&object));
        let api: Api<K> = <K::Scope as ApiScope>::api(client, namespace);
        let dropped_private_key = Arc::new(AtomicBool::new(false));
        let ca_crt_private_keys = Arc::new(AtomicU64::new(0));
        let keep = trust_only.then(|| {
            TrustOnly::new(
                named,
                dropped_private_key.clone(),
                ca_crt_private_keys.clone(),
            )
        });
        let modify = move |version: &mut K| {
            if let Some(keep) = &keep {
                keep.apply(version);
            }
        };
        let (watched, key) = match <K as sealed::Sealed>::selection(&object) {
            // By name on the server, and whatever else a server sends dropped here.
            Selection::Named => (
                Watched::spawn_one(api, namespace, name, (), health, limits.clone(), modify),
                Some(ObjectRef::new(name).within(namespace)),
            ),
            // By selectors on the server, and checked again by the kind's `combine`.
            Selection::Set { fields, labels } => {
                let mut config = kube_runtime::watcher::Config::default().fields(&fields);
                if let Some(labels) = &labels {
                    config = config.labels(labels);
                }
                let watched =
                    Watched::spawn_selected(api, config, (), health, limits.clone(), modify);
                (watched, None)
            }
        };
        match watched.synced_within(timeout).await {
            Ok(()) => {}
            Err(Some(WaitError::Refused(refusal))) => {
                return Err(WatchError::Refused {
                    object,
                    cluster,
                    code: refusal.code,
                    message: refusal.message,
                });
            }
            // `WaitError` is non-exhaustive; the other reason is a stopped task.
            Err(Some(_)) => return Err(WatchError::Stopped { object }),
            Err(None) => {
                return Err(WatchError::SyncTimeout {
                    last_error: watched.health().last_error(),
                    object,
                    cluster,
                    timeout,
                });
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                object,
                key,
                combined: arc_swap::ArcSwapOption::empty(),
                change_count: watched.changes(),
                watched,
                dropped_private_key,
                ca_crt_private_keys,
                _runtime: runtime,
            }),
        })
    }

    /// The object as last seen by the watch, or `None` if it does not exist (or was
    /// deleted). Synchronous, no I/O: a map look-up and an `Arc` clone. For a kind
    /// watched as a set (a signer's ClusterTrustBundles), the set read as one object,
    /// `None` when it is empty: made once per change of the cache, then an `Arc`
    /// clone.
    pub fn get(&self) -> Option<Arc<K>> {
        let inner = &*self.inner;
        if let Some(key) = &inner.key {
            return inner.watched.store().get(key);
        }
        // The count first: the set read after it is at least that new, so a later
        // change always makes it again.
        let count = *inner.change_count.borrow();
        if let Some(memo) = &*inner.combined.load()
            && memo.0 == count
        {
            return memo.1.clone();
        }
        let members = inner.watched.store().state();
        let combined = K::combine(&inner.object, members).map(Arc::new);
        inner
            .combined
            .store(Some(Arc::new((count, combined.clone()))));
        combined
    }

    /// The object this cache watches.
    pub fn object_ref(&self) -> &K::Ref {
        &self.inner.object
    }

    /// Whether a version of the object held a private key (a Secret's `tls.key`)
    /// that was dropped before caching: a trust-only watch of an object that should
    /// not hold one.
    pub fn dropped_private_key(&self) -> bool {
        self.inner.dropped_private_key.load(Ordering::Acquire)
    }

    /// How many versions of the object had a private key embedded in `ca.crt` (a PEM
    /// `PRIVATE KEY` block), dropped before caching while its certificates were kept
    /// (a Secret watched for trust only). Exported as
    /// `svc_tls_trust_secret_ca_crt_private_keys_dropped_total` (feature `metrics`).
    pub fn ca_crt_private_keys_dropped(&self) -> u64 {
        self.inner.ca_crt_private_keys.load(Ordering::Relaxed)
    }

    /// A receiver that changes each time the watch has changed the cache (for work
    /// done once per change, such as loading a new version). Closes when the watch
    /// stops.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watched.changes()
    }

    /// The HTTP status (401 or 403) with which the API server refuses this synced
    /// watch now (a revoked token, removed read rights), until it lists or watches
    /// again with success. One atomic load: no lock, for the handshake path.
    pub fn refused_now(&self) -> Option<u16> {
        self.inner.watched.health().refused_now()
    }

    /// The last error of the watch, if it is currently failing (it retries with
    /// backoff and the cache keeps the last state seen).
    pub fn last_watch_error(&self) -> Option<String> {
        self.inner.watched.health().last_error()
    }

    /// How many times the watch relisted after a 410 Gone (the API server compacted
    /// the resourceVersion it resumed from; routine, counted in the health's errors).
    pub fn relists(&self) -> u64 {
        self.inner.watched.health().status().relists
    }

    /// How many objects the watch's cache holds: at most one (the object watched),
    /// whatever the API server sends; for a set (a signer's ClusterTrustBundles), its
    /// members, at most the limits' `max_objects`.
    pub fn cached_objects(&self) -> usize {
        self.inner.watched.store().len()
    }

    /// The watch's counts and state: objects ignored (not the object watched),
    /// refused by a cap (with the last refusal, naming the object and the cap), and
    /// versions coalesced away; and the errors and relists.
    pub fn watch_status(&self) -> watch_ready::WatchStatus {
        self.inner.watched.health().status()
    }

    /// The watch's health: connected (synced and not failing), the last error while it
    /// fails, and the number of errors so far. A degraded watch becomes connected again
    /// on the next event or accepted WATCH request (which is how bookmarks show).
    pub fn watch_health(&self) -> SourceHealth {
        let status = self.inner.watched.health().status();
        SourceHealth {
            connected: status.state == WatchState::Ready,
            last_error: status.last_error,
            errors: status.errors,
        }
    }
}

/// What a trust-only watch does to each version before caching: the kind's
/// [`keep_trust_only`](super::kind::sealed::Sealed::keep_trust_only), counted, and
/// said at WARN once per cause.
struct TrustOnly {
    named: String,
    dropped: Arc<AtomicBool>,
    in_ca_crt: Arc<AtomicU64>,
    warned_ca_crt: AtomicBool,
    warned_elsewhere: AtomicBool,
}

impl TrustOnly {
    fn new(named: String, dropped: Arc<AtomicBool>, in_ca_crt: Arc<AtomicU64>) -> Self {
        Self {
            named,
            dropped,
            in_ca_crt,
            warned_ca_crt: AtomicBool::new(false),
            warned_elsewhere: AtomicBool::new(false),
        }
    }

    fn apply<K: WatchedKind>(&self, version: &mut K) {
        let found = version.keep_trust_only();
        if found.in_ca_crt {
            self.in_ca_crt.fetch_add(1, Ordering::Relaxed);
            if !self.warned_ca_crt.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    secret = %self.named,
                    key = CA_CRT,
                    "a CA Secret's ca.crt embeds a private key (a PEM PRIVATE KEY \
                     block): the key was dropped before caching and only the \
                     certificates of ca.crt are kept as roots; remove the key from \
                     ca.crt (docs/operations.md, trust without the CA key)"
                );
            }
        }
        if found.any() {
            self.dropped.store(true, Ordering::Release);
        }
        if found.elsewhere && !self.warned_elsewhere.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                secret = %self.named,
                "a Secret used only as a CA holds a private key (a tls.key or other key \
                 entry, or one inside its last-applied-configuration annotation): only \
                 ca.crt (or tls.crt of a TLS Secret without ca.crt) was cached; give \
                 this service a Secret or ConfigMap with ca.crt only \
                 (docs/operations.md, trust without the CA key)"
            );
        }
    }
}
