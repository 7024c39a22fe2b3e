//! The identity seam: where the handshake-time resolver reads the identity it
//! presents.
//!
//! An [`IdentitySource`] says what it holds *now*: a whole [`Identity`] (chain
//! and key that belong together), or why it has none. The resolver
//! ([`IdentityResolver`](super::IdentityResolver)) owns everything around that
//! answer, through the one last-good core: falling back to the last good identity,
//! the rate-limited warning, the visible state and the recorder. A source therefore
//! stays small; this crate has two, a watched Secret
//! ([`SecretIdentitySource`](super::SecretIdentitySource)) and the SPIFFE Workload
//! API's SVID ([`SpiffeIdentitySource`](super::SpiffeIdentitySource)), and the seam
//! knows neither.
//!
//! [`IdentitySource::current`] runs on every TLS handshake: no I/O, no lock held
//! while parsing, and no allocation when nothing changed.

use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

use crate::last_good::{ReloadOrigin, report::sealed::Sealed};
use crate::material::{CertificateValidity, Identity, MaterialError, MaterialErrorKind};
use crate::origin::{IdentityOrigin, SecretRef, SourceHealth};
use crate::watch::{Secret, WatchedObject};

/// Why one handshake-time reload failed (the last good identity was served instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityReloadError {
    /// The Secret is not in the cache (deleted, or not yet recreated).
    #[error("client certificate Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The Secret does not hold a usable identity (the error names the Secret).
    #[error("client certificate")]
    Material(#[source] MaterialError),
    /// The source gives no usable identity now: its stream is down, or what it
    /// holds is unusable (the error says which source and why).
    #[error("client certificate unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The source holds an identity whose certificate is outside its validity
    /// period now (a Secret's reports this as [`IdentityReloadError::Material`]).
    #[error("client certificate {validity}")]
    OutsideValidity {
        /// Expired or not yet valid, at the time of the read.
        validity: CertificateValidity,
        /// What the source says (which file or SVID, and its validity period).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Another caller is loading a new version right now (the watch's loader): the
    /// handshake presents the identity already served instead of parsing the same
    /// bytes a second time. Not a failure; never counted or reported.
    #[error("client certificate: a new version is being loaded")]
    InProgress,
}

impl IdentityReloadError {
    /// Whether the identity is only outside its validity period (expired or not yet
    /// valid) and otherwise usable: served and reported at start-up, not refused.
    pub fn is_validity_error(&self) -> bool {
        match self {
            Self::Material(e) => matches!(
                e.kind(),
                MaterialErrorKind::CertificateExpired { .. }
                    | MaterialErrorKind::CertificateNotYetValid { .. }
            ),
            Self::OutsideValidity { .. } => true,
            Self::NotFound { .. } | Self::Unavailable(_) | Self::InProgress => false,
        }
    }
}

impl Sealed for IdentityOrigin {}

/// The identity half's failed reads, as its recorder receives them.
impl ReloadOrigin for IdentityOrigin {
    type Error = IdentityReloadError;
}

/// A source of the client identity, read on every handshake.
///
/// Object safe: the resolver holds an `Arc<dyn IdentitySource>`.
pub trait IdentitySource: Send + Sync + fmt::Debug {
    /// Where the identity comes from (for the state, logs and the recorder).
    fn origin(&self) -> &IdentityOrigin;

    /// The identity the source holds now, or why it holds none.
    ///
    /// Called on the handshake path: it must not do I/O, must not hold a lock
    /// while parsing, and should not allocate when nothing changed.
    fn current(&self) -> Result<Identity, IdentityReloadError>;

    /// [`IdentitySource::current`] with the version of what it was read from, when the
    /// source has ordered versions (a Secret's `resourceVersion`). The resolver never
    /// replaces a served identity with one read from an older version, so a handshake
    /// working from an older snapshot cannot undo a rotation.
    fn current_versioned(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        self.current().map(|identity| (identity, None))
    }

    /// [`IdentitySource::current_versioned`] as a handshake reads it: a source whose
    /// new version another caller is loading right now may return
    /// [`IdentityReloadError::InProgress`] instead of loading it a second time (the resolver
    /// then presents what it serves). Defaults to `current_versioned`.
    fn current_on_handshake(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        self.current_versioned()
    }

    /// The identity the source holds, without checking the certificate's validity
    /// period. Used once, at start-up: an expired or not-yet-valid certificate is
    /// served and reported rather than stopping the service (Go's client started
    /// with it too).
    fn current_ignoring_validity(&self) -> Result<Identity, IdentityReloadError> {
        self.current()
    }

    /// The health of the source's change feed, if it has one. Not called on every
    /// handshake (at most about once a second, and by
    /// [`IdentityResolver::state`](super::IdentityResolver::state)).
    fn health(&self) -> Option<SourceHealth> {
        None
    }

    /// The watched Secret's cache behind this source, when it reads one (for callers
    /// that wait for a change to reach the cache).
    fn watched_secret(&self) -> Option<&WatchedObject<Secret>> {
        None
    }

    /// The crypto provider keys are loaded with, when the source loads keys itself.
    fn provider(&self) -> Option<&Arc<CryptoProvider>> {
        None
    }
}
