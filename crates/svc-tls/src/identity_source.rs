//! The credential-source seam: where the handshake-time resolver reads the
//! identity it presents.
//!
//! An [`IdentitySource`] says what it holds *now*: a whole [`Identity`] (chain
//! and key that belong together), or why it has none. The resolver
//! ([`crate::resolver`]) owns everything around that answer: falling back to the
//! last good identity, the rate-limited warning, the visible state and the
//! recorder. A source therefore stays small, and a second one (a SPIFFE
//! Workload API source, later) slots in beside [`SecretIdentitySource`] without
//! touching the resolver.
//!
//! [`IdentitySource::current`] runs on every TLS handshake: no I/O, no lock held
//! while parsing, and no allocation when nothing changed.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

use crate::material::{Identity, IdentityCache};
use crate::options::SecretRef;
use crate::resolver::ReloadError;
use crate::source::SecretSource;

/// Which source an identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityOrigin {
    /// A `kubernetes.io/tls` Secret, watched through the API server.
    Secret(SecretRef),
}

impl fmt::Display for IdentityOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "Secret {secret}"),
        }
    }
}

/// A source of the client identity, read on every handshake.
///
/// Object safe: the resolver holds an `Arc<dyn IdentitySource>`.
pub trait IdentitySource: Any + Send + Sync + fmt::Debug {
    /// Where the identity comes from (for the state, logs and the recorder).
    fn origin(&self) -> &IdentityOrigin;

    /// The identity the source holds now, or why it holds none.
    ///
    /// Called on the handshake path: it must not do I/O, must not hold a lock
    /// while parsing, and should not allocate when nothing changed.
    fn current(&self) -> Result<Identity, ReloadError>;
}

/// The identity in a watched `kubernetes.io/tls` Secret: the Secret from the
/// watch cache ([`SecretSource`], a map read and an `Arc` clone), loaded through
/// an [`IdentityCache`] so that unchanged bytes cost a comparison (why: see
/// [`IdentityCache`]).
pub struct SecretIdentitySource {
    origin: IdentityOrigin,
    source: SecretSource,
    cache: IdentityCache,
}

impl SecretIdentitySource {
    /// The identity in `source`'s Secret, keys loaded with `provider`.
    pub fn new(source: SecretSource, provider: Arc<CryptoProvider>) -> Self {
        Self {
            origin: IdentityOrigin::Secret(source.secret_ref().clone()),
            source,
            cache: IdentityCache::new(provider),
        }
    }

    /// The watched Secret's cache.
    pub fn secret_source(&self) -> &SecretSource {
        &self.source
    }

    /// The crypto provider keys are loaded with.
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        self.cache.provider()
    }
}

impl fmt::Debug for SecretIdentitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretIdentitySource")
            .field("origin", &self.origin)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl IdentitySource for SecretIdentitySource {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Identity, ReloadError> {
        match self.source.get() {
            Some(object) => self.cache.load(&object).map_err(ReloadError::Material),
            None => Err(ReloadError::NotFound {
                secret: self.source.secret_ref().clone(),
            }),
        }
    }
}
