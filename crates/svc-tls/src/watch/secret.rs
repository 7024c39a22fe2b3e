//! The watch-driven, in-memory cache of exactly one Secret.
//!
//! [`SecretSource`] runs a `kube-runtime` reflector over a namespaced watch with the
//! field selector `metadata.name=<name>`, so the API server sends this one Secret and
//! nothing else, and RBAC can be limited to `get`, `list` and `watch` on it:
//!
//! ```yaml
//! rules:
//! - apiGroups: [""]
//!   resources: ["secrets"]
//!   resourceNames: ["my-release-client-certificate"]
//!   verbs: ["get", "list", "watch"]
//! ```
//!
//! Reading it ([`SecretSource::get`]) is a synchronous map look-up and an `Arc` clone:
//! no I/O, nothing that can block a TLS handshake. This is the only kind of source the
//! resolver accepts, so an API round trip per handshake cannot be configured.
//!
//! Construction ([`SecretSource::watch`]) returns once the first list has been applied
//! (the store is *synced*), or fails: after a timeout (naming the last watch error), at
//! once when the API server refuses the watch (401, 403 or 404), or when the caller
//! drops the future (the watch task is stopped with it). After that the watch task
//! lives as long as some clone of the source does; it retries with backoff on errors
//! and the store keeps the last state it saw meanwhile.
//!
//! The watch, the readiness wait, the error classification and the timeout default are
//! the workspace's one watch layer, the internal `watch-ready` crate, shared with
//! `kube-construct`'s caches.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cluster_id::ClusterId;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube_runtime::reflector::ObjectRef;
use watch_ready::{Health, WaitError, WatchLimits, WatchState, Watched};

use crate::origin::{SecretRef, SourceHealth};

/// Default bound on waiting for the first sync of a Secret's cache: the workspace's one
/// sync-timeout default (see `docs/decisions.md`, "One watch layer").
pub use watch_ready::DEFAULT_SYNC_TIMEOUT;

/// How long the watch of one Secret or ConfigMap waits after applying a version
/// before it applies the next one (the versions between are coalesced into the
/// newest): a Secret rewritten in a loop costs at most one parse and one pool
/// retirement per interval, and its last version is applied within it.
pub const DEFAULT_COALESCE_INTERVAL: Duration = Duration::from_secs(1);

/// The largest LIST response body a watch of one Secret or ConfigMap reads: 8 MiB
/// (the one object is at most [`watch_ready::DEFAULT_MAX_OBJECT_BYTES`], 1 MiB).
pub const DEFAULT_SINGLE_LIST_BYTES: usize = 8 * 1024 * 1024;

/// The limits of the watch of one Secret or ConfigMap unless configured otherwise:
/// objects up to [`watch_ready::DEFAULT_MAX_OBJECT_BYTES`] (1 MiB, Kubernetes' own
/// limit), at most 16 objects kept (one is: the others are not the one watched),
/// LIST bodies up to [`DEFAULT_SINGLE_LIST_BYTES`], WATCH events up to
/// [`watch_ready::DEFAULT_MAX_EVENT_BYTES`], versions coalesced per
/// [`DEFAULT_COALESCE_INTERVAL`].
pub fn default_limits() -> WatchLimits {
    WatchLimits::default()
        .max_objects(16)
        .max_list_bytes(DEFAULT_SINGLE_LIST_BYTES)
        .coalesce(Some(DEFAULT_COALESCE_INTERVAL))
}

/// Why a Secret's cache could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The first list did not complete in time.
    #[error(
        "timed out after {timeout:?} waiting for the watch of Secret {secret}{} to sync{}",
        in_cluster(cluster.as_ref()),
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    SyncTimeout {
        /// The Secret.
        secret: SecretRef,
        /// The cluster it is read from, when the watch is shared per cluster.
        cluster: Option<ClusterId>,
        /// The bound that passed.
        timeout: Duration,
        /// The last watch error seen, if any.
        last_error: Option<String>,
    },
    /// The API server refused to list or watch the Secret.
    #[error(
        "the API server{} refused to watch Secret {secret} (HTTP {code}: {message}); \
         grant get, list and watch on this Secret to the service account",
        in_cluster(cluster.as_ref())
    )]
    Refused {
        /// The Secret.
        secret: SecretRef,
        /// The cluster it is read from, when the watch is shared per cluster.
        cluster: Option<ClusterId>,
        /// HTTP status code (401, 403 or 404).
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The watch task ended before the cache synced (the runtime is shutting down).
    #[error("the watch of Secret {secret} stopped before it synced")]
    Stopped {
        /// The Secret.
        secret: SecretRef,
    },
    /// The shared watch's client could not be built from the cluster's configuration.
    #[error("cannot watch Secret {secret} in cluster {cluster}: {reason}")]
    Client {
        /// The Secret.
        secret: SecretRef,
        /// The cluster whose configuration failed.
        cluster: ClusterId,
        /// Why (kube's error, or the runtime's).
        reason: String,
    },
}

