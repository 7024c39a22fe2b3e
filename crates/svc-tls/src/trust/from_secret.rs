//! The roots in a watched CA Secret, and the builder that starts its watch: the
//! Secret adapter of the trust seam.

use std::fmt;
use std::sync::Arc;

use super::authorization::ServerAuthorization;
use super::error::TrustError;
use super::from_configmap::ConfigMapTrustSource;
use super::settings::TrustSettings;
use super::source::{TrustReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{TrustAnchors, TrustCache};
use crate::origin::{ConfigMapRef, SecretRef, SourceHealth, TrustOrigin};
use crate::watch::{
    BuiltFromWatch, ConfigMapSource, Lease, SecretSource, SharedSecret, SharedValue,
    WatchedBuilder, resource_version, sealed,
};

/// Shared through a registry entry's cache: in use while a clone is held outside it.
impl SharedValue for TrustVerifier {
    fn in_use(&self) -> bool {
        self.handles() > 1
    }
}

/// Builds a [`TrustVerifier`] over a CA Secret, a CA ConfigMap or a source of the
/// caller's ([`TrustObject`]), with [`TrustSettings`]; see [`TrustVerifier::builder`],
/// [`TrustVerifier::configmap_builder`] and [`TrustVerifier::source_builder`] (the
/// shape both halves' builders share: [`WatchedBuilder`]).
pub type TrustVerifierBuilder = WatchedBuilder<TrustVerifier>;

/// What a [`TrustVerifierBuilder`] builds over.
#[derive(Clone)]
#[non_exhaustive]
pub enum TrustObject {
    /// The roots in the CA Secret `secret`, watched through `client` (or the
    /// builder's registry).
    Secret {
        /// The client its own watch reads through.
        client: kube::Client,
        /// The Secret.
        secret: SecretRef,
    },
    /// The PEM bundle under `key` of the ConfigMap `configmap` (trust-manager's
    /// Bundle target), watched through `client` (or the builder's registry).
    ConfigMap {
        /// The client its own watch reads through.
        client: kube::Client,
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// The data key.
        key: String,
    },
    /// A source that already reads its roots, with how servers are authorized.
    Source {
        /// The source.
        source: Arc<dyn TrustSource>,
        /// Host name, or one SPIFFE ID.
        authorization: ServerAuthorization,
    },
}

impl fmt::Debug for TrustObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret { secret, .. } => f.debug_tuple("Secret").field(secret).finish(),
            Self::ConfigMap { configmap, key, .. } => f
                .debug_struct("ConfigMap")
                .field("configmap", configmap)
                .field("key", key)
                .finish(),
            Self::Source {
                source,
                authorization,
            } => f
                .debug_struct("Source")
                .field("origin", source.origin())
                .field("authorization", authorization)
                .finish(),
        }
    }
}

impl sealed::Sealed for TrustVerifier {}
impl BuiltFromWatch for TrustVerifier {
    type Object = TrustObject;
    type Settings = TrustSettings;
    type Recorder = dyn ReloadRecorder<TrustOrigin, TrustAnchors>;
    type Error = TrustError;

    fn no_recorder() -> Arc<Self::Recorder> {
        Arc::new(NoopRecorder)
    }

    async fn from_builder(builder: TrustVerifierBuilder) -> Result<Self, TrustError> {
        let timeout = builder.settings.sync_timeout;
        let build = |source: Arc<dyn TrustSource>, authorization| {
            TrustVerifier::with_settings(
                source,
                builder.provider_or_default(),
                builder.recorder.clone(),
                builder.clock.clone(),
                &builder.settings,
                authorization,
            )
        };
        match &builder.object {
            TrustObject::Source {
                source,
                authorization,
            } => build(source.clone(), authorization.clone()),
            TrustObject::Secret { client, secret } => match &builder.watches {
                // As for the identity: followed by the loader of a registry's shared
                // Secret, read on handshakes only when watched alone.
                Some((watches, cluster)) => {
                    let shared = watches.watch_trust(cluster, secret, timeout).await?;
                    let source = SecretTrustSource::shared(&shared).leasing(shared.lease());
                    let verifier = build(Arc::new(source), ServerAuthorization::HostName)?;
                    shared.follow(verifier.follower());
                    Ok(verifier)
                }
                None => {
                    let watched =
                        SecretSource::watch_ca(client.clone(), secret.clone(), timeout).await?;
                    build(
                        Arc::new(SecretTrustSource::new(watched)),
                        ServerAuthorization::HostName,
                    )
                }
            },
            TrustObject::ConfigMap {
                client,
                configmap,
                key,
            } => match &builder.watches {
                Some((watches, cluster)) => {
                    let shared = watches.watch_configmap(cluster, configmap, timeout).await?;
                    let source = ConfigMapTrustSource::new(shared.source().clone(), key.clone())
                        .leasing(shared.lease());
                    let verifier = build(Arc::new(source), ServerAuthorization::HostName)?;
                    shared.follow(verifier.follower());
                    Ok(verifier)
                }
                None => {
                    let watched =
                        ConfigMapSource::watch(client.clone(), configmap.clone(), timeout).await?;
                    build(
                        Arc::new(ConfigMapTrustSource::new(watched, key.clone())),
                        ServerAuthorization::HostName,
                    )
                }
            },
        }
    }
}

