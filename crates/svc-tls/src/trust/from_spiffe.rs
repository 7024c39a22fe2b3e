//! One trust domain's X.509 bundle from the SPIFFE Workload API: the SPIFFE adapter
//! of the trust seam, over the process's one stream ([`WorkloadApiSource`]).

use std::fmt;
use std::sync::Arc;

use super::source::{TrustReloadError, TrustSource};
use crate::material::TrustAnchors;
use crate::origin::{SourceHealth, TrustOrigin};
use crate::spiffe::{TrustDomain, WorkloadApiSource, error::BundleError};

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

    /// The trust domain's anchors in the newest message. The Workload API is
    /// authoritative: a message without the trust domain's bundle, or with an empty
    /// one, withdraws the trust ([`TrustReloadError::Withdrawn`]: the verifier refuses
    /// the domain's servers at once), and it stays withdrawn while the stream is down
    /// or reconnecting (the newest message is the agent's last word). Only a bundle
    /// none of whose authorities parses leaves the last good roots in use.
    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        let shared = self.source.shared();
        let snapshot = shared.snapshot.load();
        let entry = snapshot
            .as_ref()
            .and_then(|s| s.bundles.get(&self.trust_domain));
        match entry {
            Some((_, Some(anchors))) => Ok(anchors.clone()),
            Some((bundle, None)) if bundle.authorities().is_empty() => {
                Err(self
                    .withdrawn("the Workload API sends an empty bundle for it (trust withdrawn)"))
            }
            Some((_, None)) => {
                Err(self.no_bundle("none of its authorities is usable as a trust anchor"))
            }
            // The agent's last word stands while its stream is down or reconnecting:
            // a de-federated domain stays withdrawn until a new message brings it back.
            None if snapshot.is_some() => Err(self
                .withdrawn("the Workload API no longer sends a bundle for it (trust withdrawn)")),
            None => Err(self.no_bundle("the Workload API sent no bundle for it")),
        }
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.source.health())
    }
}

impl SpiffeTrustSource {
    fn withdrawn(&self, reason: &'static str) -> TrustReloadError {
        TrustReloadError::Withdrawn(Box::new(BundleError {
            trust_domain: self.trust_domain.clone(),
            reason,
        }))
    }

    fn no_bundle(&self, reason: &'static str) -> TrustReloadError {
        TrustReloadError::Unavailable(Box::new(BundleError {
            trust_domain: self.trust_domain.clone(),
            reason,
        }))
    }
}