pub(super) fn in_cluster(cluster: Option<&ClusterId>) -> String {
    cluster
        .map(|c| format!(" of cluster {c}"))
        .unwrap_or_default()
}

struct Inner {
    secret: SecretRef,
    key: ObjectRef<Secret>,
    watched: Watched<Secret>,
    /// Set when a version of the Secret held a `tls.key` that was dropped before
    /// caching (a Secret watched for trust only).
    dropped_private_key: Arc<AtomicBool>,
    /// The runtime the watch runs on, when it is a registry's: kept while any user
    /// of the source (a resolver, a verifier) lives.
    _runtime: Option<super::runtime::BackgroundRuntime>,
}

/// A synced, watch-driven cache of one Secret. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct SecretSource {
    inner: Arc<Inner>,
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the Secret's data.
        f.debug_struct("SecretSource")
            .field("namespace", &self.inner.secret.namespace)
            .field("name", &self.inner.secret.name)
            .field("present", &self.get().is_some())
            .finish()
    }
}

impl SecretSource {
    /// Starts watching `secret` and waits, at most `timeout`, for the cache to sync.
    ///
    /// Cancel-safe: dropping the returned future stops the watch. Must be called within
    /// a Tokio runtime (the watch runs as a task on it).
    pub async fn watch(
        client: kube::Client,
        secret: SecretRef,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        Self::start(
            client,
            None,
            secret,
            timeout,
            false,
            None,
            &default_limits(),
        )
        .await
    }

    /// [`SecretSource::watch`] within `limits` (default [`default_limits`]): the
    /// Secret's size, the LIST and WATCH bodies, and how often a new version is
    /// applied (see [`WatchLimits`]).
    pub async fn watch_within(
        client: kube::Client,
        secret: SecretRef,
        timeout: Duration,
        limits: &WatchLimits,
    ) -> Result<Self, SourceError> {
        Self::start(client, None, secret, timeout, false, None, limits).await
    }

    /// [`SecretSource::watch`] of a Secret read as a CA only: its `tls.key` is dropped
    /// before the cache keeps a version (see [`SecretSource::dropped_private_key`]).
    pub async fn watch_ca(
        client: kube::Client,
        secret: SecretRef,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        Self::start(client, None, secret, timeout, true, None, &default_limits()).await
    }

    /// [`SecretSource::watch`] of a Secret of `cluster` (named in errors and health).
    /// With `trust_only`, the Secret's `tls.key` is dropped before the cache keeps a
    /// version (a CA's private key is never held by a service that only trusts it),
    /// and the first version that held one is logged at WARN.
    pub(crate) async fn watch_in(
        client: kube::Client,
        cluster: ClusterId,
        secret: SecretRef,
        timeout: Duration,
        trust_only: bool,
        runtime: super::runtime::BackgroundRuntime,
        limits: &WatchLimits,
    ) -> Result<Self, SourceError> {
        Self::start(
            client,
            Some(cluster),
            secret,
            timeout,
            trust_only,
            Some(runtime),
            limits,
        )
        .await
    }

