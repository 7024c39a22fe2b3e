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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cluster_id::ClusterId;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube_runtime::reflector::ObjectRef;
use watch_ready::{Health, WaitError, WatchLimits, WatchState, Watched};

use crate::material::CA_CRT;
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
    /// How many versions of the Secret had a private key inside `ca.crt`, dropped
    /// before caching (a Secret watched for trust only).
    ca_crt_private_keys: Arc<AtomicU64>,
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
        let ca_crt_private_keys = Arc::new(AtomicU64::new(0));
        let counted = ca_crt_private_keys.clone();
        let (warned_ca_crt, warned_elsewhere) = (AtomicBool::new(false), AtomicBool::new(false));
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
                if !trust_only {
                    return;
                }
                let found = keep_trust_only(object);
                if found.in_ca_crt {
                    counted.fetch_add(1, Ordering::Relaxed);
                    if !warned_ca_crt.swap(true, Ordering::AcqRel) {
                        tracing::warn!(
                            secret = %named,
                            key = CA_CRT,
                            "a CA Secret's ca.crt embeds a private key (a PEM PRIVATE KEY \
                             block): the key was dropped before caching and only the \
                             certificates of ca.crt are kept as roots; remove the key from \
                             ca.crt (docs/operations.md, trust without the CA key)"
                        );
                    }
                }
                if found.any() {
                    dropped.store(true, Ordering::Release);
                }
                if found.elsewhere && !warned_elsewhere.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        secret = %named,
                        "a Secret used only as a CA holds a private key (a tls.key or other key \
                         entry, or one inside its last-applied-configuration annotation): only \
                         ca.crt (or tls.crt of a TLS Secret without ca.crt) was cached; give \
                         this service a Secret or ConfigMap with ca.crt only \
                         (docs/operations.md, trust without the CA key)"
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
                ca_crt_private_keys,
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

    /// How many versions of the Secret had a private key embedded in `ca.crt` (a PEM
    /// `PRIVATE KEY` block), dropped before caching while its certificates were kept
    /// (a Secret watched for trust only). Exported as
    /// `svc_tls_trust_secret_ca_crt_private_keys_dropped_total` (feature `metrics`).
    pub fn ca_crt_private_keys_dropped(&self) -> u64 {
        self.inner.ca_crt_private_keys.load(Ordering::Relaxed)
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

/// What [`keep_trust_only`] dropped that looked like key material.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DroppedKeys {
    /// A key under another data key, in `stringData` or in an annotation.
    pub(crate) elsewhere: bool,
    /// A PEM private-key block inside `ca.crt` itself (its certificates are kept).
    pub(crate) in_ca_crt: bool,
}

impl DroppedKeys {
    pub(crate) fn any(self) -> bool {
        self.elsewhere || self.in_ca_crt
    }
}

/// Keeps of `secret` only what trust is read from, so that a service that only
/// trusts a CA never holds its private key in memory: `ca.crt` when it is present
/// and not empty, else `tls.crt` of a `kubernetes.io/tls` Secret (Go's CA Secrets
/// hold `tls.crt` only; when `ca.crt` is there, `tls.crt` is not a root: for a
/// leaf's or an intermediate's Secret it is no trust anchor of the caller's choice).
/// Every other data key, all of `stringData`, the annotations
/// (`kubectl.kubernetes.io/last-applied-configuration` holds the whole Secret,
/// `tls.key` included, whenever it was `kubectl apply`-ed) and `managedFields` are
/// dropped. A `ca.crt` that embeds a private key (a PEM `PRIVATE KEY` block) keeps
/// its `CERTIFICATE` blocks only: the received value is overwritten with zeros and
/// dropped here, before the cache stores the object. Labels, name, namespace and
/// `resourceVersion` stay. Returns what dropped looked like key material (a key
/// name ending in `.key`, or a value holding `PRIVATE KEY`), for the WARN, the
/// counter and the metric.
pub(crate) fn keep_trust_only(secret: &mut Secret) -> DroppedKeys {
    use crate::material::{SECRET_TYPE_TLS, TLS_CRT};
    let is_tls = secret.type_.as_deref() == Some(SECRET_TYPE_TLS);
    let has_ca_crt = secret
        .data
        .as_ref()
        .and_then(|data| data.get(CA_CRT))
        .is_some_and(|value| !value.0.is_empty());
    let kept = |key: &str| key == CA_CRT || (is_tls && !has_ca_crt && key == TLS_CRT);
    let looks_like_key =
        |name: &str, value: &[u8]| name.ends_with(".key") || contains(value, b"PRIVATE KEY");
    let mut dropped = DroppedKeys::default();
    if let Some(data) = secret.data.as_mut() {
        data.retain(|name, value| {
            let keep = kept(name);
            dropped.elsewhere |= !keep && looks_like_key(name, &value.0);
            keep
        });
        if let Some(ca) = data.get_mut(CA_CRT)
            && contains(&ca.0, b"PRIVATE KEY")
        {
            let certificates = certificate_blocks(&ca.0);
            let mut received = std::mem::replace(&mut ca.0, certificates);
            received.fill(0);
            dropped.in_ca_crt = true;
        }
    }
    if let Some(data) = secret.string_data.take() {
        dropped.elsewhere |= data
            .iter()
            .any(|(name, value)| looks_like_key(name, value.as_bytes()));
    }
    if let Some(annotations) = secret.metadata.annotations.take() {
        dropped.elsewhere |= annotations.iter().any(|(name, value)| {
            looks_like_key(name, value.as_bytes()) || value.contains("tls.key")
        });
    }
    secret.metadata.managed_fields = None;
    dropped
}

