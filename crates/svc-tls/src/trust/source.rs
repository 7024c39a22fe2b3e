//! The trust seam: where the handshake-time server-certificate verifier reads the
//! roots it verifies peers against.
//!
//! A [`TrustSource`] says what it holds *now*: one whole root set
//! ([`TrustAnchors`]), or why it has none. The verifier
//! ([`TrustVerifier`](super::TrustVerifier)) owns everything around that answer,
//! through the one last-good core it shares with the identity resolver: falling back
//! to the last good roots, the rate-limited warning, the visible state and the
//! recorder. This crate's sources are a watched object of any kind holding roots
//! ([`WatchedTrustSource`](super::WatchedTrustSource): a CA Secret, a CA ConfigMap),
//! a SPIFFE trust domain's bundle ([`SpiffeTrustSource`](super::SpiffeTrustSource))
//! and mounted files; the seam knows none of them.
//!
//! [`TrustSource::current`] runs on every TLS handshake: no I/O, no lock held while
//! parsing, and no allocation beyond an `Arc` clone when nothing changed. It returns
//! the *same* `Arc<TrustAnchors>` for unchanged content, which is how the verifier
//! knows it can keep the webpki verifier it built for those roots.

use std::fmt;
use std::sync::Arc;

use crate::last_good::{ReloadOrigin, report::sealed::Sealed};
use crate::material::{ConfigMapTrustError, MaterialError, TrustAnchors};
use crate::origin::{SecretRef, SourceHealth, TrustOrigin};

/// Why one handshake-time read of the roots failed (the last good roots were used).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustReloadError {
    /// The CA Secret is not in the cache (deleted, or not yet recreated).
    #[error("CA Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The CA Secret holds no usable root (the error names the Secret and data key).
    #[error("CA trust material")]
    Material(#[source] MaterialError),
    /// The CA ConfigMap is missing, lacks its key, or holds no usable root (the
    /// error names the ConfigMap, the key and why).
    #[error("CA ConfigMap trust")]
    ConfigMap(#[source] Box<ConfigMapTrustError>),
    /// A signer's ClusterTrustBundles give no usable root: none exists (matching
    /// the selector), or their bundles hold none (the error names the set and why).
    #[error("CA ClusterTrustBundles")]
    ClusterTrustBundles(#[source] Box<super::ClusterTrustBundleError>),
    /// The source gives no usable root set now: its stream is down, or it holds no
    /// usable bundle (the error says which source and why). The last good roots stay
    /// in use.
    #[error("CA trust unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The API server refuses the watch of the CA Secret or ConfigMap now (401: the
    /// credentials it runs under were revoked; 403: their read rights were removed),
    /// so the cached roots are no longer followed. The last good roots stay in use
    /// until the verifier's bound for a source gone passes; then every server is
    /// refused, as for a deleted CA Secret.
    #[error(
        "the API server refuses to watch {object} now (HTTP {code}): its CA is no longer \
         followed; grant the service account get, list and watch on it again"
    )]
    Refused {
        /// What is no longer followed (`Secret ns/name` or `ConfigMap ns/name`).
        object: String,
        /// The HTTP status (401 or 403).
        code: u16,
    },
    /// The source says, with authority, that nothing is trusted now (a SPIFFE trust
    /// domain removed from the Workload API's bundles, or emptied: de-federation).
    /// The verifier refuses every server until the source trusts roots again; the
    /// last good roots are not used.
    #[error("trust withdrawn by its source")]
    Withdrawn(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Sealed for TrustOrigin {}

/// The trust half's failed reads, as its recorder receives them (roots webpki refuses
/// are [`TrustReloadError::Unavailable`]).
impl ReloadOrigin for TrustOrigin {
    type Error = TrustReloadError;
}

/// A source of the trusted roots, read on every handshake.
///
/// Object safe: the verifier holds an `Arc<dyn TrustSource>`.
pub trait TrustSource: Send + Sync + fmt::Debug {
    /// Where the roots come from (for the state, logs and the recorder).
    fn origin(&self) -> &TrustOrigin;

    /// The root set the source holds now, or why it holds none. Returns the same
    /// `Arc` as long as the content is unchanged.
    ///
    /// Called on the handshake path: it must not do I/O and must not hold a lock
    /// while parsing.
    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError>;

    /// [`TrustSource::current`] with the version of what it was read from, when the
    /// source has ordered versions (a Secret's `resourceVersion`). The verifier never
    /// replaces the roots it uses with ones read from an older version, so a handshake
    /// working from an older snapshot cannot undo a rotation.
    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), TrustReloadError> {
        self.current().map(|anchors| (anchors, None))
    }

    /// The health of the source's change feed (a Secret's watch, the Workload API
    /// stream), if it has one. Not called on every handshake (at most about once a
    /// second, and by [`TrustVerifier::state`](super::TrustVerifier::state)).
    fn health(&self) -> Option<SourceHealth> {
        None
    }

    /// The HTTP status (401 or 403) with which the API server refuses the watch
    /// behind the source now, if it does (a revoked credential). One atomic load:
    /// read on every request of a pooled client. `None` for sources without a watch.
    fn refused_now(&self) -> Option<u16> {
        None
    }

    /// The last error of the watch or stream behind the source, if it is failing now.
    fn watch_error(&self) -> Option<String> {
        self.health()
            .filter(|h| !h.connected)
            .map(|h| h.last_error.unwrap_or_default())
    }

    /// The watched object's cache behind this source, when it reads one: a
    /// [`WatchedObject<K>`](crate::watch::WatchedObject) of its kind, found by
    /// [`TrustVerifier::watched_object`](super::TrustVerifier::watched_object) (for
    /// callers that wait for a change to reach the cache).
    fn watched_object(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        None
    }
}
