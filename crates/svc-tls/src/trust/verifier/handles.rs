//! Handles on a verifier that do not keep it alive: the follower its source calls
//! when it changed, and the weak handle the metrics export through.

use crate::follow::Follower;

use super::{Inner, TrustVerifier};

/// Reloads a verifier when its source changed, so its state, its recorder and the
/// pooled connections that follow it see new roots (or a withdrawal) without a
/// handshake.
pub(super) struct FollowingVerifier(pub(super) std::sync::Weak<Inner>);

impl Follower for FollowingVerifier {
    fn source_changed(&self) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        // A reload that loads something: a span naming the source.
        let _span =
            tracing::info_span!("svc_tls.trust.reload", source = %inner.source.origin()).entered();
        let _ = TrustVerifier { inner }.reload(crate::last_good::slot::ReadBy::Handshake);
        true
    }
}

/// A [`TrustVerifier`] that does not keep it alive.
#[cfg(feature = "metrics")]
#[derive(Clone)]
pub(crate) struct WeakTrustVerifier(pub(super) std::sync::Weak<Inner>);

#[cfg(feature = "metrics")]
impl WeakTrustVerifier {
    /// The TrustVerifier, while a clone of it lives.
    pub(crate) fn upgrade(&self) -> Option<TrustVerifier> {
        self.0.upgrade().map(|inner| TrustVerifier { inner })
    }
}
