//! The ClusterTrustBundle's room in the trust adapter: the roots in the
//! `spec.trustBundle`s of a signer's ClusterTrustBundles (and a label selector),
//! watched as one set through the registry like a CA ConfigMap, built by
//! [`TrustVerifier::cluster_trust_bundles_builder`] (or the peer options'
//! `--S-ca-cluster-trust-bundle-signer`). An empty set is no roots: the last good
//! ones are kept for the bound of a deleted CA Secret, then every server refused.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::builder::{TrustObject, TrustVerifierBuilder};
use super::from_object::{TrustFromObject, WatchedTrustSource, sealed};
use super::source::TrustReloadError;
use super::verifier::TrustVerifier;
use crate::material::{ConfigMapTrustProblem, TrustAnchors, anchors::anchors_from_pem};
use crate::origin::{ClusterTrustBundlesRef, TrustOrigin};
use crate::watch::{
    ClusterTrustBundle, SharedObject, WatchedBuilder, WatchedObject, builder::Reads,
};

/// Why a signer's ClusterTrustBundles give no usable roots: which set, and what is
/// wrong. Never carries the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClusterTrustBundles of {bundles}: {problem}")]
pub struct ClusterTrustBundleError {
    /// The set (signer and label selector).
    pub bundles: ClusterTrustBundlesRef,
    /// What is wrong.
    pub problem: ClusterTrustBundleProblem,
}

/// What is wrong with a signer's ClusterTrustBundles (see [`ClusterTrustBundleError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterTrustBundleProblem {
    /// No ClusterTrustBundle of the signer (matching the selector) exists: no roots.
    #[error(
        "none exists with that spec.signerName (and labels the selector matches): \
         nothing is trusted"
    )]
    NoneFound,
    /// The concatenated `spec.trustBundle`s hold no usable root (the problem is the
    /// PEM reader's, as for a CA ConfigMap's bundle).
    #[error("their spec.trustBundle: {0}")]
    Bundle(ConfigMapTrustProblem),
}

/// The last bundle parsed, by its bytes: an unchanged set costs a byte comparison
/// and an `Arc` clone. A failed parse is remembered too. Lock-free.
#[allow(unreachable_pub)] // named by the trust adapter's sealed trait only
pub struct BundleTrustCache {
    last: arc_swap::ArcSwapOption<(Box<[u8]>, Arc<TrustAnchors>)>,
    failed: arc_swap::ArcSwapOption<(Box<[u8]>, ConfigMapTrustProblem)>,
    full_loads: AtomicU64,
}

impl fmt::Debug for BundleTrustCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BundleTrustCache")
            .field("roots", &self.last.load().as_ref().map(|c| c.1.len()))
            .finish()
    }
}

impl BundleTrustCache {
    fn new() -> Self {
        Self {
            last: arc_swap::ArcSwapOption::empty(),
            failed: arc_swap::ArcSwapOption::empty(),
            full_loads: AtomicU64::new(0),
        }
    }

    fn load(&self, pem: &[u8]) -> Result<Arc<TrustAnchors>, ConfigMapTrustProblem> {
        if let Some(last) = &*self.last.load()
            && *last.0 == *pem
        {
            return Ok(last.1.clone());
        }
        if let Some(failed) = &*self.failed.load()
            && *failed.0 == *pem
        {
            return Err(failed.1.clone());
        }
        self.full_loads.fetch_add(1, Ordering::Relaxed);
        match anchors_from_pem(pem) {
            Ok(anchors) => {
                let anchors = Arc::new(anchors);
                self.last
                    .store(Some(Arc::new((pem.into(), anchors.clone()))));
                Ok(anchors)
            }
            Err(problem) => {
                self.failed
                    .store(Some(Arc::new((pem.into(), problem.clone()))));
                Err(problem)
            }
        }
    }
}

impl TrustFromObject for ClusterTrustBundle {}

impl sealed::TrustKind for ClusterTrustBundle {
    /// Nothing: the whole set's bundle.
    type Selector = ();
    /// Shared by the clones of one source (the cache is per verifier).
    type Cache = Arc<BundleTrustCache>;

