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
//! once when the API server refuses the watch (401/403), or when the caller drops the
//! future (the watch task is stopped with it). After that the watch task lives as long
//! as some clone of the source does; it retries with backoff on errors and the store
//! keeps the last state it saw meanwhile.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube_runtime::reflector::{self, ObjectRef, Store};
use kube_runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::options::SecretRef;

/// Default bound on waiting for the first sync of a Secret's cache.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a Secret's cache could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The first list did not complete in time.
    #[error(
        "timed out after {timeout:?} waiting for the watch of Secret {namespace}/{name} to sync{}",
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    SyncTimeout {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// The bound that passed.
        timeout: Duration,
        /// The last watch error seen, if any.
        last_error: Option<String>,
    },
    /// The API server refused to list or watch the Secret.
    #[error(
        "the API server refused to watch Secret {namespace}/{name} (HTTP {code}: {message}); \
         grant get, list and watch on this Secret to the service account"
    )]
    Refused {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// HTTP status code (401 or 403).
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The watch task ended before the cache synced (the runtime is shutting down).
    #[error("the watch of Secret {namespace}/{name} stopped before it synced")]
    Stopped {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
    },
}

/// Aborts the watch task when dropped.
#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the watch task tells the outside about errors.
#[derive(Debug, Clone, Default)]
struct WatchHealth {
    last_error: Option<String>,
    /// HTTP status and message of a refusal (401/403), if the last error was one.
    refused: Option<(u16, String)>,
}

struct Inner {
    secret: SecretRef,
    key: ObjectRef<Secret>,
    store: Store<Secret>,
    health: watch::Receiver<WatchHealth>,
    _task: AbortOnDrop,
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
        let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
        let (store, writer) = reflector::store::<Secret>();
        let (health_tx, mut health_rx) = watch::channel(WatchHealth::default());

        let label = format!("{}/{}", secret.namespace, secret.name);
        let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(_) => {
                        health_tx.send_if_modified(|h| {
                            let changed = h.last_error.is_some();
                            *h = WatchHealth::default();
                            changed
                        });
                    }
                    Err(error) => {
                        tracing::debug!(secret = %label, %error, "watch of Secret failed; retrying");
                        let refused = refusal(&error);
                        health_tx.send_replace(WatchHealth {
                            last_error: Some(error.to_string()),
                            refused,
                        });
                    }
                }
            }
        });
        let guard = AbortOnDrop(task);

        let refused = async {
            loop {
                if let Some(r) = health_rx.borrow_and_update().refused.clone() {
                    return Some(r);
                }
                if health_rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        let waited = tokio::time::timeout(timeout, async {
            tokio::select! {
                ready = store.wait_until_ready() => ready.map_err(|_| None),
                refusal = refused => Err(refusal),
            }
        })
        .await;
        let last_error = || health_rx.borrow().last_error.clone();
        match waited {
            Ok(Ok(())) => {}
            Ok(Err(Some((code, message)))) => {
                return Err(SourceError::Refused {
                    namespace: secret.namespace,
                    name: secret.name,
                    code,
                    message,
                });
            }
            Ok(Err(None)) => {
                return Err(SourceError::Stopped {
                    namespace: secret.namespace,
                    name: secret.name,
                });
            }
            Err(_elapsed) => {
                return Err(SourceError::SyncTimeout {
                    last_error: last_error(),
                    namespace: secret.namespace,
                    name: secret.name,
                    timeout,
                });
            }
        }
        let key = ObjectRef::new(&secret.name).within(&secret.namespace);
        Ok(Self {
            inner: Arc::new(Inner {
                secret,
                key,
                store,
                health: health_rx,
                _task: guard,
            }),
        })
    }

    /// The Secret as last seen by the watch, or `None` if it does not exist (or was
    /// deleted). Synchronous, no I/O: a map look-up and an `Arc` clone.
    pub fn get(&self) -> Option<Arc<Secret>> {
        self.inner.store.get(&self.inner.key)
    }

    /// The Secret this source watches.
    pub fn secret_ref(&self) -> &SecretRef {
        &self.inner.secret
    }

    /// The last error of the watch, if it is currently failing (it retries with
    /// backoff and the cache keeps the last state seen).
    pub fn last_watch_error(&self) -> Option<String> {
        self.inner.health.borrow().last_error.clone()
    }
}

/// A 401 or 403 from the API server: a configuration problem that retrying will not fix
/// during start-up.
fn refusal(error: &watcher::Error) -> Option<(u16, String)> {
    let status = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status,
        watcher::Error::WatchError(status) => status,
        _ => return None,
    };
    matches!(status.code, 401 | 403).then(|| (status.code, status.message.clone()))
}
