//! The watch-driven, in-memory cache of exactly one ConfigMap: a CA bundle as
//! trust-manager writes it (its default Bundle target), read without any access to
//! Secrets.
//!
//! As [`SecretSource`](super::SecretSource) for a Secret: one reflector over a
//! namespaced watch with the field selector `metadata.name=<name>`, so RBAC can be
//! limited to `get`, `list` and `watch` on ConfigMaps in that namespace (optionally
//! on that one name):
//!
//! ```yaml
//! rules:
//! - apiGroups: [""]
//!   resources: ["configmaps"]
//!   resourceNames: ["platform-ca-bundle"]
//!   verbs: ["get", "list", "watch"]
//! ```
//!
//! Reading it ([`ConfigMapSource::get`]) is a map look-up and an `Arc` clone: no
//! I/O, nothing that can block a TLS handshake. Construction returns once the first
//! list has been applied, or fails: after a timeout, at once when the API server
//! refuses the watch (401, 403, 404), or when the caller drops the future.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cluster_id::ClusterId;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_runtime::reflector::ObjectRef;
use watch_ready::{Health, WaitError, WatchLimits, WatchState, Watched};

use super::runtime::BackgroundRuntime;
use crate::origin::{ConfigMapRef, SourceHealth};

/// Why a ConfigMap's cache could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigMapSourceError {
    /// The first list did not complete in time.
    #[error(
        "timed out after {timeout:?} waiting for the watch of ConfigMap {configmap} to sync{}",
        last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    SyncTimeout {
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// The bound that passed.
        timeout: Duration,
        /// The last watch error seen, if any.
        last_error: Option<String>,
    },
    /// The API server refused to list or watch the ConfigMap.
    #[error(
        "the API server{} refused to watch ConfigMap {configmap} (HTTP {code}: {message}); \
         grant get, list and watch on configmaps in namespace {} to the service account",
        super::secret::in_cluster(cluster.as_ref()),
        configmap.namespace
    )]
    Refused {
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// The cluster it is read from, when the watch is shared per cluster.
        cluster: Option<ClusterId>,
        /// HTTP status code (401, 403 or 404).
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The watch task ended before the cache synced (the runtime is shutting down).
    #[error("the watch of ConfigMap {configmap} stopped before it synced")]
    Stopped {
        /// The ConfigMap.
        configmap: ConfigMapRef,
    },
    /// The background watch's client or runtime could not be started.
    #[error("cannot watch ConfigMap {configmap} in cluster {cluster}: {reason}")]
    Client {
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// The cluster it is read from.
        cluster: ClusterId,
        /// Why (kube's error, or the runtime's).
        reason: String,
    },
}

struct Inner {
    configmap: ConfigMapRef,
    key: ObjectRef<ConfigMap>,
    watched: Watched<ConfigMap>,
    /// The background runtime the watch runs on, when it is a shared one.
    _runtime: Option<BackgroundRuntime>,
}

/// A synced, watch-driven cache of one ConfigMap. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct ConfigMapSource {
    inner: Arc<Inner>,
}

impl fmt::Debug for ConfigMapSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigMapSource")
            .field("namespace", &self.inner.configmap.namespace)
            .field("name", &self.inner.configmap.name)
            .field("present", &self.get().is_some())
            .finish()
    }
}

impl ConfigMapSource {
    /// Starts watching `configmap` and waits, at most `timeout`, for the cache to
    /// sync (the ConfigMap may not exist: the cache then holds nothing).
    ///
    /// Cancel-safe: dropping the returned future stops the watch. Must be called
    /// within a Tokio runtime (the watch runs as a task on it, for as long as a clone
    /// of the source lives).
    pub async fn watch(
        client: kube::Client,
        configmap: ConfigMapRef,
        timeout: Duration,
    ) -> Result<Self, ConfigMapSourceError> {
        Self::watch_of(client, None, configmap, timeout, &super::default_limits()).await
    }

