//! What the options-based constructors record into: the recorders and state exports
//! of a [`SecretWatches`] registry's metrics, or nothing without them. Above both
//! halves and the watch layer, so that neither has to know the other.

use std::sync::Arc;

use crate::identity::{self, IdentityResolver};
use crate::last_good::NoopRecorder;
use crate::origin::{IdentityOrigin, TrustOrigin};
use crate::trust::{self, TrustVerifier};
use crate::watch::SecretWatches;

/// The identity recorder for a resolver over `origin` built on `watches` (a
/// no-op without metrics). Construction path.
pub(crate) fn identity_recorder(
    watches: &SecretWatches,
    origin: &IdentityOrigin,
    spiffe_id: Option<&str>,
) -> Arc<dyn identity::Recorder> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = watches.metrics() {
        return metrics.identity_recorder(origin, spiffe_id);
    }
    let _ = (watches, origin, spiffe_id);
    Arc::new(NoopRecorder)
}

/// The trust recorder for a verifier over `origin` built on `watches` (a no-op
/// without metrics). Construction path.
pub(crate) fn trust_recorder(
    watches: &SecretWatches,
    origin: &TrustOrigin,
) -> Arc<dyn trust::Recorder> {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = watches.metrics() {
        return metrics.trust_recorder(origin);
    }
    let _ = (watches, origin);
    Arc::new(NoopRecorder)
}

/// Exports `resolver`'s state when this registry has metrics.
pub(crate) fn track_identity(watches: &SecretWatches, resolver: &IdentityResolver) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = watches.metrics() {
        metrics.track_identity(resolver);
    }
    let _ = (watches, resolver);
}

/// Exports `verifier`'s state when this registry has metrics.
pub(crate) fn track_trust(watches: &SecretWatches, verifier: &TrustVerifier) {
    #[cfg(feature = "metrics")]
    if let Some(metrics) = watches.metrics() {
        metrics.track_trust(verifier);
    }
    let _ = (watches, verifier);
}
