//! The identity in a watched `kubernetes.io/tls` Secret, and the builder that
//! starts its watch: the Secret adapter of the identity seam.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use rustls::crypto::CryptoProvider;

use super::resolver::{IdentityError, IdentityResolver};
use super::settings::IdentitySettings;
use super::source::{IdentityReloadError, IdentitySource};
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{HandshakeLoad, Identity, IdentityCache};
use crate::origin::{IdentityOrigin, SecretRef, SourceHealth};
use crate::watch::{
    BuiltFromWatch, SharedObject, WatchedBuilder, WatchedObject, builder::Reads, builder::sealed,
    kind::resource_version, shareable::SharedValue,
};

/// Shared through a registry entry's cache: in use while a clone is held outside it.
impl SharedValue for IdentityResolver {
    fn in_use(&self) -> bool {
        self.handles() > 1
    }
}

/// Builds an [`IdentityResolver`] over a Secret, with [`IdentitySettings`]; see
/// [`IdentityResolver::builder`] (the shape both halves' builders share:
/// [`WatchedBuilder`]).
pub type IdentityResolverBuilder = WatchedBuilder<IdentityResolver>;

impl sealed::Sealed for IdentityResolver {}
impl BuiltFromWatch for IdentityResolver {
    type Object = IdentityObject;
    type Settings = IdentitySettings;
    type Recorder = dyn ReloadRecorder<IdentityOrigin, Identity>;
    type Error = IdentityError;

    fn no_recorder() -> Arc<Self::Recorder> {
        Arc::new(NoopRecorder)
    }

    async fn from_builder(builder: IdentityResolverBuilder) -> Result<Self, IdentityError> {
        let secret = match &builder.object {
            IdentityObject::Source(source) => return builder.over_source(source),
            IdentityObject::Secret { secret } => secret,
        };
        let timeout = builder.settings.sync_timeout;
        match &builder.reads {
            Some(Reads::Registry(watches, cluster)) => {
                let shared = watches.watch(cluster, secret, timeout).await?;
                // Over a registry's shared Secret, the loader reloads the resolver
                // after each version it loads.
                let build = |source: SecretIdentitySource| {
                    let resolver = builder.resolver(Arc::new(source))?;
                    shared.follow(resolver.follower());
                    Ok(resolver)
                };
                // With a provider of its own, keys are loaded into a cache of its own.
                let source = || match &builder.provider {
                    None => SecretIdentitySource::shared(&shared),
                    Some(provider) => {
                        SecretIdentitySource::new(shared.source().clone(), provider.clone())
                    }
                };
                if builder.kept {
                    // Kept in the entry: its source must not hold the entry.
                    shared.built(&builder.kept_key(""), || build(source()))
                } else {
                    build(source().holding(shared.clone()))
                }
            }
            // A Secret watched alone has no loader: the resolver reads it on
            // handshakes only.
            Some(Reads::Own(client)) => {
                let source = SecretIdentitySource::new(
                    WatchedObject::watch(client.clone(), secret.clone(), timeout).await?,
                    builder.provider_or_default(),
                );
                builder.resolver(Arc::new(source))
            }
            None => Err(IdentityError::NoClient {
                origin: IdentityOrigin::Secret(secret.clone()),
            }),
        }
    }
}

impl IdentityResolverBuilder {
    /// The resolver over a source of the caller's, which reads no object: a registry
    /// set on the builder is refused.
    fn over_source(
        &self,
        source: &Arc<dyn IdentitySource>,
    ) -> Result<IdentityResolver, IdentityError> {
        if let Some(Reads::Registry(..)) = self.reads {
            return Err(IdentityError::SharedSource {
                origin: source.origin().clone(),
            });
        }
        self.resolver(source.clone())
    }

    /// The resolver over `source`, with this builder's settings and collaborators.
    fn resolver(&self, source: Arc<dyn IdentitySource>) -> Result<IdentityResolver, IdentityError> {
        IdentityResolver::with_settings(
            source,
            self.recorder.clone(),
            self.settings.core(self.clock.clone()),
        )
    }
}

impl IdentityResolver {
    /// What [`IdentityResolver::source_builder`]`(source)`, configured by `configure`,
    /// builds, synchronously (a source waits for nothing): how the SPIFFE and
    /// mounted-file constructors assemble through the one builder.
    pub(crate) fn build_over_source(
        source: Arc<dyn IdentitySource>,
        configure: impl FnOnce(IdentityResolverBuilder) -> IdentityResolverBuilder,
    ) -> Result<Self, IdentityError> {
        configure(Self::source_builder(source.clone())).over_source(&source)
    }
}

/// What an [`IdentityResolverBuilder`] builds over: a Secret it watches, or a source
/// of the caller's. Which client reads the Secret is the builder's (the one given to
/// [`IdentityResolver::builder`], or a registry's: [`WatchedBuilder::watches`]).
#[derive(Clone)]
pub enum IdentityObject {
    /// The `kubernetes.io/tls` Secret `secret`.
    Secret {
        /// The Secret.
        secret: SecretRef,
    },
    /// A source that already reads its object.
    Source(Arc<dyn IdentitySource>),
}

impl fmt::Debug for IdentityObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret { secret, .. } => f.debug_tuple("Secret").field(secret).finish(),
            Self::Source(source) => f.debug_tuple("Source").field(source.origin()).finish(),
        }
    }
}

