//! The ConfigMap's room in the trust adapter: the roots in a PEM bundle under one
//! data key of a watched ConfigMap (trust-manager's default Bundle target, built by
//! [`TrustVerifier::configmap_builder`]). A service trusting a CA this way needs no
//! access to Secrets at all.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;

use super::from_object::{TrustFromObject, WatchedTrustSource, sealed};
use super::source::TrustReloadError;
use super::verifier::TrustVerifier;
use crate::material::{
    ConfigMapTrustError, ConfigMapTrustProblem, TrustAnchors, anchors::ConfigMapTrustCache,
};
use crate::origin::{ConfigMapRef, TrustOrigin};
use crate::watch::{SharedObject, WatchedObject};

/// The roots in the PEM bundle under one key of a watched ConfigMap.
#[deprecated(since = "0.2.0", note = "use `trust::WatchedTrustSource<ConfigMap>`")]
pub type ConfigMapTrustSource = WatchedTrustSource<ConfigMap>;

impl TrustFromObject for ConfigMap {}

impl sealed::TrustKind for ConfigMap {
    /// The data key of the bundle.
    type Selector = String;
    type Cache = ConfigMapTrustCache;

    fn origin(configmap: &ConfigMapRef, key: &String) -> TrustOrigin {
        TrustOrigin::ConfigMap {
            configmap: Box::new(configmap.clone()),
            key: key.clone(),
        }
    }

    fn cache(key: &String) -> ConfigMapTrustCache {
        ConfigMapTrustCache::new(key.clone())
    }

    /// Each verifier over a ConfigMap parses its own data key.
    fn shared_cache(_: &SharedObject<ConfigMap>, key: &String) -> ConfigMapTrustCache {
        ConfigMapTrustCache::new(key.clone())
    }

    fn read_roots(
        cache: &ConfigMapTrustCache,
        configmap: &ConfigMap,
    ) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        cache
            .load(configmap)
            .map_err(|e| TrustReloadError::ConfigMap(Box::new(e)))
    }

    fn missing(configmap: &ConfigMapRef, key: &String) -> TrustReloadError {
        TrustReloadError::ConfigMap(Box::new(ConfigMapTrustError::new(
            configmap.clone(),
            key,
            ConfigMapTrustProblem::NotFound,
        )))
    }

    fn full_loads(cache: &ConfigMapTrustCache) -> u64 {
        cache.full_loads()
    }
}

impl WatchedTrustSource<ConfigMap> {
    /// The roots under `key` in `source`'s ConfigMap.
    pub fn new(source: WatchedObject<ConfigMap>, key: impl Into<String>) -> Self {
        Self::with_selector(source, key.into())
    }

    /// The watched ConfigMap's cache.
    pub fn configmap_source(&self) -> &WatchedObject<ConfigMap> {
        self.watched()
    }
}

impl TrustVerifier {
    /// The watched CA ConfigMap's cache, when the roots come from a ConfigMap.
    pub fn configmap_source(&self) -> Option<&WatchedObject<ConfigMap>> {
        self.watched_object::<ConfigMap>()
    }
}
