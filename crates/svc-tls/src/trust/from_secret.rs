//! The roots in a watched CA Secret, and the builder that starts its watch: the
//! Secret adapter of the trust seam.

use std::fmt;
use std::sync::Arc;

use super::error::TrustError;
use super::source::{ReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{TrustAnchors, TrustCache};
use crate::origin::{SecretRef, SourceHealth, TrustOrigin};
use crate::watch::{
    BuiltFromSecret, Lease, LimitedWithoutSource, SecretSource, SharedSecret, SharedValue,
    WatchedSecretBuilder, resource_version, sealed,
};

/// Shared through a registry entry's cache: in use while a clone is held outside it.
impl SharedValue for TrustVerifier {
    fn in_use(&self) -> bool {
        self.handles() > 1
    }
}

/// Builds a [`TrustVerifier`]; see [`TrustVerifier::builder`]. The settings are
/// shared with the identity resolver's builder ([`WatchedSecretBuilder`]).
pub type TrustVerifierBuilder = WatchedSecretBuilder<TrustVerifier>;

impl sealed::Sealed for TrustVerifier {}
impl BuiltFromSecret for TrustVerifier {
    type Recorder = dyn ReloadRecorder<TrustOrigin, TrustAnchors>;
    type Error = TrustError;

    fn no_recorder() -> Arc<Self::Recorder> {
        Arc::new(NoopRecorder)
    }

    const TRUST_ONLY: bool = true;

    async fn from_builder(builder: TrustVerifierBuilder) -> Result<Self, TrustError> {
        let shared = builder.shared().await?;
        let source = match &shared {
            Some((shared, _)) => SecretTrustSource::shared(shared).leasing(shared.lease()),
            None => SecretTrustSource::new(
                SecretSource::watch_ca(
                    builder.client.clone(),
                    builder.secret.clone(),
                    builder.timeout,
                )
                .await?,
            ),
        };
        let verifier = TrustVerifier::with_settings(
            Arc::new(source),
            builder.provider_or_default(),
            builder.recorder.clone(),
            builder.settings(),
            super::ServerAuthorization::HostName,
        )?;
        // As for the identity: followed by the loader of a registry's shared Secret,
        // read on handshakes only when watched alone.
        if let Some((shared, _)) = shared {
            shared.follow(verifier.follower());
        }
        Ok(verifier)
    }
}

impl LimitedWithoutSource for TrustVerifier {}

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
        WatchedSecretBuilder::new(client, secret)
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

    fn current(&self) -> Result<Arc<TrustAnchors>, ReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), ReloadError> {
        if let Some(code) = self.source.refused_now() {
            return Err(ReloadError::Refused {
                object: format!("Secret {}", self.source.secret_ref()),
                code,
            });
        }
        let Some(object) = self.source.get() else {
            return Err(ReloadError::NotFound {
                secret: self.source.secret_ref().clone(),
            });
        };
        let version = resource_version(&object);
        let anchors = self.cache.load(&object).map_err(ReloadError::Material)?;
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
