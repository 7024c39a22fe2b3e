//! The roots in a PEM bundle under one key of a watched ConfigMap (trust-manager's
//! default Bundle target): the ConfigMap adapter of the trust seam (built by
//! [`TrustVerifier::configmap_builder`]). A service trusting a CA this way needs no
//! access to Secrets at all.

use std::fmt;
use std::sync::Arc;

use super::source::{TrustReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::material::{
    ConfigMapTrustCache, ConfigMapTrustError, ConfigMapTrustProblem, TrustAnchors,
};
use crate::origin::{SourceHealth, TrustOrigin};
use crate::watch::{ConfigMapSource, Lease, configmap_resource_version};

/// The roots in the PEM bundle under one key of a watched ConfigMap: the ConfigMap
/// from the watch cache ([`ConfigMapSource`], a map read and an `Arc` clone), loaded
/// through a `ConfigMapTrustCache` so that unchanged bytes cost a comparison.
pub struct ConfigMapTrustSource {
    origin: TrustOrigin,
    source: ConfigMapSource,
    cache: ConfigMapTrustCache,
    /// A use of the registry entry this reads, when built by a builder over one (the
    /// entry is not evicted while the verifier lives).
    _lease: Option<Lease>,
}

impl ConfigMapTrustSource {
    /// The roots under `key` in `source`'s ConfigMap.
    pub fn new(source: ConfigMapSource, key: impl Into<String>) -> Self {
        let key = key.into();
        Self {
            origin: TrustOrigin::ConfigMap {
                configmap: Box::new(source.configmap_ref().clone()),
                key: key.clone(),
            },
            source,
            cache: ConfigMapTrustCache::new(key),
            _lease: None,
        }
    }

    /// The same source holding `lease` on its registry entry.
    pub(crate) fn leasing(mut self, lease: Lease) -> Self {
        self._lease = Some(lease);
        self
    }

    /// The watched ConfigMap's cache.
    pub fn configmap_source(&self) -> &ConfigMapSource {
        &self.source
    }

    /// How many times the bundle was parsed (unchanged bytes are not parsed again).
    pub fn full_loads(&self) -> u64 {
        self.cache.full_loads()
    }
}

impl fmt::Debug for ConfigMapTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigMapTrustSource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl TrustSource for ConfigMapTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), TrustReloadError> {
        if let Some(code) = self.source.refused_now() {
            return Err(TrustReloadError::Refused {
                object: format!("ConfigMap {}", self.source.configmap_ref()),
                code,
            });
        }
        let Some(object) = self.source.get() else {
            return Err(TrustReloadError::ConfigMap(Box::new(
                ConfigMapTrustError::new(
                    self.source.configmap_ref().clone(),
                    self.cache.key(),
                    ConfigMapTrustProblem::NotFound,
                ),
            )));
        };
        let version = configmap_resource_version(&object);
        let anchors = self
            .cache
            .load(&object)
            .map_err(|e| TrustReloadError::ConfigMap(Box::new(e)))?;
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

    fn watched_configmap(&self) -> Option<&ConfigMapSource> {
        Some(&self.source)
    }
}

impl TrustVerifier {
    /// The watched CA ConfigMap's cache, when the roots come from a ConfigMap.
    pub fn configmap_source(&self) -> Option<&ConfigMapSource> {
        self.trust_source().watched_configmap()
    }
}
