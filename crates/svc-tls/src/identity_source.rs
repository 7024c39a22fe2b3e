//! The credential-source seam: where the handshake-time resolver reads the
//! identity it presents.
//!
//! An [`IdentitySource`] says what it holds *now*: a whole [`Identity`] (chain
//! and key that belong together), or why it has none. The resolver
//! ([`crate::resolver`]) owns everything around that answer: falling back to the
//! last good identity, the rate-limited warning, the visible state and the
//! recorder. A source therefore stays small: the SPIFFE Workload API source
//! ([`crate::spiffe::SpiffeIdentitySource`]) sits beside [`SecretIdentitySource`]
//! without a second resolver.
//!
//! [`IdentitySource::current`] runs on every TLS handshake: no I/O, no lock held
//! while parsing, and no allocation when nothing changed.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

use crate::material::{Identity, IdentityCache, MaterialError};
use crate::secret_ref::SecretRef;
use crate::source::SecretSource;

/// Why one handshake-time reload failed (the last good identity was served instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The Secret is not in the cache (deleted, or not yet recreated).
    #[error("client certificate Secret {secret} not found")]
    NotFound {
        /// The Secret.
        secret: SecretRef,
    },
    /// The Secret does not hold a usable identity (the error names the Secret).
    #[error("client certificate {0}")]
    Material(#[source] MaterialError),
    /// The SPIFFE Workload API gives no usable SVID now.
    #[error("client certificate: {0}")]
    Spiffe(#[source] crate::spiffe::SpiffeError),
}

/// Which source an identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityOrigin {
    /// A `kubernetes.io/tls` Secret, watched through the API server.
    Secret(SecretRef),
    /// The X509-SVID streamed by the SPIFFE Workload API at `endpoint`.
    Spiffe {
        /// The Workload API address (`SPIFFE_ENDPOINT_SOCKET`).
        endpoint: String,
    },
}

impl fmt::Display for IdentityOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(secret) => write!(f, "Secret {secret}"),
            Self::Spiffe { endpoint } => write!(f, "SPIFFE Workload API {endpoint}"),
        }
    }
}

pub use crate::source::SourceHealth;

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

    /// [`IdentitySource::current`] with the version of what it was read from, when the
    /// source has ordered versions (a Secret's `resourceVersion`). The resolver never
    /// replaces a served identity with one read from an older version, so a handshake
    /// working from an older snapshot cannot undo a rotation.
    fn current_versioned(&self) -> Result<(Identity, Option<u64>), ReloadError> {
        self.current().map(|identity| (identity, None))
    }

    /// The identity the source holds, without checking the certificate's validity
    /// period. Used once, at start-up: an expired or not-yet-valid certificate is
    /// served and reported rather than stopping the service (Go's client started
    /// with it too).
    fn current_ignoring_validity(&self) -> Result<Identity, ReloadError> {
        self.current()
    }

    /// The health of the source's change feed, if it has one. Not called on every
    /// handshake (at most about once a second, and by
    /// [`IdentityResolver::state`](crate::resolver::IdentityResolver::state)).
    fn health(&self) -> Option<SourceHealth> {
        None
    }
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
        self.current_versioned().map(|(identity, _)| identity)
    }

    fn current_versioned(&self) -> Result<(Identity, Option<u64>), ReloadError> {
        let object = self.object()?;
        // resourceVersion is an etcd revision in practice; when it is not a number the
        // identities are simply not ordered.
        let version = object
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok());
        let identity = self.cache.load(&object).map_err(ReloadError::Material)?;
        Ok((identity, version))
    }

    fn current_ignoring_validity(&self) -> Result<Identity, ReloadError> {
        let object = self.object()?;
        self.cache
            .load_ignoring_validity(&object)
            .map_err(ReloadError::Material)
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.source.watch_health())
    }
}

impl SecretIdentitySource {
    fn object(&self) -> Result<Arc<k8s_openapi::api::core::v1::Secret>, ReloadError> {
        self.source.get().ok_or_else(|| ReloadError::NotFound {
            secret: self.source.secret_ref().clone(),
        })
    }
}
