//! The one assembly path of a trust verifier over a watched object: what
//! [`TrustVerifier::builder`], [`TrustVerifier::configmap_builder`] and
//! [`TrustVerifier::source_builder`] return, and what the options-based constructors
//! (`client/from_options.rs`, `receiving`) build through too, so that settings,
//! provider, recorder and clock reach every verifier the same way.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::authorization::ServerAuthorization;
use super::error::TrustError;
use super::from_object::{TrustFromObject, WatchedTrustSource};
use super::settings::TrustSettings;
use super::source::TrustSource;
use super::verifier::TrustVerifier;
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::TrustAnchors;
use crate::origin::{ClusterTrustBundlesRef, ConfigMapRef, SecretRef, TrustOrigin};
use crate::watch::{
    BuiltFromWatch, ClusterTrustBundle, SharedObject, WatchError, WatchedBuilder, WatchedObject,
    builder::Reads, builder::sealed, shareable::SharedValue,
};

/// Kept in a registry entry's store: in use while a clone is held outside it.
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

/// What a [`TrustVerifierBuilder`] builds over. Which client reads a watched object
/// is the builder's (the one given to [`TrustVerifier::builder`], or a registry's:
/// [`WatchedBuilder::watches`]), not the object's.
#[derive(Clone)]
#[non_exhaustive]
pub enum TrustObject {
    /// The roots in the CA Secret `secret`.
    Secret {
        /// The Secret.
        secret: SecretRef,
    },
    /// The PEM bundle under `key` of the ConfigMap `configmap` (trust-manager's
    /// Bundle target).
    ConfigMap {
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// The data key.
        key: String,
    },
    /// The `spec.trustBundle`s of the ClusterTrustBundles of a signer (and label
    /// selector), read together.
    ClusterTrustBundles {
        /// The signer and label selector.
        bundles: ClusterTrustBundlesRef,
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
            Self::Secret { secret } => f.debug_tuple("Secret").field(secret).finish(),
            Self::ConfigMap { configmap, key } => f
                .debug_struct("ConfigMap")
                .field("configmap", configmap)
                .field("key", key)
                .finish(),
            Self::ClusterTrustBundles { bundles } => {
                f.debug_tuple("ClusterTrustBundles").field(bundles).finish()
            }
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
        match &builder.object {
            TrustObject::Source {
                source,
                authorization,
            } => builder.over_source(source, authorization),
            TrustObject::Secret { secret } => builder.over::<Secret>(secret, ()).await,
            TrustObject::ConfigMap { configmap, key } => {
                builder.over::<ConfigMap>(configmap, key.clone()).await
            }
            TrustObject::ClusterTrustBundles { bundles } => {
                builder.over::<ClusterTrustBundle>(bundles, ()).await
            }
        }
    }
}

impl TrustVerifierBuilder {
    /// The verifier over a source of the caller's, which reads no object: a registry
    /// set on the builder is refused.
    fn over_source(
        &self,
        source: &Arc<dyn TrustSource>,
        authorization: &ServerAuthorization,
    ) -> Result<TrustVerifier, TrustError> {
        if let Some(Reads::Registry(..)) = self.reads {
            return Err(TrustError::SharedSource {
                origin: source.origin().clone(),
            });
        }
        self.verifier(source.clone(), authorization.clone())
    }

    /// The verifier over `source`, with this builder's settings and collaborators.
    fn verifier(
        &self,
        source: Arc<dyn TrustSource>,
        authorization: ServerAuthorization,
    ) -> Result<TrustVerifier, TrustError> {
        TrustVerifier::with_settings(
            source,
            self.provider_or_default(),
            self.recorder.clone(),
            self.clock.clone(),
            &self.settings,
            authorization,
        )
    }

    /// The verifier over the roots `selector` picks in `object` of kind `K`: over a
    /// watch of its own, or over the registry's shared watch (followed by the entry's
    /// loader; kept in the entry when the options-based constructors build it).
    async fn over<K>(
        &self,
        object: &K::Ref,
        selector: K::Selector,
    ) -> Result<TrustVerifier, TrustError>
    where
        K: TrustFromObject,
        TrustError: From<WatchError<K>>,
    {
        let timeout = self.settings.sync_timeout;
        match &self.reads {
            Some(Reads::Registry(watches, cluster)) => {
                let shared: SharedObject<K> = watches.watch_trust(cluster, object, timeout).await?;
                let build = |source: WatchedTrustSource<K>| {
                    let verifier =
                        self.verifier(Arc::new(source), ServerAuthorization::HostName)?;
                    shared.follow(verifier.follower());
                    Ok(verifier)
                };
                if self.kept {
                    // Kept in the entry: its source must not hold the entry (the entry
                    // would then never be unused).
                    let key = self.kept_key(&format!("{selector:?}"));
                    shared.built(&key, || {
                        build(WatchedTrustSource::shared_with(&shared, selector))
                    })
                } else {
                    build(
                        WatchedTrustSource::shared_with(&shared, selector).holding(shared.clone()),
                    )
                }
            }
            Some(Reads::Own(client)) => {
                let watched =
                    WatchedObject::<K>::watch_ca(client.clone(), object.clone(), timeout).await?;
                self.verifier(
                    Arc::new(WatchedTrustSource::with_selector(watched, selector)),
                    ServerAuthorization::HostName,
                )
            }
            None => Err(TrustError::NoClient {
                origin: K::origin(object, &selector),
            }),
        }
    }
}

impl TrustVerifier {
    /// What [`TrustVerifier::source_builder`]`(source, authorization)`, configured by
    /// `configure`, builds, synchronously (a source waits for nothing): how the SPIFFE
    /// and mounted-file constructors assemble through the one builder.
    pub(crate) fn build_over_source(
        source: Arc<dyn TrustSource>,
        authorization: ServerAuthorization,
        configure: impl FnOnce(TrustVerifierBuilder) -> TrustVerifierBuilder,
    ) -> Result<Self, TrustError> {
        configure(Self::source_builder(source.clone(), authorization.clone()))
            .over_source(&source, &authorization)
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
        WatchedBuilder::new(TrustObject::Secret { secret }, Some(Reads::Own(client)))
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
    /// ([`TrustError::Unusable`] with
    /// [`TrustReloadError::ConfigMap`](super::TrustReloadError::ConfigMap)), when the
    /// watch is refused, or on timeout ([`TrustError::ConfigMapSource`]).
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
        WatchedBuilder::new(
            TrustObject::ConfigMap {
                configmap,
                key: key.into(),
            },
            Some(Reads::Own(client)),
        )
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
        WatchedBuilder::new(
            TrustObject::Source {
                source,
                authorization,
            },
            None,
        )
    }
}
