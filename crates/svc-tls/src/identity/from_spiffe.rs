//! The X509-SVID from the SPIFFE Workload API: the SPIFFE adapter of the identity
//! seam, over the process's one stream ([`WorkloadApiSource`]).

use std::fmt;
use std::time::SystemTime;

use super::source::{IdentityReloadError, IdentitySource};
use crate::material::{CertificateValidity, Identity};
use crate::origin::IdentityOrigin;
use crate::spiffe::{SpiffeError, WorkloadApiSource, svid::check_validity};

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

    fn read(&self, check_time: bool) -> Result<(Identity, Option<u64>), IdentityReloadError> {
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
        let identity = snapshot.identity.as_ref().map_err(|e| {
            IdentityReloadError::Unavailable(Box::new(SpiffeError::Svid(e.clone())))
        })?;
        if check_time {
            let now = SystemTime::now();
            check_validity(identity, now).map_err(|e| IdentityReloadError::OutsideValidity {
                validity: CertificateValidity::of(identity, now),
                source: Box::new(SpiffeError::Svid(e)),
            })?;
        }
        Ok((identity.clone(), Some(snapshot.generation)))
    }

    fn stream_down(&self) -> IdentityReloadError {
        let error = self
            .source
            .health()
            .last_error
            .unwrap_or_else(|| "no message received".to_owned());
        IdentityReloadError::Unavailable(Box::new(SpiffeError::StreamDown {
            endpoint: self.source.endpoint().to_string(),
            error,
        }))
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

    fn current(&self) -> Result<Identity, IdentityReloadError> {
        self.read(true).map(|(identity, _)| identity)
    }

    fn current_versioned(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        self.read(true)
    }

    fn current_ignoring_validity(&self) -> Result<Identity, IdentityReloadError> {
        // At start-up the stream has just delivered: serve what it sent, even when
        // the clock disagrees with the certificate (reported by the resolver).
        let snapshot = self.source.shared().snapshot.load();
        match &*snapshot {
            Some(snapshot) => snapshot
                .identity
                .clone()
                .map_err(|e| IdentityReloadError::Unavailable(Box::new(SpiffeError::Svid(e)))),
            None => Err(self.stream_down()),
        }
    }
}
