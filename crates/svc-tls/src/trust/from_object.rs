//! The roots in a watched object, written once for every kind: a CA Secret, a CA
//! ConfigMap (trust-manager's Bundle target), and the next kind through the same
//! adapter ([`WatchedTrustSource<K>`]). What differs per kind is
//! [`TrustFromObject`]: where in the object the roots are, how they are parsed and
//! cached, and what its origin and "not found" say.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::source::{TrustReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::material::TrustAnchors;
use crate::origin::{SourceHealth, TrustOrigin};
use crate::watch::{SharedObject, WatchedKind, WatchedObject, kind::resource_version};

/// Seals [`TrustFromObject`] and carries its per-kind parts.
pub(crate) mod sealed {
    use super::*;

    /// How one kind's roots are picked, read and cached.
    pub trait TrustKind: WatchedKind {
        /// What picks the roots inside one object: nothing for a Secret, the data
        /// key for a ConfigMap.
        type Selector: Clone + fmt::Debug + Send + Sync + 'static;

        /// The cache the roots are parsed through (unchanged bytes cost a
        /// comparison).
        type Cache: fmt::Debug + Send + Sync + 'static;

        /// Where roots read from `object` with `selector` come from.
        fn origin(object: &Self::Ref, selector: &Self::Selector) -> TrustOrigin;

        /// A cache of its own for the roots `selector` picks.
        fn cache(selector: &Self::Selector) -> Self::Cache;

        /// The cache every user of a registry's shared object reads (loaded when the
        /// watch delivers a version), or one of its own.
        fn shared_cache(shared: &SharedObject<Self>, selector: &Self::Selector) -> Self::Cache;

        /// The roots in `object`.
        fn read_roots(
            cache: &Self::Cache,
            object: &Self,
        ) -> Result<Arc<TrustAnchors>, TrustReloadError>;

        /// Why there are none when the object is missing.
        fn missing(object: &Self::Ref, selector: &Self::Selector) -> TrustReloadError;

        /// How many times the roots were parsed.
        fn full_loads(cache: &Self::Cache) -> u64;
    }
}

/// A kind whose objects hold roots a verifier can trust: a Secret (`ca.crt`, or
/// `tls.crt` of a TLS Secret), a ConfigMap (a PEM bundle under a data key). Sealed:
/// the next kind (a ClusterTrustBundle) implements its parts in a file of its own.
pub trait TrustFromObject: sealed::TrustKind {}

/// The roots in a watched object of kind `K`: the object from the watch cache
/// ([`WatchedObject`], a map read and an `Arc` clone), parsed through a cache so that
/// unchanged bytes cost a comparison.
pub struct WatchedTrustSource<K: TrustFromObject> {
    origin: TrustOrigin,
    source: WatchedObject<K>,
    selector: K::Selector,
    cache: K::Cache,
    /// The registry entry this reads, when built by a builder over one: the entry is
    /// not evicted while the verifier lives.
    _entry: Option<SharedObject<K>>,
}

impl<K: TrustFromObject> WatchedTrustSource<K> {
    /// The roots `selector` picks in `source`'s object, parsed into a cache of
    /// their own.
    pub fn with_selector(source: WatchedObject<K>, selector: K::Selector) -> Self {
        Self {
            origin: K::origin(source.object_ref(), &selector),
            cache: K::cache(&selector),
            source,
            selector,
            _entry: None,
        }
    }

    /// The roots `selector` picks in an object shared through a registry: for a
    /// Secret, its cache is the one every user of the Secret reads, loaded when the
    /// watch delivers a new version.
    pub fn shared_with(shared: &SharedObject<K>, selector: K::Selector) -> Self {
        Self {
            origin: K::origin(shared.object_ref(), &selector),
            cache: K::shared_cache(shared, &selector),
            source: shared.source().clone(),
            selector,
            _entry: None,
        }
    }

    /// The same source holding `entry` (a use of it: not evicted while this lives).
    pub(crate) fn holding(mut self, entry: SharedObject<K>) -> Self {
        self._entry = Some(entry);
        self
    }

    /// The watched object's cache.
    pub fn watched(&self) -> &WatchedObject<K> {
        &self.source
    }

    /// How many times the roots were parsed (unchanged bytes are not parsed again).
    pub fn full_loads(&self) -> u64 {
        K::full_loads(&self.cache)
    }
}

impl<K: TrustFromObject> fmt::Debug for WatchedTrustSource<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedTrustSource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl<K: TrustFromObject> TrustSource for WatchedTrustSource<K> {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), TrustReloadError> {
        if let Some(code) = self.source.refused_now() {
            return Err(TrustReloadError::Refused {
                object: format!("{} {}", K::KIND, self.source.object_ref()),
                code,
            });
        }
        let Some(object) = self.source.get() else {
            return Err(K::missing(self.source.object_ref(), &self.selector));
        };
        let version = resource_version(&*object);
        let anchors = K::read_roots(&self.cache, &object)?;
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

    fn watched_object(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&self.source)
    }
}

impl TrustVerifier {
    /// The watched object's cache, when the roots come from an object of kind `K`
    /// (`verifier.watched_object::<Secret>()`).
    pub fn watched_object<K: WatchedKind>(&self) -> Option<&WatchedObject<K>> {
        self.trust_source()
            .watched_object()
            .and_then(|watched| watched.downcast_ref::<WatchedObject<K>>())
    }
}