impl IdentityResolver {
    /// A builder for a resolver of the identity in `secret`, watched through `client`.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::{IdentityResolver, SecretRef};
    ///
    /// let secret = SecretRef::new("unikorn", "unikorn-region-client-certificate");
    /// use svc_tls::identity::IdentitySettings;
    ///
    /// let resolver = IdentityResolver::builder(client, secret)
    ///     .settings(IdentitySettings::default().sync_timeout(std::time::Duration::from_secs(10)))
    ///     .build()
    ///     .await?;
    /// println!("presenting serial {}", resolver.state().serial_hex);
    /// # Ok(()) }
    /// ```
    pub fn builder(client: kube::Client, secret: SecretRef) -> IdentityResolverBuilder {
        WatchedBuilder::new(IdentityObject::Secret { secret }, Some(Reads::Own(client)))
    }

    /// A builder for a resolver over any [`IdentitySource`] (an already synced
    /// [`SecretIdentitySource`], a [`SpiffeIdentitySource`](super::SpiffeIdentitySource),
    /// one of the caller's): it must hold an identity when built (one outside its
    /// validity period is served and reported, see
    /// [`IdentityResolverBuilder::build`]). The builder's provider is not used: the
    /// source already loads its keys; a registry set on it
    /// ([`watches`](WatchedBuilder::watches)) fails the build
    /// ([`IdentityError::SharedSource`]).
    pub fn source_builder(source: Arc<dyn IdentitySource>) -> IdentityResolverBuilder {
        WatchedBuilder::new(IdentityObject::Source(source), None)
    }

    /// The watched Secret's cache, when the identity comes from a Secret.
    pub fn secret_source(&self) -> Option<&WatchedObject<Secret>> {
        self.identity_source().watched_secret()
    }

    /// The crypto provider keys are loaded with, when the identity comes from a
    /// Secret.
    pub fn provider(&self) -> Option<&Arc<CryptoProvider>> {
        self.identity_source().provider()
    }
}

/// The identity in a watched `kubernetes.io/tls` Secret: the Secret from the
/// watch cache ([`WatchedObject`], a map read and an `Arc` clone), loaded through
/// an [`IdentityCache`] so that unchanged bytes cost a comparison (why: see
/// [`IdentityCache`]).
pub struct SecretIdentitySource {
    origin: IdentityOrigin,
    source: WatchedObject<Secret>,
    cache: Arc<IdentityCache>,
    /// The registry entry this reads, when built by a builder over one: the entry is
    /// not evicted while the resolver lives.
    _entry: Option<SharedObject<Secret>>,
}

impl SecretIdentitySource {
    /// The identity in `source`'s Secret, keys loaded with `provider`.
    pub fn new(source: WatchedObject<Secret>, provider: Arc<CryptoProvider>) -> Self {
        Self {
            origin: IdentityOrigin::Secret(source.secret_ref().clone()),
            source,
            cache: Arc::new(IdentityCache::new(provider)),
            _entry: None,
        }
    }

    /// The identity in a Secret shared through a registry: its cache is the one every
    /// user of the Secret reads, loaded when the watch delivers a new version.
    pub fn shared(shared: &SharedObject<Secret>) -> Self {
        Self {
            origin: IdentityOrigin::Secret(shared.secret_ref().clone()),
            source: shared.source().clone(),
            cache: shared.identity_cache(),
            _entry: None,
        }
    }

    /// The same source holding `entry` (a use of it: not evicted while this lives).
    pub(crate) fn holding(mut self, entry: SharedObject<Secret>) -> Self {
        self._entry = Some(entry);
        self
    }

    /// The watched Secret's cache.
    pub fn secret_source(&self) -> &WatchedObject<Secret> {
        &self.source
    }

    /// The crypto provider keys are loaded with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        self.cache.provider()
    }
}

impl fmt::Debug for SecretIdentitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretIdentitySource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl IdentitySource for SecretIdentitySource {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Identity, IdentityReloadError> {
        self.current_versioned().map(|(identity, _)| identity)
    }

    fn current_versioned(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        let object = self.object()?;
        let version = resource_version(&*object);
        let identity = self
            .cache
            .load(&object)
            .map_err(IdentityReloadError::Material)?;
        Ok((identity, version))
    }

    fn current_on_handshake(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        let object = self.object()?;
        let version = resource_version(&*object);
        match self
            .cache
            .load_on_handshake(&object)
            .map_err(IdentityReloadError::Material)?
        {
            HandshakeLoad::Loaded(identity) => Ok((identity, version)),
            HandshakeLoad::InProgress => Err(IdentityReloadError::InProgress),
        }
    }

    fn current_ignoring_validity(&self) -> Result<Identity, IdentityReloadError> {
        let object = self.object()?;
        self.cache
            .load_ignoring_validity(&object)
            .map_err(IdentityReloadError::Material)
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.source.watch_health())
    }

    fn watched_secret(&self) -> Option<&WatchedObject<Secret>> {
        Some(&self.source)
    }

    fn provider(&self) -> Option<&Arc<CryptoProvider>> {
        Some(self.cache.provider())
    }
}

impl SecretIdentitySource {
    fn object(&self) -> Result<Arc<Secret>, IdentityReloadError> {
        self.source
            .get()
            .ok_or_else(|| IdentityReloadError::NotFound {
                secret: self.source.secret_ref().clone(),
            })
    }
}
