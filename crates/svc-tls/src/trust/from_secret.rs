//! The Secret's room in the trust adapter: the roots in a watched CA Secret
//! (`ca.crt`, or `tls.crt` of a TLS Secret without one), read through the root-set
//! cache every user of a registry's shared Secret reads.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;

use super::from_object::{self, TrustFromObject, WatchedTrustSource};
use super::source::TrustReloadError;
use super::verifier::TrustVerifier;
use crate::material::{TrustAnchors, TrustCache};
use crate::origin::{SecretRef, TrustOrigin};
use crate::watch::{SharedObject, WatchedObject};

/// The roots in a watched CA Secret.
#[deprecated(since = "0.2.0", note = "use `trust::WatchedTrustSource<Secret>`")]
pub type SecretTrustSource = WatchedTrustSource<Secret>;

impl TrustFromObject for Secret {}

impl from_object::sealed::TrustKind for Secret {
    /// Nothing: `ca.crt`, or `tls.crt` of a TLS Secret without one.
    type Selector = ();
    type Cache = Arc<TrustCache>;

    fn origin(secret: &SecretRef, _: &()) -> TrustOrigin {
        TrustOrigin::Secret(secret.clone())
    }

    fn cache(_: &()) -> Arc<TrustCache> {
        Arc::new(TrustCache::new())
    }

    /// The root-set cache every user of the Secret reads, loaded by its loader.
    fn shared_cache(shared: &SharedObject<Secret>, _: &()) -> Arc<TrustCache> {
        shared.trust_cache()
    }

    fn read_roots(
        cache: &Arc<TrustCache>,
        secret: &Secret,
    ) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        cache.load(secret).map_err(TrustReloadError::Material)
    }

    fn missing(secret: &SecretRef, _: &()) -> TrustReloadError {
        TrustReloadError::NotFound {
            secret: secret.clone(),
        }
    }

    fn full_loads(cache: &Arc<TrustCache>) -> u64 {
        cache.full_loads()
    }
}

impl WatchedTrustSource<Secret> {
    /// The roots in `source`'s Secret.
    pub fn new(source: WatchedObject<Secret>) -> Self {
        Self::with_selector(source, ())
    }

    /// The roots in a CA Secret shared through a registry: its cache is the one every
    /// user of the Secret reads, loaded when the watch delivers a new version.
    pub fn shared(shared: &SharedObject<Secret>) -> Self {
        Self::shared_with(shared, ())
    }

    /// The watched Secret's cache.
    pub fn secret_source(&self) -> &WatchedObject<Secret> {
        self.watched()
    }
}

impl TrustVerifier {
    /// The watched CA Secret's cache, when the roots come from a Secret.
    pub fn secret_source(&self) -> Option<&WatchedObject<Secret>> {
        self.watched_object::<Secret>()
    }
}