    fn origin(bundles: &ClusterTrustBundlesRef, _: &()) -> TrustOrigin {
        TrustOrigin::ClusterTrustBundles(Box::new(bundles.clone()))
    }

    fn cache(_: &()) -> Arc<BundleTrustCache> {
        Arc::new(BundleTrustCache::new())
    }

    /// Each verifier parses the set's bundle itself (one per object and settings in
    /// a registry entry).
    fn shared_cache(_: &SharedObject<ClusterTrustBundle>, _: &()) -> Arc<BundleTrustCache> {
        Arc::new(BundleTrustCache::new())
    }

    fn read_roots(
        cache: &Arc<BundleTrustCache>,
        combined: &ClusterTrustBundle,
    ) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        cache
            .load(combined.spec.trust_bundle.as_bytes())
            .map_err(|problem| {
                let bundles = combined
                    .spec
                    .signer_name
                    .as_deref()
                    .and_then(|signer| ClusterTrustBundlesRef::new(signer).ok());
                match bundles {
                    Some(bundles) => {
                        bundles_error(bundles, ClusterTrustBundleProblem::Bundle(problem))
                    }
                    // Not reachable: the combined object carries the signer.
                    None => TrustReloadError::Unavailable(Box::new(problem)),
                }
            })
    }

    fn missing(bundles: &ClusterTrustBundlesRef, _: &()) -> TrustReloadError {
        bundles_error(bundles.clone(), ClusterTrustBundleProblem::NoneFound)
    }

    fn full_loads(cache: &Arc<BundleTrustCache>) -> u64 {
        cache.full_loads.load(Ordering::Relaxed)
    }
}

fn bundles_error(
    bundles: ClusterTrustBundlesRef,
    problem: ClusterTrustBundleProblem,
) -> TrustReloadError {
    TrustReloadError::ClusterTrustBundles(Box::new(ClusterTrustBundleError { bundles, problem }))
}

impl WatchedTrustSource<ClusterTrustBundle> {
    /// The roots in the bundles of `source`'s set.
    pub fn new(source: WatchedObject<ClusterTrustBundle>) -> Self {
        Self::with_selector(source, ())
    }
}

impl TrustVerifier {
    /// A builder for a verifier trusting the roots of the ClusterTrustBundles of a
    /// signer (and label selector), watched through `client`: every handshake
    /// verifies against the set's current bundles, read from the watch cache (no
    /// I/O; a byte comparison when unchanged). The service account needs `list` and
    /// `watch` on `clustertrustbundles` (a ClusterRole). Build it with
    /// [`WatchedBuilder::watches`] to share one watch per cluster, credential and
    /// set through a registry.
    ///
    /// Fails to build when no bundle of the signer exists or none holds a usable
    /// root ([`TrustError::Unusable`](super::TrustError::Unusable) with
    /// [`TrustReloadError::ClusterTrustBundles`]), when the watch is refused, or on
    /// timeout ([`TrustError::ClusterTrustBundleSource`](super::TrustError::ClusterTrustBundleSource)).
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::TrustVerifier;
    /// use svc_tls::origin::ClusterTrustBundlesRef;
    ///
    /// let bundles = ClusterTrustBundlesRef::new("example.com/platform")?;
    /// let trust = TrustVerifier::cluster_trust_bundles_builder(client, bundles).build().await?;
    /// println!("trusting {} root(s)", trust.state().roots);
    /// # Ok(()) }
    /// ```
    pub fn cluster_trust_bundles_builder(
        client: kube::Client,
        bundles: ClusterTrustBundlesRef,
    ) -> TrustVerifierBuilder {
        WatchedBuilder::new(
            TrustObject::ClusterTrustBundles { bundles },
            Some(Reads::Own(client)),
        )
    }

    /// The watched ClusterTrustBundles' cache, when the roots come from them.
    pub fn cluster_trust_bundles_source(&self) -> Option<&WatchedObject<ClusterTrustBundle>> {
        self.watched_object::<ClusterTrustBundle>()
    }
}
