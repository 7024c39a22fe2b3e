//! The two seams over one Workload API stream: the client identity (the SVID) and
//! the trust roots (one trust domain's bundle).

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use spiffe::TrustDomain;

use super::error::SpiffeError;
use super::stream::WorkloadApiSource;
use super::svid::check_validity;
use crate::identity_source::{IdentityOrigin, IdentitySource};
use crate::material::Identity;
use crate::resolver::ReloadError;
use crate::trust_source::{TrustAnchors, TrustOrigin, TrustReloadError, TrustSource};

/// The X509-SVID from the Workload API, as the resolver's identity source.
///
/// [`IdentitySource::current`] is a pointer load of the newest stream message plus a
/// validity check: a rotation is presented on the very next handshake. While the
/// stream is down it answers [`SpiffeError::StreamDown`], so the resolver serves the
/// last good SVID with its rate-limited warning (it may be missing a rotation);
/// once the stream is back, the next handshake recovers.
pub struct SpiffeIdentitySource {
    origin: IdentityOrigin,
    source: WorkloadApiSource,
}

impl SpiffeIdentitySource {
    /// The SVID of `source`'s stream.
    pub fn new(source: WorkloadApiSource) -> Self {
        Self {
            origin: IdentityOrigin::Spiffe {
                endpoint: source.endpoint().to_string(),
            },
            source,
        }
    }

    /// The Workload API stream.
    pub fn workload_api(&self) -> &WorkloadApiSource {
        &self.source
    }

    fn read(&self, check_time: bool) -> Result<(Identity, Option<u64>), ReloadError> {
        let shared = self.source.shared();
        let snapshot = shared.snapshot.load();
        let Some(snapshot) = &*snapshot else {
            // Not reachable after `WorkloadApiSource::connect` succeeded.
            return Err(self.stream_down());
        };
        let link = shared.link.load();
        if !link.connected {
            return Err(self.stream_down());
        }
        let identity = snapshot
            .identity
            .as_ref()
            .map_err(|e| ReloadError::Spiffe(SpiffeError::Svid(e.clone())))?;
        if check_time {
            check_validity(identity, SystemTime::now())
                .map_err(|e| ReloadError::Spiffe(SpiffeError::Svid(e)))?;
        }
        Ok((identity.clone(), Some(snapshot.generation)))
    }

    fn stream_down(&self) -> ReloadError {
        let error = self
            .source
            .health()
            .last_error
            .unwrap_or_else(|| "no message received".to_owned());
        ReloadError::Spiffe(SpiffeError::StreamDown {
            endpoint: self.source.endpoint().to_string(),
            error,
        })
    }
}

impl fmt::Debug for SpiffeIdentitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpiffeIdentitySource")
            .field("origin", &self.origin)
            .field("source", &self.source)
            .finish()
    }
}

impl IdentitySource for SpiffeIdentitySource {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Identity, ReloadError> {
        self.read(true).map(|(identity, _)| identity)
    }

    fn current_versioned(&self) -> Result<(Identity, Option<u64>), ReloadError> {
        self.read(true)
    }

    fn current_ignoring_validity(&self) -> Result<Identity, ReloadError> {
        // At start-up the stream has just delivered: serve what it sent, even when
        // the clock disagrees with the certificate (reported by the resolver).
        let snapshot = self.source.shared().snapshot.load();
        match &*snapshot {
            Some(snapshot) => snapshot
                .identity
                .clone()
                .map_err(|e| ReloadError::Spiffe(SpiffeError::Svid(e))),
            None => Err(self.stream_down()),
        }
    }
}

/// One trust domain's X.509 bundle from the Workload API, as the verifier's trust
/// source. A bundle update is used on the next handshake; an unchanged bundle gives
/// the same `Arc`, so the verifier rebuilds nothing.
pub struct SpiffeTrustSource {
    origin: TrustOrigin,
    trust_domain: String,
    source: WorkloadApiSource,
}

impl SpiffeTrustSource {
    /// The bundle of `trust_domain` in `source`'s stream.
    pub fn new(source: WorkloadApiSource, trust_domain: &TrustDomain) -> Self {
        let trust_domain = trust_domain.to_string();
        Self {
            origin: TrustOrigin::SpiffeBundle {
                trust_domain: trust_domain.clone(),
            },
            trust_domain,
            source,
        }
    }
}

impl fmt::Debug for SpiffeTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpiffeTrustSource")
            .field("origin", &self.origin)
            .field("source", &self.source)
            .finish()
    }
}

impl TrustSource for SpiffeTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        let snapshot = self.source.shared().snapshot.load();
        let entry = snapshot
            .as_ref()
            .and_then(|s| s.bundles.get(&self.trust_domain));
        match entry {
            Some((_, Some(anchors))) => Ok(anchors.clone()),
            Some((_, None)) => Err(TrustReloadError::NoBundle {
                trust_domain: self.trust_domain.clone(),
                reason: "none of its authorities is usable as a trust anchor",
            }),
            None => Err(TrustReloadError::NoBundle {
                trust_domain: self.trust_domain.clone(),
                reason: "the Workload API sent no bundle for it",
            }),
        }
    }

    fn watch_error(&self) -> Option<String> {
        let health = self.source.health();
        (!health.connected).then(|| health.last_error.unwrap_or_default())
    }
}
