//! The identity's event counters and its `Recorder`.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_identity_cert_refreshes_total` | counter | `source`, `name`, `result` (`ok`, `not_found`, `malformed`, `expired`, `not_yet_valid`, `unavailable`, `other`) |
//! | `svc_tls_identity_warnings_suppressed_total` | counter | `source`, `name` |
//!
//! `result="ok"` counts the identities installed (at start-up and at each rotation
//! seen); every other result counts the handshake-time reloads that failed for that
//! reason (the last good identity was served).

use std::fmt;
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::counters::{MaterialResults, SourceCounters, index_of};
use super::{LabelSet, SourceLabels};
use crate::identity::{self, InvalidIdentity, ReloadError};
use crate::last_good::{Recorder, StaleWarning};
use crate::material::{Identity, MaterialErrorKind};
use crate::origin::IdentityOrigin;
use crate::spiffe::SpiffeError;

/// The values of the `result` label of `svc_tls_identity_cert_refreshes_total`.
pub const REFRESH_RESULTS: [&str; 7] = [
    "ok",
    "not_found",
    "malformed",
    "expired",
    "not_yet_valid",
    "unavailable",
    "other",
];

/// The identity's counter families, registered once.
pub(crate) struct IdentityFamilies {
    refreshes: Family<LabelSet, Counter>,
    suppressed: Family<LabelSet, Counter>,
}

impl IdentityFamilies {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            refreshes: Family::default(),
            suppressed: Family::default(),
        };
        registry.register(
            "svc_tls_identity_cert_refreshes",
            "Client identity reloads by result: ok (a new identity installed) or the reason a handshake-time reload failed (the last good identity was served)",
            families.refreshes.clone(),
        );
        registry.register(
            "svc_tls_identity_warnings_suppressed",
            "Stale or invalid identity reports held back by the rate limit",
            families.suppressed.clone(),
        );
        families
    }
}

/// The `result` label of a failed identity reload (a fixed set, never the error's
/// text).
pub fn failure_result(error: &(dyn std::error::Error + 'static)) -> &'static str {
    REFRESH_RESULTS[failure_index(error)]
}

/// The position in [`REFRESH_RESULTS`] of a failed reload's result.
fn failure_index(error: &(dyn std::error::Error + 'static)) -> usize {
    const NOT_FOUND: usize = index_of(&REFRESH_RESULTS, "not_found");
    const MATERIAL: MaterialResults = MaterialResults::of(&REFRESH_RESULTS);
    const UNAVAILABLE: usize = index_of(&REFRESH_RESULTS, "unavailable");
    const OTHER: usize = index_of(&REFRESH_RESULTS, "other");
    match error.downcast_ref::<ReloadError>() {
        Some(ReloadError::NotFound { .. }) => NOT_FOUND,
        Some(ReloadError::Material(e)) => MATERIAL.index(e),
        Some(ReloadError::Unavailable(_)) => UNAVAILABLE,
        Some(ReloadError::OutsideValidity(inner)) => validity_index(inner.as_ref()),
        _ => OTHER,
    }
}

/// `not_yet_valid` for an SVID whose validity has not begun, `expired` otherwise.
fn validity_index(error: &(dyn std::error::Error + 'static)) -> usize {
    const EXPIRED: usize = index_of(&REFRESH_RESULTS, "expired");
    const NOT_YET_VALID: usize = index_of(&REFRESH_RESULTS, "not_yet_valid");
    match error.downcast_ref::<SpiffeError>() {
        Some(SpiffeError::Svid(svid)) => match svid.kind() {
            MaterialErrorKind::CertificateNotYetValid { .. } => NOT_YET_VALID,
            _ => EXPIRED,
        },
        _ => EXPIRED,
    }
}

/// The recorder of one identity source: the counters of its label sets, created when
/// it is built, so that a handshake only increments an atomic.
pub struct IdentityRecorder {
    counters: SourceCounters<{ REFRESH_RESULTS.len() }>,
}

impl fmt::Debug for IdentityRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityRecorder")
            .field("labels", &self.counters.labels)
            .finish_non_exhaustive()
    }
}

impl IdentityRecorder {
    pub(crate) fn new(families: &IdentityFamilies, labels: SourceLabels) -> Self {
        Self {
            counters: SourceCounters::new(
                &families.refreshes,
                &families.suppressed,
                &REFRESH_RESULTS,
                labels,
            ),
        }
    }

    /// The source's labels.
    pub fn labels(&self) -> &SourceLabels {
        &self.counters.labels
    }
}

impl Recorder<IdentityOrigin, Identity> for IdentityRecorder {
    fn loaded(&self, _source: &IdentityOrigin, _identity: &Identity, _at: SystemTime) {
        self.counters.ok();
    }

    fn reload_failed(
        &self,
        _source: &IdentityOrigin,
        error: &(dyn std::error::Error + 'static),
        _failures: u64,
    ) {
        self.counters.failed_at(failure_index(error));
    }

    fn stale_warning(&self, warning: &StaleWarning<'_, IdentityOrigin, Identity>) {
        self.counters.suppressed(warning.suppressed);
    }
}

impl identity::Recorder for IdentityRecorder {
    fn invalid_identity(&self, event: &InvalidIdentity<'_>) {
        self.counters.suppressed(event.suppressed);
    }
}