    async fn start(
        client: kube::Client,
        cluster: Option<ClusterId>,
        secret: SecretRef,
        timeout: Duration,
        trust_only: bool,
        runtime: Option<super::runtime::BackgroundRuntime>,
        limits: &WatchLimits,
    ) -> Result<Self, SourceError> {
        let health = Health::new(match &cluster {
            Some(cluster) => format!("Secret {secret} of cluster {cluster}"),
            None => format!("Secret {secret}"),
        });
        let client = watch_ready::observe_bounded(&client, &health, limits);
        let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
        let dropped_private_key = Arc::new(AtomicBool::new(false));
        let dropped = dropped_private_key.clone();
        let named = match &cluster {
            Some(cluster) => format!("{secret} of cluster {cluster}"),
            None => secret.to_string(),
        };
        // By name on the server, and whatever else a server sends dropped here.
        let watched = Watched::spawn_one(
            api,
            &secret.namespace,
            &secret.name,
            (),
            health,
            limits.clone(),
            move |object: &mut Secret| {
                if trust_only && keep_trust_only(object) && !dropped.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        secret = %named,
                        "a Secret used only as a CA holds a private key (a tls.key or other key \
                         entry, or one inside its last-applied-configuration annotation): only \
                         ca.crt (and tls.crt of a TLS Secret) was cached; give this service a \
                         Secret or ConfigMap with ca.crt only (docs/operations.md, trust without \
                         the CA key)"
                    );
                }
            },
        );
        match watched.synced_within(timeout).await {
            Ok(()) => {}
            Err(Some(WaitError::Refused(refusal))) => {
                return Err(SourceError::Refused {
                    secret,
                    cluster,
                    code: refusal.code,
                    message: refusal.message,
                });
            }
            // `WaitError` is non-exhaustive; the other reason is a stopped task.
            Err(Some(_)) => return Err(SourceError::Stopped { secret }),
            Err(None) => {
                return Err(SourceError::SyncTimeout {
                    last_error: watched.health().last_error(),
                    secret,
                    cluster,
                    timeout,
                });
            }
        }
        let key = ObjectRef::new(&secret.name).within(&secret.namespace);
        Ok(Self {
            inner: Arc::new(Inner {
                secret,
                key,
                watched,
                dropped_private_key,
                _runtime: runtime,
            }),
        })
    }

    /// The Secret as last seen by the watch, or `None` if it does not exist (or was
    /// deleted). Synchronous, no I/O: a map look-up and an `Arc` clone.
    pub fn get(&self) -> Option<Arc<Secret>> {
        self.inner.watched.store().get(&self.inner.key)
    }

    /// Whether a version of the Secret held a private key (`tls.key`) that was dropped
    /// before caching: a trust-only watch of a Secret that should not hold one.
    pub fn dropped_private_key(&self) -> bool {
        self.inner.dropped_private_key.load(Ordering::Acquire)
    }

    /// The Secret this source watches.
    pub fn secret_ref(&self) -> &SecretRef {
        &self.inner.secret
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

    /// How many objects the watch's cache holds: at most one (the Secret watched),
    /// whatever the API server sends.
    pub fn cached_objects(&self) -> usize {
        self.inner.watched.store().len()
    }

    /// The watch's counts and state: objects ignored (not the Secret watched),
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

/// Removes `tls.key` from `secret`'s data (and any `stringData`); true when there
/// was one.
/// Keeps of `secret` only what trust is read from, so that a service that only
/// trusts a CA never holds its private key in memory: `ca.crt` always, `tls.crt` for
/// a `kubernetes.io/tls` Secret; every other data key, all of `stringData`, the
/// annotations (`kubectl.kubernetes.io/last-applied-configuration` holds the whole
/// Secret, `tls.key` included, whenever it was `kubectl apply`-ed) and
/// `managedFields` are dropped. Labels, name, namespace and `resourceVersion` stay.
/// Returns whether anything dropped looked like key material (a key name ending in
/// `.key`, or a value holding `PRIVATE KEY`), for the WARN and the metric.
fn keep_trust_only(secret: &mut Secret) -> bool {
    use crate::material::{CA_CRT, SECRET_TYPE_TLS, TLS_CRT};
    let is_tls = secret.type_.as_deref() == Some(SECRET_TYPE_TLS);
    let kept = |key: &str| key == CA_CRT || (is_tls && key == TLS_CRT);
    let looks_like_key =
        |name: &str, value: &[u8]| name.ends_with(".key") || contains(value, b"PRIVATE KEY");
    let mut dropped_key = false;
    if let Some(data) = secret.data.as_mut() {
        data.retain(|name, value| {
            let keep = kept(name);
            dropped_key |= !keep && looks_like_key(name, &value.0);
            keep
        });
    }
    if let Some(data) = secret.string_data.take() {
        dropped_key |= data
            .iter()
            .any(|(name, value)| looks_like_key(name, value.as_bytes()));
    }
    if let Some(annotations) = secret.metadata.annotations.take() {
        dropped_key |= annotations.iter().any(|(name, value)| {
            looks_like_key(name, value.as_bytes()) || value.contains("tls.key")
        });
    }
    secret.metadata.managed_fields = None;
    dropped_key
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// A Secret's `resourceVersion` as a number, to order two snapshots of it. It is an
/// etcd revision in practice; when it is not a number the snapshots are simply not
/// ordered.
pub(crate) fn resource_version(secret: &Secret) -> Option<u64> {
    secret
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
}