impl TrustVerifier {
    /// A builder for a verifier trusting the roots in the CA Secret `secret`,
    /// watched through `client`.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::{SecretRef, TrustVerifier};
    ///
    /// let ca = SecretRef::new("unikorn", "unikorn-identity-ca");
    /// let trust = TrustVerifier::builder(client, ca).build().await?;
    /// println!("trusting {} root(s)", trust.state().roots);
    /// # Ok(()) }
    /// ```
    pub fn builder(client: kube::Client, secret: SecretRef) -> TrustVerifierBuilder {
        WatchedBuilder::new(TrustObject::Secret { client, secret })
    }

    /// A builder for a verifier trusting the PEM bundle under `key` of the ConfigMap
    /// `configmap` (trust-manager's default Bundle target; `ca.crt` or
    /// `trust-bundle.pem`), watched through `client`. Every handshake verifies
    /// against the ConfigMap's current bundle, read from the watch cache (no I/O; a
    /// byte comparison when unchanged). No Secret is read: the service account needs
    /// `get`, `list` and `watch` on ConfigMaps in that namespace only.
    ///
    /// Fails to build with an error naming the ConfigMap and the key when the
    /// ConfigMap is missing, lacks the key, or holds no usable certificate there
    /// ([`TrustError::Unusable`] with [`TrustReloadError::ConfigMap`]), when the watch is
    /// refused, or on timeout ([`TrustError::ConfigMapSource`]).
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::TrustVerifier;
    /// use svc_tls::origin::ConfigMapRef;
    ///
    /// let bundle = ConfigMapRef::new("unikorn", "platform-ca-bundle");
    /// let trust = TrustVerifier::configmap_builder(client, bundle, "ca.crt").build().await?;
    /// println!("trusting {} root(s)", trust.state().roots);
    /// # Ok(()) }
    /// ```
    pub fn configmap_builder(
        client: kube::Client,
        configmap: ConfigMapRef,
        key: impl Into<String>,
    ) -> TrustVerifierBuilder {
        WatchedBuilder::new(TrustObject::ConfigMap {
            client,
            configmap,
            key: key.into(),
        })
    }

    /// A builder for a verifier over any [`TrustSource`] (a
    /// [`SpiffeTrustSource`](super::SpiffeTrustSource), one of the caller's),
    /// authorizing servers as `authorization` says: it must hold a usable root set
    /// when built. The builder's registry is not used: the source already reads its
    /// roots.
    pub fn source_builder(
        source: Arc<dyn TrustSource>,
        authorization: ServerAuthorization,
    ) -> TrustVerifierBuilder {
        WatchedBuilder::new(TrustObject::Source {
            source,
            authorization,
        })
    }

    /// The watched CA Secret's cache, when the roots come from a Secret.
    pub fn secret_source(&self) -> Option<&SecretSource> {
        self.trust_source().watched_secret()
    }
}

/// The roots in a watched CA Secret: the Secret from the watch cache
/// ([`SecretSource`], a map read and an `Arc` clone), loaded through a
/// [`TrustCache`] so that unchanged bytes cost a comparison.
pub struct SecretTrustSource {
    origin: TrustOrigin,
    source: SecretSource,
    cache: Arc<TrustCache>,
    /// A use of the registry entry this reads, when built by a builder over one (the
    /// entry is not evicted while the verifier lives).
    _lease: Option<Lease>,
}

impl SecretTrustSource {
    /// The roots in `source`'s Secret.
    pub fn new(source: SecretSource) -> Self {
        Self {
            origin: TrustOrigin::Secret(source.secret_ref().clone()),
            source,
            cache: Arc::new(TrustCache::new()),
            _lease: None,
        }
    }

    /// The roots in a CA Secret shared through a registry: its cache is the one every
    /// user of the Secret reads, loaded when the watch delivers a new version.
    pub fn shared(shared: &SharedSecret) -> Self {
        Self {
            origin: TrustOrigin::Secret(shared.secret_ref().clone()),
            source: shared.source().clone(),
            cache: shared.trust_cache(),
            _lease: None,
        }
    }

    /// The same source holding `lease` on its registry entry.
    pub(crate) fn leasing(mut self, lease: Lease) -> Self {
        self._lease = Some(lease);
        self
    }

    /// The watched Secret's cache.
    pub fn secret_source(&self) -> &SecretSource {
        &self.source
    }
}

impl fmt::Debug for SecretTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretTrustSource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl TrustSource for SecretTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), TrustReloadError> {
        if let Some(code) = self.source.refused_now() {
            return Err(TrustReloadError::Refused {
                object: format!("Secret {}", self.source.secret_ref()),
                code,
            });
        }
        let Some(object) = self.source.get() else {
            return Err(TrustReloadError::NotFound {
                secret: self.source.secret_ref().clone(),
            });
        };
        let version = resource_version(&object);
        let anchors = self
            .cache
            .load(&object)
            .map_err(TrustReloadError::Material)?;
        Ok((anchors, version))
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.source.watch_health())
    }

    fn refused_now(&self) -> Option<u16> {
        self.source.refused_now()
    }

    fn watch_error(&self) -> Option<String> {
        self.source.last_watch_error()
    }

    fn watched_secret(&self) -> Option<&SecretSource> {
        Some(&self.source)
    }
}
