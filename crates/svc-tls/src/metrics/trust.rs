//! The trust's event counters: their names, their `result` values and how a failed
//! reload maps to one (the recorder is the one of both halves, [`SourceRecorder`](super::SourceRecorder)).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_trust_reloads_total` | counter | `source`, `name`, `result` (`ok`, `not_found`, `malformed`, `expired`, `not_yet_valid`, `unavailable`, `withdrawn`, `refused`, `other`) |
//! | `svc_tls_trust_probe_read_failures_total` | counter | `source`, `name`, `cluster`, `result` (those of `reloads` but `ok`) |
//! | `svc_tls_trust_warnings_suppressed_total` | counter | `source`, `name` |
//!
//! `result="ok"` counts the root sets installed (at start-up and at each change seen);
//! every other result counts the handshake-time reloads that failed for that reason.
//! The readiness probe's reads that failed are counted apart, in
//! `probe_read_failures`, by the same reasons.

use super::counters::{MaterialResults, index_of};
use super::source::CountedSource;
use crate::material::TrustAnchors;
use crate::origin::TrustOrigin;
use crate::trust::TrustReloadError;

/// The values of the `result` label of `svc_tls_trust_reloads_total`.
pub const RELOAD_RESULTS: [&str; 9] = [
    "ok",
    "not_found",
    "malformed",
    "expired",
    "not_yet_valid",
    "unavailable",
    "withdrawn",
    "refused",
    "other",
];

impl CountedSource for TrustOrigin {
    type Value = TrustAnchors;
    const RESULTS_FAMILY: (&'static str, &'static str) = (
        "svc_tls_trust_reloads",
        "CA trust reloads by result: ok (a new root set installed) or the reason a handshake-time reload failed (the last good roots were used)",
    );
    const SUPPRESSED_FAMILY: (&'static str, &'static str) = (
        "svc_tls_trust_warnings_suppressed",
        "Stale trust warnings held back by the rate limit",
    );
    const PROBE_FAMILY: (&'static str, &'static str) = (
        "svc_tls_trust_probe_read_failures",
        "CA trust reads by the readiness probe that failed, by reason (not counted as reloads; the last good roots were used)",
    );
    const RESULTS: &'static [&'static str] = &RELOAD_RESULTS;

    /// Classified by the half's reload error, at positions fixed at compile time.
    fn failure_index(error: &TrustReloadError) -> usize {
        const NOT_FOUND: usize = index_of(&RELOAD_RESULTS, "not_found");
        const MATERIAL: MaterialResults = MaterialResults::of(&RELOAD_RESULTS);
        const MALFORMED: usize = index_of(&RELOAD_RESULTS, "malformed");
        const UNAVAILABLE: usize = index_of(&RELOAD_RESULTS, "unavailable");
        const WITHDRAWN: usize = index_of(&RELOAD_RESULTS, "withdrawn");
        const REFUSED: usize = index_of(&RELOAD_RESULTS, "refused");
        match error {
            TrustReloadError::NotFound { .. } => NOT_FOUND,
            TrustReloadError::Material(e) => MATERIAL.index(e),
            TrustReloadError::Unavailable(_) => UNAVAILABLE,
            TrustReloadError::Withdrawn(_) => WITHDRAWN,
            TrustReloadError::Refused { .. } => REFUSED,
            TrustReloadError::ConfigMap(e) => match e.problem {
                crate::material::ConfigMapTrustProblem::NotFound => NOT_FOUND,
                _ => MALFORMED,
            },
            // No bundle of the signer is a deleted CA; unusable bundles are malformed.
            TrustReloadError::ClusterTrustBundles(e) => match e.problem {
                crate::trust::ClusterTrustBundleProblem::NoneFound => NOT_FOUND,
                _ => MALFORMED,
            },
        }
    }
}