/// The `-----BEGIN CERTIFICATE-----` ... `-----END CERTIFICATE-----` blocks of a PEM
/// text, each on its own lines; everything else (a private key, text between
/// blocks, an unterminated block) is left out. Textual: nothing is decoded.
fn certificate_blocks(pem: &[u8]) -> Vec<u8> {
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let mut out = Vec::with_capacity(pem.len());
    let mut rest = pem;
    while let Some(start) = find(rest, BEGIN) {
        let block = &rest[start..];
        let Some(end) = find(block, END) else {
            break;
        };
        let Some(block) = block.get(..end + END.len()) else {
            break;
        };
        out.extend_from_slice(block);
        out.push(b'\n');
        rest = &rest[start + block.len()..];
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(type_: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            type_: Some(type_.to_owned()),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    fn keys(secret: &Secret) -> Vec<&str> {
        secret
            .data
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nU0VDUkVU\n-----END PRIVATE KEY-----\n";

    #[test]
    fn tls_crt_is_kept_only_without_a_ca_crt() {
        let mut go = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("tls.key", KEY)]);
        assert_eq!(
            keep_trust_only(&mut go),
            DroppedKeys {
                elsewhere: true,
                in_ca_crt: false
            }
        );
        assert_eq!(keys(&go), ["tls.crt"], "Go's CA Secrets: tls.crt only");

        let mut both = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("ca.crt", CERT)]);
        assert!(!keep_trust_only(&mut both).any());
        assert_eq!(keys(&both), ["ca.crt"], "with ca.crt, tls.crt is no root");

        // An empty ca.crt is no ca.crt.
        let mut empty = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("ca.crt", "")]);
        keep_trust_only(&mut empty);
        assert_eq!(keys(&empty), ["ca.crt", "tls.crt"]);
    }

    #[test]
    fn a_private_key_inside_ca_crt_is_dropped_and_its_certificates_kept() {
        for type_ in ["kubernetes.io/tls", "Opaque"] {
            let bundle = format!("{CERT}{KEY}{CERT}");
            let mut with_key = secret(type_, &[("ca.crt", &bundle)]);
            let dropped = keep_trust_only(&mut with_key);
            assert!(dropped.in_ca_crt, "{type_}");
            assert!(!dropped.elsewhere, "{type_}");
            let kept = &with_key.data.as_ref().unwrap()["ca.crt"].0;
            let kept = std::str::from_utf8(kept).unwrap();
            assert_eq!(kept, format!("{CERT}{CERT}"), "{type_}");
            assert!(!kept.contains("PRIVATE KEY") && !kept.contains("U0VDUkVU"));
        }
        // An RSA or EC key block is a private key too.
        let rsa = KEY.replace("PRIVATE KEY", "RSA PRIVATE KEY");
        let mut with_rsa = secret("Opaque", &[("ca.crt", &format!("{rsa}{CERT}"))]);
        assert!(keep_trust_only(&mut with_rsa).in_ca_crt);
        assert_eq!(with_rsa.data.as_ref().unwrap()["ca.crt"].0, CERT.as_bytes());
    }
}
