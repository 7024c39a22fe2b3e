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

use super::counters::SourceCounters;
use super::{LabelSet, SourceLabels, material_result};
use crate::material::TrustAnchors;
use crate::origin::TrustOrigin;
use crate::trust::{Recorder, ReloadError, TrustStaleWarning};

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
    match error.downcast_ref::<ReloadError>() {
        Some(ReloadError::NotFound { .. }) => "not_found",
        Some(ReloadError::Material(e)) => material_result(e),
        Some(ReloadError::Unavailable(_)) => "unavailable",
        Some(ReloadError::Withdrawn(_)) => "withdrawn",
        Some(ReloadError::ConfigMap(e)) => match e.problem {
            crate::material::ConfigMapTrustProblem::NotFound => "not_found",
            _ => "malformed",
        },
        _ => "other",
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

impl Recorder for TrustRecorder {
    fn trust_loaded(&self, _source: &TrustOrigin, _anchors: &TrustAnchors, _at: SystemTime) {
        self.counters.ok();
    }

    fn trust_reload_failed(
        &self,
        _source: &TrustOrigin,
        error: &(dyn std::error::Error + 'static),
        _failures: u64,
    ) {
        self.counters.failed(failure_result(error));
    }

    fn trust_stale_warning(&self, warning: &TrustStaleWarning<'_>) {
        self.counters.suppressed(warning.suppressed);
    }
}
