//! The trust's event counters and its `Recorder`.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_trust_reloads_total` | counter | `source`, `name`, `result` (`ok`, `not_found`, `malformed`, `expired`, `not_yet_valid`, `unavailable`, `withdrawn`, `other`) |
//! | `svc_tls_trust_warnings_suppressed_total` | counter | `source`, `name` |
//!
//! `result="ok"` counts the root sets installed (at start-up and at each change seen);
//! every other result counts the handshake-time reloads that failed for that reason.

use std::fmt;
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::counters::{MaterialResults, SourceCounters, index_of};
use super::{LabelSet, SourceLabels};
use crate::last_good::{Recorder, StaleWarning};
use crate::material::TrustAnchors;
use crate::origin::TrustOrigin;
use crate::trust::ReloadError;

/// The values of the `result` label of `svc_tls_trust_reloads_total`.
pub const RELOAD_RESULTS: [&str; 8] = [
    "ok",
    "not_found",
    "malformed",
    "expired",
    "not_yet_valid",
    "unavailable",
    "withdrawn",
    "other",
];

/// The trust's counter families, registered once.
pub(crate) struct TrustFamilies {
    reloads: Family<LabelSet, Counter>,
    suppressed: Family<LabelSet, Counter>,
}

impl TrustFamilies {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            reloads: Family::default(),
            suppressed: Family::default(),
        };
        registry.register(
            "svc_tls_trust_reloads",
            "CA trust reloads by result: ok (a new root set installed) or the reason a handshake-time reload failed (the last good roots were used)",
            families.reloads.clone(),
        );
        registry.register(
            "svc_tls_trust_warnings_suppressed",
            "Stale trust warnings held back by the rate limit",
            families.suppressed.clone(),
        );
        families
    }
}

/// The `result` label of a failed trust reload (a fixed set, never the error's text).
pub fn failure_result(error: &(dyn std::error::Error + 'static)) -> &'static str {
    RELOAD_RESULTS[failure_index(error)]
}

/// The position in [`RELOAD_RESULTS`] of a failed reload's result.
fn failure_index(error: &(dyn std::error::Error + 'static)) -> usize {
    const NOT_FOUND: usize = index_of(&RELOAD_RESULTS, "not_found");
    const MATERIAL: MaterialResults = MaterialResults::of(&RELOAD_RESULTS);
    const MALFORMED: usize = index_of(&RELOAD_RESULTS, "malformed");
    const UNAVAILABLE: usize = index_of(&RELOAD_RESULTS, "unavailable");
    const WITHDRAWN: usize = index_of(&RELOAD_RESULTS, "withdrawn");
    const OTHER: usize = index_of(&RELOAD_RESULTS, "other");
    match error.downcast_ref::<ReloadError>() {
        Some(ReloadError::NotFound { .. }) => NOT_FOUND,
        Some(ReloadError::Material(e)) => MATERIAL.index(e),
        Some(ReloadError::Unavailable(_)) => UNAVAILABLE,
        Some(ReloadError::Withdrawn(_)) => WITHDRAWN,
        Some(ReloadError::ConfigMap(e)) => match e.problem {
            crate::material::ConfigMapTrustProblem::NotFound => NOT_FOUND,
            _ => MALFORMED,
        },
        _ => OTHER,
    }
}

/// The recorder of one trust source: the counters of its label sets, created when it
/// is built, so that a handshake only increments an atomic.
pub struct TrustRecorder {
    counters: SourceCounters<{ RELOAD_RESULTS.len() }>,
}

impl fmt::Debug for TrustRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustRecorder")
            .field("labels", &self.counters.labels)
            .finish_non_exhaustive()
    }
}

impl TrustRecorder {
    pub(crate) fn new(families: &TrustFamilies, labels: SourceLabels) -> Self {
        Self {
            counters: SourceCounters::new(
                &families.reloads,
                &families.suppressed,
                &RELOAD_RESULTS,
                labels,
            ),
        }
    }

    /// The source's labels.
    pub fn labels(&self) -> &SourceLabels {
        &self.counters.labels
    }
}

impl Recorder<TrustOrigin, TrustAnchors> for TrustRecorder {
    fn loaded(&self, _source: &TrustOrigin, _anchors: &TrustAnchors, _at: SystemTime) {
        self.counters.ok();
    }

    fn reload_failed(
        &self,
        _source: &TrustOrigin,
        error: &(dyn std::error::Error + 'static),
        _failures: u64,
    ) {
        self.counters.failed_at(failure_index(error));
    }

    fn stale_warning(&self, warning: &StaleWarning<'_, TrustOrigin, TrustAnchors>) {
        self.counters.suppressed(warning.suppressed);
    }
}
