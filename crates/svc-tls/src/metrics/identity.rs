//! The identity's event counters: their names, their `result` values and how a failed
//! reload maps to one (the recorder is the one of both halves, [`SourceRecorder`](super::SourceRecorder)).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_identity_cert_refreshes_total` | counter | `source`, `name`, `result` (`ok`, `not_found`, `malformed`, `expired`, `not_yet_valid`, `unavailable`, `other`) |
//! | `svc_tls_identity_probe_read_failures_total` | counter | `source`, `name`, `cluster`, `result` (those of `cert_refreshes` but `ok`) |
//! | `svc_tls_identity_warnings_suppressed_total` | counter | `source`, `name` |
//!
//! `result="ok"` counts the identities installed (at start-up and at each rotation
//! seen); every other result counts the handshake-time reloads that failed for that
//! reason (the last good identity was served). The readiness probe's reads that
//! failed are counted apart, in `probe_read_failures`, by the same reasons: a probe
//! every few seconds on a broken Secret does not move the reload failures.

use super::counters::{MaterialResults, index_of};
use super::source::CountedSource;
use crate::identity::IdentityReloadError;
use crate::material::{CertificateValidity, Identity};
use crate::origin::IdentityOrigin;

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

impl CountedSource for IdentityOrigin {
    type Value = Identity;
    const RESULTS_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_cert_refreshes",
        "Client identity reloads by result: ok (a new identity installed) or the reason a handshake-time reload failed (the last good identity was served)",
    );
    const SUPPRESSED_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_warnings_suppressed",
        "Stale or invalid identity reports held back by the rate limit",
    );
    const PROBE_FAMILY: (&'static str, &'static str) = (
        "svc_tls_identity_probe_read_failures",
        "Client identity reads by the readiness probe that failed, by reason (not counted as reloads; the last good identity was served)",
    );
    const RESULTS: &'static [&'static str] = &REFRESH_RESULTS;

    /// Classified by the half's reload error, at positions fixed at compile time.
    fn failure_index(error: &IdentityReloadError) -> usize {
        const NOT_FOUND: usize = index_of(&REFRESH_RESULTS, "not_found");
        const MATERIAL: MaterialResults = MaterialResults::of(&REFRESH_RESULTS);
        const EXPIRED: usize = index_of(&REFRESH_RESULTS, "expired");
        const NOT_YET_VALID: usize = index_of(&REFRESH_RESULTS, "not_yet_valid");
        const UNAVAILABLE: usize = index_of(&REFRESH_RESULTS, "unavailable");
        const OTHER: usize = index_of(&REFRESH_RESULTS, "other");
        match error {
            IdentityReloadError::NotFound { .. } => NOT_FOUND,
            IdentityReloadError::Material(e) => MATERIAL.index(e),
            IdentityReloadError::Unavailable(_) => UNAVAILABLE,
            IdentityReloadError::OutsideValidity { validity, .. } => match validity {
                CertificateValidity::NotYetValid { .. } => NOT_YET_VALID,
                // `Valid` is not built for this variant; counted as the common case.
                CertificateValidity::Expired { .. } | CertificateValidity::Valid => EXPIRED,
            },
            // `InProgress` is never recorded; a variant added later is `other`.
            _ => OTHER,
        }
    }
}