    /// [`ConfigMapSource::watch`], naming `cluster` in its errors.
    async fn watch_of(
        client: kube::Client,
        cluster: Option<ClusterId>,
        configmap: ConfigMapRef,
        timeout: Duration,
        limits: &WatchLimits,
    ) -> Result<Self, ConfigMapSourceError> {
        let health = Health::new(format!("ConfigMap {configmap}"));
        let client = watch_ready::observe_bounded(&client, &health, limits);
        let api: Api<ConfigMap> = Api::namespaced(client, &configmap.namespace);
        // Quick retries, as for a Secret: one small object, by name on the server,
        // whatever else a server sends dropped here.
        let watched = Watched::spawn_one(
            api,
            &configmap.namespace,
            &configmap.name,
            (),
            health,
            limits.clone(),
            |_: &mut ConfigMap| {},
        );
        match watched.synced_within(timeout).await {
            Ok(()) => {}
            Err(Some(WaitError::Refused(refusal))) => {
                return Err(ConfigMapSourceError::Refused {
                    configmap,
                    cluster,
                    code: refusal.code,
                    message: refusal.message,
                });
            }
            Err(Some(_)) => return Err(ConfigMapSourceError::Stopped { configmap }),
            Err(None) => {
                return Err(ConfigMapSourceError::SyncTimeout {
                    last_error: watched.health().last_error(),
                    configmap,
                    timeout,
                });
            }
        }
        let key = ObjectRef::new(&configmap.name).within(&configmap.namespace);
        Ok(Self {
            inner: Arc::new(Inner {
                configmap,
                key,
                watched,
                _runtime: None,
            }),
        })
    }

    /// [`ConfigMapSource::watch`] of a ConfigMap of `cluster` (named in errors), for
    /// a registry's shared entry: started on (and keeping alive) the registry's
    /// `runtime`, where this runs.
    pub(crate) async fn watch_shared(
        client: kube::Client,
        cluster: ClusterId,
        configmap: ConfigMapRef,
        timeout: Duration,
        runtime: BackgroundRuntime,
        limits: &WatchLimits,
    ) -> Result<Self, ConfigMapSourceError> {
        let source =
            Self::watch_of(client, Some(cluster), configmap.clone(), timeout, limits).await?;
        let inner =
            Arc::into_inner(source.inner).ok_or(ConfigMapSourceError::Stopped { configmap })?;
        Ok(Self {
            inner: Arc::new(Inner {
                _runtime: Some(runtime),
                ..inner
            }),
        })
    }

    /// The ConfigMap as last seen by the watch, or `None` if it does not exist (or
    /// was deleted). Synchronous, no I/O: a map look-up and an `Arc` clone.
    pub fn get(&self) -> Option<Arc<ConfigMap>> {
        self.inner.watched.store().get(&self.inner.key)
    }

    /// The ConfigMap this source watches.
    pub fn configmap_ref(&self) -> &ConfigMapRef {
        &self.inner.configmap
    }

    /// A receiver that changes each time the watch has changed the cache. Closes
    /// when the watch stops.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watched.changes()
    }

    /// The HTTP status (401 or 403) with which the API server refuses this synced
    /// watch now, until it lists or watches again with success (one atomic load).
    pub fn refused_now(&self) -> Option<u16> {
        self.inner.watched.health().refused_now()
    }

    /// The last error of the watch, if it is currently failing.
    pub fn last_watch_error(&self) -> Option<String> {
        self.inner.watched.health().last_error()
    }

    /// The watch's counts and state (as
    /// [`SecretSource::watch_status`](super::SecretSource::watch_status)).
    pub fn watch_status(&self) -> watch_ready::WatchStatus {
        self.inner.watched.health().status()
    }

    /// The watch's health (as [`SecretSource::watch_health`](super::SecretSource::watch_health)).
    pub fn watch_health(&self) -> SourceHealth {
        let status = self.inner.watched.health().status();
        SourceHealth {
            connected: status.state == WatchState::Ready,
            last_error: status.last_error,
            errors: status.errors,
        }
    }
}

/// A ConfigMap's `resourceVersion` as a number, to order two snapshots of it.
pub(crate) fn configmap_resource_version(configmap: &ConfigMap) -> Option<u64> {
    configmap
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
}
